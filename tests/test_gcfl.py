"""GCFL (method=gcfl on graph classification: FedStar's GCFL baseline; flowergraph.methods.gcfl.server): the cut and the
similarity against brute force and
per-pair formulas, the clustered federation against an independent replay (clusters, what each client is sent,
final accuracies), a split postponed when a member sends nothing, resume with the clusters restored, and bad
settings."""

import itertools

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.methods.fedstar.client import VARIANTS, shared_keys
from flowergraph.settings import parse_run_config
from flowergraph.errors import ConfigError
from flowergraph.app.inprocess import run_inprocess
from flowergraph.storage.results import read_run
from flowergraph.methods.gcfl.server import min_cut, update_similarity
from flowergraph.tasks.graphcls.data import GraphTaskSpec, client_graph_data
from flowergraph.tasks.graphcls.models import build_graph_model
from flowergraph.tasks.graphcls.training import GraphTrainConfig, evaluate, make_optimizer, train_epochs
from flowergraph.tasks.torch_state import load_module_arrays, module_arrays

DATASETS = "MUTAG,PTC_MR,BZR,COX2"
# thresholds that make every cluster of >= 3 clients split as soon as the warm-up is over (rounds 3 and 4)
FORCE = {"gcfl.eps1": 100.0, "gcfl.eps2": 1e-6, "gcfl.warmup": 2}


def _cut_weight(sim, side):
    other = [i for i in range(len(sim)) if i not in side]
    return sum(sim[i, j] for i in side for j in other)


