"""The link task's Flower-free core (flowergraph/tasks/link): metrics against independent computations, the edge
split's invariants, the cross-client test set and its scoring, local training, and the centralized Cora
reference (GCN test AUC >= 0.90, as PyG's examples/link_pred.py)."""

import ast
import math
import random
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from flowergraph.errors import ConfigError
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, load_global_graph, node_assignment
from flowergraph.tasks.link import (
    LinkPredictor,
    LinkSpec,
    auc,
    build_client_link_data,
    centralized_link_data,
    client_link_data,
    cross_test_set,
    embed,
    evaluate_cross,
    evaluate_link,
    hits_at_k,
    sample_train_negatives,
    score_cross,
    seeded_rngs,
    train_centralized,
    train_link,
)
from flowergraph.tasks.synthetic import CSBMParams
from flowergraph.tasks.training import TrainConfig

LINK_DIR = Path(__file__).resolve().parents[1] / "flowergraph" / "tasks" / "link"
SMALL = GraphSpec(
    dataset="synthetic", seed=0, synthetic=CSBMParams(num_nodes=600, num_classes=3, p_in=0.03, p_out=0.003)
)


# ------------------------------------------------------------------------------------------------------ metrics
def brute_auc(pos, neg) -> float:
    """P(s_pos > s_neg) + P(s_pos == s_neg) / 2 over every (positive, negative) pair."""
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def brute_hits(pos, neg, k) -> float:
    """A positive p is a hit when p > the K-th highest negative, i.e. when fewer than K negatives score >= p."""
    return sum(sum(n >= p for n in neg) < k for p in pos) / len(pos)


def test_auc_hand_case_and_ties():
    # pairs: 3>2, 3>1, 1<2, 1=1 (half) -> 2.5 / 4
    assert auc(torch.tensor([3.0, 1.0]), torch.tensor([2.0, 1.0])) == 0.625
    assert auc([1.0, 1.0], [1.0, 1.0, 1.0]) == 0.5  # all tied
    assert auc([2.0], [1.0]) == 1.0 and auc([1.0], [2.0]) == 0.0
    assert math.isnan(auc([], [1.0])) and math.isnan(auc([1.0], []))


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_sklearn_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 6, size=int(rng.integers(1, 40))).astype(np.float32)  # few values: many ties
    neg = rng.integers(-2, 5, size=int(rng.integers(1, 40))).astype(np.float32)
    got = auc(torch.from_numpy(pos), torch.from_numpy(neg))
    assert got == pytest.approx(brute_auc(pos, neg), abs=1e-12)
    try:
        from sklearn.metrics import roc_auc_score
    except ImportError:  # pragma: no cover - scikit-learn comes with smac
        return
    labels = np.r_[np.ones(pos.size), np.zeros(neg.size)]
    assert got == pytest.approx(roc_auc_score(labels, np.r_[pos, neg]), abs=1e-12)


def test_hits_at_k_hand_case():
    neg = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])
    pos = torch.tensor([4.5, 3.0, 6.0, 0.0])
    assert hits_at_k(pos, neg, 1) == 0.25  # above 5: 6
    assert hits_at_k(pos, neg, 2) == 0.5  # above 4: 4.5, 6
    assert hits_at_k(pos, neg, 3) == 0.5  # above 3 (strictly: the tie at 3 is no hit)
    assert hits_at_k(pos, neg, 5) == 0.75  # above 1
    assert hits_at_k(pos, neg, 6) == 1.0  # fewer negatives than K: 1.0, as OGB's Evaluator
    assert math.isnan(hits_at_k([], neg, 2))


@pytest.mark.parametrize("seed", range(5))
def test_hits_at_k_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 8, size=30).astype(np.float64)
    neg = rng.integers(0, 8, size=25).astype(np.float64)
    for k in (1, 2, 5, 10, 25):
        assert hits_at_k(pos, neg, k) == pytest.approx(brute_hits(pos, neg, k), abs=1e-12)


@pytest.mark.parametrize("k", [0, -3, 2.5, True, "50", None])
def test_bad_k_is_refused(k):
    with pytest.raises(ConfigError, match=re.escape(f"hits@K needs an integer K >= 1, got {k!r}")):
        hits_at_k([1.0], [0.0], k)


def test_non_finite_scores_are_refused():
    with pytest.raises(ValueError, match="positive scores must be finite; 1 are not"):
        auc([float("nan"), 1.0], [0.0])


# ------------------------------------------------------------------------------------------------- link spec
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"val_fraction": 1.0}, "link val-fraction must be in [0, 1), got 1.0"),
        ({"test_fraction": -0.1}, "link test-fraction must be in [0, 1), got -0.1"),
        (
            {"val_fraction": 0.5, "test_fraction": 0.5},
            "link val-fraction + test-fraction must be < 1 (the rest are the training edges), got 0.5 + 0.5 = 1.0",
        ),
        ({"neg_ratio": 0}, "link neg-ratio must be in (0, 100] (negatives per positive), got 0"),
        ({"seed": -1}, "link seed must be an integer >= 0, got -1"),
    ],
)
def test_link_spec_refuses_bad_values(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        LinkSpec(**kwargs)


# ------------------------------------------------------------------------------------------------------ data
def undirected_keys(pairs: torch.Tensor, n: int) -> list[int]:
    """Each pair as the key min * n + max (a list: duplicates stay visible)."""
    lo, hi = torch.minimum(pairs[0], pairs[1]), torch.maximum(pairs[0], pairs[1])
    return (lo * n + hi).tolist()


def global_pairs(d, pairs: torch.Tensor) -> torch.Tensor:
    return d.global_ids[pairs]


@pytest.mark.parametrize("partitioner", ["dirichlet", "louvain", "metis", "random"])
def test_client_split_invariants(partitioner):
    pspec = PartitionSpec(partitioner=partitioner, num_clients=3, seed=0)
    lspec = LinkSpec(val_fraction=0.1, test_fraction=0.2, neg_ratio=1.0, seed=3)
    graph = load_global_graph(SMALL)
    n = graph.num_nodes
    owner = torch.from_numpy(np.array(node_assignment(SMALL, pspec), dtype=np.int64))
    global_edges = set(undirected_keys(graph.edge_index, n))
    cross_pos_count: dict[int, int] = {}
    cross = cross_test_set(SMALL, pspec, lspec)
    for k in range(3):
        d = client_link_data(SMALL, pspec, lspec, k)
        assert torch.equal(d.global_ids, torch.nonzero(owner == k, as_tuple=True)[0])
        assert torch.equal(d.x, graph.x[d.global_ids])
        # the client's own edges, computed independently from the global graph and the assignment
        src, dst = graph.edge_index
        own = (owner[src] == k) & (owner[dst] == k) & (src < dst)
        own_edges = sorted((src[own] * n + dst[own]).tolist())
        splits = {s: undirected_keys(global_pairs(d, getattr(d, f"{s}_pos")), n) for s in ("train", "val", "test")}
        for keys in splits.values():
            assert len(keys) == len(set(keys))  # each undirected edge once
        # every own edge in exactly one split
        assert sorted(splits["train"] + splits["val"] + splits["test"]) == own_edges
        e = len(own_edges)
        assert (len(splits["val"]), len(splits["test"])) == (int(0.1 * e), int(0.2 * e))
        # the message-passing graph is the training positives in both directions: no val/test positive in it
        mp = global_pairs(d, d.edge_index)
        assert sorted(undirected_keys(mp, n)) == sorted(splits["train"] * 2)
        assert set((mp[0] * n + mp[1]).tolist()) == {a * n + b for a, b in global_pairs(d, d.train_pos).T.tolist()} | {
            b * n + a for a, b in global_pairs(d, d.train_pos).T.tolist()
        }
        assert not set(undirected_keys(mp, n)) & (set(splits["val"]) | set(splits["test"]))
        # cross-client edges: in no client's message-passing graph
        assert bool((owner[mp[0]] == owner[mp[1]]).all())
        # negatives: pairs of own nodes (local indices), no self loop, not an edge of the global graph
        for s in ("val", "test"):
            neg = getattr(d, f"{s}_neg")
            assert neg.size(1) == len(splits[s])  # neg-ratio 1 (this graph has plenty of non-edges)
            assert bool((neg >= 0).all() and (neg < d.num_nodes).all() and (neg[0] != neg[1]).all())
            assert not set(undirected_keys(global_pairs(d, neg), n)) & global_edges
        # the client's view of the cross-client set: its endpoint local, the remote one global, with its owner
        for view, owners, pairs in (
            (d.cross_pos, d.cross_pos_owner, cross.pos),
            (d.cross_neg, d.cross_neg_owner, cross.neg),
        ):
            assert bool((owner[view[1]] == owners).all() and (owners != k).all())
            mine = (owner[pairs[0]] == k) | (owner[pairs[1]] == k)
            expected = sorted(undirected_keys(pairs[:, mine], n))
            assert sorted(undirected_keys(torch.stack([d.global_ids[view[0]], view[1]]), n)) == expected
        for key in undirected_keys(torch.stack([d.global_ids[d.cross_pos[0]], d.cross_pos[1]]), n):
            cross_pos_count[key] = cross_pos_count.get(key, 0) + 1
    # the cross-client test set: every cross-client edge of the global graph exactly once, u < v
    src, dst = graph.edge_index
    crossing = (owner[src] != owner[dst]) & (src < dst)
    expected_cross = sorted((src[crossing] * n + dst[crossing]).tolist())
    assert expected_cross  # the partition does cut edges
    assert sorted((cross.pos[0] * n + cross.pos[1]).tolist()) == expected_cross
    assert bool((cross.pos[0] < cross.pos[1]).all())
    assert set(cross_pos_count.values()) == {2} and sorted(cross_pos_count) == expected_cross  # both owners' views
    # cross negatives: distinct pairs of nodes of different owners that are not edges
    neg_keys = undirected_keys(cross.neg, n)
    assert len(neg_keys) == len(set(neg_keys)) == len(expected_cross)
    assert bool((owner[cross.neg[0]] != owner[cross.neg[1]]).all() and (cross.neg[0] < cross.neg[1]).all())
    assert not set(neg_keys) & global_edges


def test_seed_fixes_every_split():
    pspec = PartitionSpec(partitioner="random", num_clients=3, seed=0)
    fields = ("edge_index", "train_pos", "val_pos", "val_neg", "test_pos", "test_neg", "cross_pos", "cross_neg")
    a = build_client_link_data(SMALL, pspec, LinkSpec(seed=1), 1)
    torch.manual_seed(123)  # the global generators' state does not matter
    random.seed(123)
    b = build_client_link_data(SMALL, pspec, LinkSpec(seed=1), 1)
    c = build_client_link_data(SMALL, pspec, LinkSpec(seed=2), 1)
    assert a is not b and all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields)
    for f in ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg", "cross_neg"):
        assert not torch.equal(getattr(a, f), getattr(c, f)), f
    assert torch.equal(a.cross_pos, c.cross_pos)  # the cross positives are the cut, not drawn
    fresh = cross_test_set.__wrapped__(SMALL, pspec, LinkSpec(seed=1))
    assert torch.equal(fresh.neg, cross_test_set(SMALL, pspec, LinkSpec(seed=1)).neg)
    # memoised per process
    assert client_link_data(SMALL, pspec, LinkSpec(seed=1), 1) is client_link_data(SMALL, pspec, LinkSpec(seed=1), 1)