@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_min_cut_is_a_minimum_cut(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        sim = rng.uniform(0, 2, size=(n, n))
        sim = (sim + sim.T) / 2
        left, right = min_cut(sim)
        assert sorted(left + right) == list(range(n)) and left and right and 0 in left
        best = min(_cut_weight(sim, side) for k in range(1, n) for side in itertools.combinations(range(n), k))
        assert _cut_weight(sim, left) == pytest.approx(best)
    two_groups = np.array([[2, 1.9, 0.1, 0.2], [1.9, 2, 0.2, 0.1], [0.1, 0.2, 2, 1.8], [0.2, 0.1, 1.8, 2]])
    assert min_cut(two_groups) == ([0, 1], [2, 3])
    with pytest.raises(ValueError, match="a cut needs at least 2 nodes, got 1"):
        min_cut(np.ones((1, 1)))


def test_update_similarity_is_cosine_plus_one():
    rng = np.random.default_rng(0)
    dws = np.vstack([rng.normal(size=(3, 6)), np.zeros((1, 6))])
    sim = update_similarity(dws)
    for i in range(3):
        for j in range(3):
            cos = dws[i] @ dws[j] / (np.linalg.norm(dws[i]) * np.linalg.norm(dws[j]))
            assert sim[i, j] == pytest.approx(cos + 1)
    assert sim[3] == pytest.approx(np.ones(4))  # a zero update: similarity 1 with everything


def _run(shared_data, tmp_path, name, **extra):
    return {
        "method": "gcfl",
        "dataset": DATASETS,
        "num-clients": 4,
        "rounds": 5,
        "seed": 3,
        "data-dir": str(shared_data),
        "out-dir": str(tmp_path / name),
        **FORCE,
        **extra,
    }


def _brute_min_cut(sim):
    """The lightest bipartition by enumeration (ties: the first found in lexicographic order of side sizes)."""
    n = len(sim)
    sides = [list(s) for k in range(1, n) for s in itertools.combinations(range(n), k) if 0 in s]
    weights = [_cut_weight(sim, s) for s in sides]
    best = min(weights)
    return [s for s, w in zip(sides, weights) if w <= best + 1e-9]


def _wire(proxies):
    """Per partition: the arrays it was sent and returned in each fit, and what its final evaluation received."""
    out = {}
    for proxy in proxies:
        fits = [(ins, res) for kind, ins, res in proxy.messages if kind == "fit"]
        pid = int(fits[0][1].metrics["partition_id"])
        (final,) = [ins for kind, ins, _ in proxy.messages if kind == "evaluate"]
        out[pid] = (
            [parameters_to_ndarrays(i.parameters) for i, _ in fits],
            [parameters_to_ndarrays(r.parameters) for _, r in fits],
            parameters_to_ndarrays(final.parameters),
        )
    return out


def _within_one_rounding(got, want64):
    """|got - want| <= one float32 ulp of want, element-wise: ``want64`` is an exact float64 mean and ``got`` the
    library's float32 model; the two differ by the final cast to float32 and by float64 rounding of the sum
    (~1e-16 relative, far below a float32 ulp of 6e-8 relative)."""
    want64 = np.asarray(want64, np.float64)
    return np.abs(np.asarray(got, np.float64) - want64) <= np.spacing(np.abs(want64).astype(np.float32))


def _teacher_forced_replay(shared_data, wire, seed, eps1, eps2, warmup):
    """GCFL by hand with the core functions (the authors' run_gcfl), checked round by round against the wire.

    Each round, every client of the replay (its own GIN and Adam, persisting across rounds as on the client)
    trains from the model the run actually sent it, so rounding differences never compound: Adam turns a 1-ulp
    difference in a received weight into ~1e-4 within three rounds (the cause of this test's earlier failures at
    a fixed 2e-7). The replay's trained arrays must equal what the client returned bit for bit (same inputs, same
    operations, one torch thread as in the client); its cluster decisions come from its own updates; the model
    each client is sent next must be its cluster's training-count weighted mean, computed here exactly in
    float64, to within one float32 rounding. Returns the clusters after each round and the final accuracies."""
    spec = GraphTaskSpec(datasets=DATASETS, data_dir=str(shared_data), num_clients=4)
    kind, part, _ = VARIANTS["gcfl"]
    clients = []
    for k in range(4):
        data = client_graph_data(spec, k)
        model = build_graph_model(kind, data.num_features, data.num_classes, data.structure_dim, seed=seed)
        clients.append((data, model, make_optimizer(model, GraphTrainConfig())))
    keys = shared_keys(clients[0][1], part, cross_dataset=True)
    clusters = [[0, 1, 2, 3]]
    rounds = len(wire[0][0])
    history, wrong_detected = [], []
    for r in range(1, rounds + 1):
        sent = {k: wire[k][0][r - 1] for k in range(4)}
        for members in clusters:  # members of one cluster were sent the same model
            for k in members[1:]:
                for a, b in zip(sent[k], sent[members[0]]):
                    np.testing.assert_array_equal(a, b)
        trained = {}
        for k in range(4):
            data, model, opt = clients[k]
            load_module_arrays(model, dict(zip(keys, sent[k])))
            train_epochs(model, opt, data.train, GraphTrainConfig(), seed=seed, round=r, client=k)
            trained[k] = [a.copy() for a in module_arrays(model, keys).values()]
            for a, b in zip(trained[k], wire[k][1][r - 1], strict=True):
                np.testing.assert_array_equal(a, b)  # the client trained exactly as the replay does
        new = []
        for members in clusters:
            base = sent[members[0]]
            dws = np.stack(
                [
                    np.concatenate(
                        [(t.astype(np.float64) - s.astype(np.float64)).ravel() for t, s in zip(trained[k], base)]
                    )
                    for k in members
                ]
            )
            mean_norm, max_norm = np.linalg.norm(dws.mean(axis=0)), np.linalg.norm(dws, axis=1).max()
            if mean_norm < eps1 and max_norm > eps2 and len(members) > 2 and r > warmup:
                norms = np.linalg.norm(dws, axis=1)
                sim = dws @ dws.T / np.outer(norms, norms) + 1
                (side,) = _brute_min_cut(sim)  # the test's settings have a unique minimum cut
                new += [[members[i] for i in side], [m for i, m in enumerate(members) if i not in side]]
            else:
                new.append(members)
        clusters = new
        history.append([list(c) for c in clusters])
        following = [wire[k][0][r] for k in range(4)] if r < rounds else [wire[k][2] for k in range(4)]
        for members in clusters:
            w = np.array([clients[k][0].num_train for k in members], np.float64)
            caught = False
            for i in range(len(keys)):
                stack = np.stack([trained[k][i].astype(np.float64) for k in members])
                exact = np.tensordot(w / w.sum(), stack, axes=1)
                unweighted = stack.mean(axis=0)  # a deliberately wrong cluster model
                for k in members:
                    ok = _within_one_rounding(following[k][i], exact)
                    assert ok.all(), (r, k, keys[i], float(np.abs(following[k][i] - exact).max()))
                    caught = caught or not _within_one_rounding(following[k][i], unweighted).all()
            if len(members) > 1 and len(set(w)) > 1:
                wrong_detected.append(caught)
    accs = []
    for k, (data, model, _) in enumerate(clients):
        load_module_arrays(model, dict(zip(keys, wire[k][2])))
        accs.append(evaluate(model, data, splits=("test",))["test_accuracy"])
    return history, accs, wrong_detected


def test_clustered_federation_equals_an_independent_replay(shared_data, tmp_path):
    _, proxies = run_inprocess(_run(shared_data, tmp_path, "gcfl"), record=True)
    rounds = read_run(tmp_path / "gcfl")["rounds"]
    history, accs, wrong_detected = _teacher_forced_replay(
        shared_data, _wire(proxies), seed=3, eps1=100.0, eps2=1e-6, warmup=2
    )
    assert [r["gcfl"]["clusters"] for r in rounds] == history
    assert history[1] == [[0, 1, 2, 3]] and len(history[2]) == 2 and len(history[-1]) >= 3  # splits in 3 and 4
    assert [s["round"] for r in rounds for s in r["gcfl"].get("split", [])] == [3] + [4] * (
        len(history[3]) - len(history[2])
    )
    # the one-rounding tolerance is strict enough to tell a wrong cluster model (unweighted mean) from the right one
    assert wrong_detected and all(wrong_detected)
    last = rounds[-1]
    assert [last["clients"][str(k)]["accuracy"] for k in range(4)] == pytest.approx(accs, abs=1e-9)


def test_without_a_split_gcfl_is_fedper(shared_data, tmp_path):
    """Before any cluster splits, GCFL is FedPer across datasets (both share the GIN layers, averaged by
    training-graph counts): the same accuracies, client by client."""
    run_inprocess(_run(shared_data, tmp_path, "nosplit", rounds=3, **{"gcfl.warmup": 10}))
    run_inprocess({**_run(shared_data, tmp_path, "fedper", rounds=3), "method": "fedper"})
    a, b = read_run(tmp_path / "nosplit")["rounds"], read_run(tmp_path / "fedper")["rounds"]
    assert [r["gcfl"]["clusters"] for r in a] == [[[0, 1, 2, 3]]] * 3
    assert [r["clients"] for r in a] == [r["clients"] for r in b]


def test_split_waits_for_every_member_and_resume_keeps_the_clusters(shared_data, tmp_path):
    """Client 1 fails in round 3: the due split of the whole federation is postponed (recorded) and happens in
    round 4; a run resumed from the round-4 checkpoint continues with the split clusters and their models and
    ends exactly where the uninterrupted run ends."""
    base = _run(
        shared_data,
        tmp_path,
        "faulty",
        rounds=6,
        **{"inject-faults": "raise:1@3", "checkpoint-every": 4, "min-clients": 2},
    )
    run_inprocess(base)
    a = read_run(tmp_path / "faulty")["rounds"]
    assert a[2]["gcfl"]["postponed"] == [{"cluster": [0, 1, 2, 3], "missing": [1]}]
    assert a[2]["gcfl"]["clusters"] == [[0, 1, 2, 3]] and len(a[3]["gcfl"]["clusters"]) == 2
    bank = load_checkpoint(tmp_path / "faulty" / "checkpoints" / "round-000004.npz").strategy_state["bank"]
    assert list(bank["groups"].values()) == a[3]["gcfl"]["clusters"]
    assert sorted(bank["models"]) == sorted(f"group:{name}" for name in bank["groups"])  # each cluster's model
    run_inprocess(
        {
            **base,
            "resume-from": str(tmp_path / "faulty" / "checkpoints" / "round-000004.npz"),
            "out-dir": str(tmp_path / "resumed"),
        }
    )
    b = read_run(tmp_path / "resumed")["rounds"]
    assert [r["gcfl"]["clusters"] for r in a] == [r["gcfl"]["clusters"] for r in b]
    assert [r["clients"] for r in a] == [r["clients"] for r in b]
    for x, y in zip(load_checkpoint(tmp_path / "faulty").arrays, load_checkpoint(tmp_path / "resumed").arrays):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "raw,match",
    [
        (
            {"secure-agg": "ckks"},
            "secure-agg='ckks' gives the server only the sum of whole updates of one global model, "
            "but method 'gcfl' declares update_kind='weights', model_scope='per-group' and updates "
            "that cannot be summed; valid with this method: secure-agg='none'",
        ),
        (
            {"dp": "central-server", "weighting": "uniform"},
            "dp='central-server' clips whole weight updates against one "
            "global model .* valid with this method: dp='none' or 'local'",
        ),
        ({"gcfl.eps1": 0.0}, "gcfl.eps1=0.0: must be > 0"),
        ({"gcfl.warmup": -1}, "gcfl.warmup=-1: must be >= 0"),
    ],
)
def test_bad_gcfl_settings(raw, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config({"method": "gcfl", "dataset": "MUTAG,BZR,COX2", "num-clients": 3, **raw})


@pytest.mark.simulation
def test_clusters_through_flowers_simulation(shared_data, tmp_path):
    """Through Flower's simulation engine, inline (node ids unknown in advance, every message serialised): the split of
    round 2 and each
    client's cluster model in round 3's training and in the final separate evaluation match the in-process run."""
    from flowergraph.simulation import run_simulation

    extra = {**FORCE, "gcfl.warmup": 1, "seed": 3, "data-dir": str(shared_data)}
    result = run_simulation(
        "gcfl",
        dataset="MUTAG,PTC_MR,BZR",
        rounds=3,
        out=tmp_path / "sim",
        timeout=400,
        overrides={**extra, "simulation-engine": "inline"},
    )
    assert result.ok, result.log_file.read_text()[-3000:]
    got = read_run(tmp_path / "sim")["rounds"]
    run_inprocess(
        {**_run(shared_data, tmp_path, "ref", rounds=3), **extra, "dataset": "MUTAG,PTC_MR,BZR", "num-clients": 3}
    )
    want = read_run(tmp_path / "ref")["rounds"]
    assert [r["gcfl"]["clusters"] for r in got] == [r["gcfl"]["clusters"] for r in want]
    assert len(got[-1]["gcfl"]["clusters"]) == 2
    accuracies = [[r["clients"][k]["accuracy"] for k in ("0", "1", "2")] for r in (got[-1], want[-1])]
    assert accuracies[0] == pytest.approx(accuracies[1], abs=1e-6)
    assert [r["mean_client_accuracy"] for r in got] == pytest.approx(
        [r["mean_client_accuracy"] for r in want], abs=1e-6
    )


def test_cluster_models_are_weighted_means_of_their_members():
    """The strategy alone, on synthetic updates: two opposite groups of updates split the federation once the
    warm-up is over; each cluster's model (a group of the model bank) is its members' weighted mean; an update
    without a partition id of the federation only enters the federation-wide model."""
    from flowergraph.strategies import FederationPolicy
    from flowergraph.strategies.aggregation import Update
    from flowergraph.strategies.bank import group_slot
    from flowergraph.methods.gcfl.server import GCFLStrategy

    strategy = GCFLStrategy(FederationPolicy(num_clients=4), eps1=1.0, eps2=0.5, warmup=1)
    start = [np.zeros(3, np.float32)]
    strategy.global_arrays = start
    direction = {0: 1.0, 1: 1.0, 2: -1.0, 3: -1.0}
    updates = [
        Update(
            str(p), [np.array([d, d * 0.5 + 0.1 * p, 0.2], np.float32)], 10 * (p + 1), {"partition_id": p}, keys=["0"]
        )
        for p, d in direction.items()
    ]
    stray = Update("node 9", [np.full(3, 100.0, np.float32)], 5, {}, keys=["0"])
    weights = [float(u.num_examples) for u in updates] + [5.0]
    out = strategy.aggregate_updates(1, updates + [stray], weights)  # round 1: warm-up, no split
    assert strategy.clusters == [[0, 1, 2, 3]]
    (only,) = strategy.bank.groups
    np.testing.assert_allclose(
        strategy.bank.get(group_slot(only))["0"],
        sum(w * u.arrays[0] for w, u in zip(weights, updates)) / sum(weights[:4]),
        rtol=1e-6,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        out["0"], sum(w * u.arrays[0] for w, u in zip(weights, updates + [stray])) / sum(weights), rtol=1e-6, atol=1e-7
    )  # the stray update counts for the FL model only
    strategy.bank.set(group_slot(only), {"0": start[0]})
    strategy.aggregate_updates(2, updates, weights[:4])
    assert strategy.clusters == [[0, 1], [2, 3]]
    for name, members in strategy.bank.groups.items():
        ws = [weights[p] for p in members]
        np.testing.assert_allclose(
            strategy.bank.get(group_slot(name))["0"],
            sum(w * updates[p].arrays[0] for w, p in zip(ws, members)) / sum(ws),
            rtol=1e-6,
            atol=1e-7,
        )
    strategy.directory.partition_of.update({"a": 0, "b": 3, "c": 7})
    proxy = type("P", (), {})
    (first, second) = strategy.bank.groups
    for cid, name in (("a", first), ("b", second)):
        p = proxy()
        p.cid = cid  # noqa: E702
        np.testing.assert_array_equal(
            strategy.instruction(1, p, {}).arrays[0], strategy.bank.get(group_slot(name))["0"]
        )
    for cid in ("unknown", "c"):  # not identified / a partition outside the federation: the global model
        p = proxy()
        p.cid = cid  # noqa: E702
        np.testing.assert_array_equal(strategy.instruction(1, p, {}).arrays[0], strategy.global_arrays[0])