def test_seeded_rngs_leave_the_global_generators_alone():
    def draw():
        return random.random(), torch.rand(3)

    random.seed(7)
    torch.manual_seed(7)
    expected = draw()
    random.seed(7)
    torch.manual_seed(7)
    with seeded_rngs(1, 2):
        inside = draw()
    after = draw()
    assert after[0] == expected[0] and torch.equal(after[1], expected[1])
    with seeded_rngs(1, 2):
        again = draw()
    assert again[0] == inside[0] and torch.equal(again[1], inside[1])


def test_centralized_variant_is_the_whole_graph():
    d = centralized_link_data(SMALL, LinkSpec())
    graph = load_global_graph(SMALL)
    assert d.num_nodes == graph.num_nodes and d.num_clients == 1
    assert d.cross_pos.size(1) == 0 and d.cross_neg.size(1) == 0
    total = d.train_pos.size(1) + d.val_pos.size(1) + d.test_pos.size(1)
    assert total == graph.edge_index.size(1) // 2


# ------------------------------------------------------------------------------------------- cross scoring
def test_score_cross_uses_each_endpoints_owner():
    pspec = PartitionSpec(partitioner="random", num_clients=3, seed=0)
    lspec = LinkSpec()
    cross = cross_test_set(SMALL, pspec, lspec)
    clients = [client_link_data(SMALL, pspec, lspec, k) for k in range(3)]
    # three different encoders: a pair's score must take each endpoint's row from its own owner's model
    local = {k: embed(LinkPredictor(d.num_features, hidden=16, out=8, seed=k), d) for k, d in enumerate(clients)}
    pos, neg = score_cross(cross, {k: clients[k].global_rows(z) for k, z in local.items()})

    def expected(pairs):
        rows = []
        for u, v in pairs.T.tolist():
            zu = [local[k][clients[k].global_ids.tolist().index(u)] for k in range(3) if u in clients[k].global_ids][0]
            zv = [local[k][clients[k].global_ids.tolist().index(v)] for k in range(3) if v in clients[k].global_ids][0]
            rows.append(float(zu @ zv))
        return torch.tensor(rows)

    assert torch.allclose(pos[:50], expected(cross.pos[:, :50]), atol=1e-5)
    assert torch.allclose(neg[:50], expected(cross.neg[:, :50]), atol=1e-5)
    # the owners' own rows ([n_k, d]) give the same scores
    pos2, neg2 = score_cross(cross, local)
    assert torch.equal(pos, pos2) and torch.equal(neg, neg2)
    metrics = evaluate_cross(cross, local, k=20)
    assert metrics["num_cross_pos"] == cross.pos.size(1) and metrics["cross_auc"] == auc(pos, neg)
    assert metrics["cross_hits@20"] == hits_at_k(pos, neg, 20)
    with pytest.raises(ConfigError, match=r"no embeddings from client 2, which owns \d+ endpoint\(s\)"):
        score_cross(cross, {0: local[0], 1: local[1]})
    with pytest.raises(ConfigError, match=r"client 0's embeddings have shape \(5, 8\)"):
        score_cross(cross, {0: torch.zeros(5, 8), 1: local[1], 2: local[2]})


# ------------------------------------------------------------------------------------------------- training
def test_train_negatives_are_seeded_non_edges():
    d = client_link_data(SMALL, PartitionSpec(partitioner="random", num_clients=3, seed=0), LinkSpec(), 0)
    a, b, c = (sample_train_negatives(d, 0, 0), sample_train_negatives(d, 0, 0), sample_train_negatives(d, 0, 1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    mp = set((d.edge_index[0] * d.num_nodes + d.edge_index[1]).tolist())
    assert not set((a[0] * d.num_nodes + a[1]).tolist()) & mp and bool((a[0] != a[1]).all())


def test_local_training_improves_each_clients_auc():
    """Three clients of a synthetic graph (random partition, so each holds every class): 50 local epochs
    raise every client's own test AUC over the untrained model's."""
    gspec = GraphSpec(
        dataset="synthetic",
        seed=0,
        synthetic=CSBMParams(num_nodes=1500, num_classes=3, p_in=0.02, p_out=0.001, signal=0.3),
    )
    pspec = PartitionSpec(partitioner="random", num_clients=3, seed=0)
    cfg = TrainConfig(local_steps=50, optimizer="adam", lr=0.01, weight_decay=0.0)
    embeddings = {}
    for k in range(3):
        d = client_link_data(gspec, pspec, LinkSpec(), k)
        model = LinkPredictor(d.num_features, "gcn", hidden=32, out=16, seed=0)
        before = evaluate_link(model, d)
        loss = train_link(model, d, cfg, seed=0)
        after = evaluate_link(model, d)
        assert math.isfinite(loss)
        assert after["test_auc"] > before["test_auc"] + 0.05, (k, before, after)
        assert after["num_test_pos"] == d.test_pos.size(1) and "test_hits@50" in after
        embeddings[k] = embed(model, d)
    cross = evaluate_cross(cross_test_set(gspec, pspec, LinkSpec()), embeddings)
    assert cross["num_cross_pos"] > 0 and 0.0 <= cross["cross_auc"] <= 1.0


def test_sage_encoder_trains():
    d = centralized_link_data(SMALL, LinkSpec())
    model = LinkPredictor(d.num_features, "sage", hidden=16, out=8, layers=3, dropout=0.2, seed=0)
    first = train_link(model, d, TrainConfig(local_steps=1, optimizer="adam", lr=0.01, weight_decay=0.0), seed=0)
    later = train_link(model, d, TrainConfig(local_steps=20, optimizer="adam", lr=0.01, weight_decay=0.0), seed=0)
    assert later < first
    with pytest.raises(ValueError, match="unknown model 'gat'; valid choices: gcn, sage"):
        LinkPredictor(4, "gat")


def test_cora_centralized_gcn_reaches_auc_090(shared_data):
    """PyG's examples/link_pred.py setting: GCN 128/64, Adam lr 0.01, 5% / 10% val / test edges, fresh
    negatives every epoch, 100 epochs, test AUC at the best validation epoch."""
    started = time.perf_counter()
    result = train_centralized(GraphSpec(dataset="Cora", data_dir=str(shared_data)), LinkSpec(seed=0), seed=0)
    print(f"Cora centralized: {result} ({time.perf_counter() - started:.1f} s with the data)")
    assert result["test_auc"] >= 0.90
    assert (result["num_test_pos"], result["num_val_pos"]) == (527, 263)  # 5,278 edges: int(10%), int(5%)


# ----------------------------------------------------------------------------------------------------- layout
def test_the_link_core_never_imports_flwr():
    for path in sorted(LINK_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(name.split(".")[0] == "flwr" for name in names), path
