"""The Flower-free core of ASFGNN (flowergraph.methods.asfgnn.maths): divergence and mixing maths against hand
computations, the two networks and what of them may leave a client, the paper's client splits of Cora and
CiteSeer, determinism of training, and the search drivers (grid, random, SMAC ask/tell and resume)."""

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from flowergraph.errors import ConfigError, PartitionError
from flowergraph.methods.asfgnn.maths import data as adata
from flowergraph.methods.asfgnn.maths.divergence import (
    average_arrays,
    js_divergence,
    kl_divergence,
    label_counts,
    label_distribution,
    mix_arrays,
    sum_counts,
)
from flowergraph.methods.asfgnn.maths.models import (
    build_model,
    fgnn_arrays,
    fgnn_keys,
    l2_penalty,
    load_fgnn_arrays,
    sgnn_arrays,
    sgnn_keys,
    sparse_csr,
)
from flowergraph.methods.asfgnn.maths.reference import run_centralized, run_clients, run_config
from flowergraph.methods.asfgnn.maths.search import (
    GridSearch,
    RandomSearch,
    SearchSpace,
    SmacSearch,
    client_hyperparams,
    config_from_hyperparams,
    load_driver,
    make_driver,
)
from flowergraph.methods.asfgnn.maths.training import (
    HyperParams,
    evaluate,
    local_round,
    make_model,
    make_optimizer,
    round_generator,
)

# ------------------------------------------------------------------------------------------ divergence maths


def test_js_divergence_hand_computations():
    assert js_divergence([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == 0.0
    assert js_divergence([2, 3, 5], [4, 6, 10]) == pytest.approx(0.0, abs=1e-15)  # counts are normalised
    assert js_divergence([1, 1, 0, 0], [0, 0, 3, 1]) == 1.0  # disjoint supports
    # P = (1/2, 1/2), Q = (1, 0): M = (3/4, 1/4); KL(P||M) = 1/2 log2(2/3) + 1/2 log2 2, KL(Q||M) = log2(4/3)
    # JS = 1/2 (KL(P||M) + KL(Q||M)) = 3/2 - 3/4 log2 3 = 0.311278...
    expected = 1.5 - 0.75 * math.log2(3)
    assert js_divergence([0.5, 0.5], [1.0, 0.0]) == pytest.approx(expected, abs=1e-12)
    assert js_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(expected, abs=1e-12)  # symmetric
    assert kl_divergence([0.5, 0.5], [0.75, 0.25]) == pytest.approx(0.5 * math.log2(2 / 3) + 0.5, abs=1e-12)
    assert kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf
    # Cora, alpha = 1: client A's training labels (20 in each of its 4 classes) against the server's (20 x 7):
    # M = 11/56 on A's classes, 1/14 elsewhere; JS = 1/2 [log2(14/11) + 4/7 log2(8/11) + 3/7]
    cora_a = 0.5 * (math.log2(14 / 11) + 4 / 7 * math.log2(8 / 11) + 3 / 7)
    assert js_divergence([20, 20, 20, 0, 20, 0, 0], [20] * 7) == pytest.approx(cora_a, abs=1e-12)
    assert cora_a == pytest.approx(0.25698, abs=1e-5)


def test_js_divergence_bad_inputs_name_the_value():
    with pytest.raises(ConfigError, match=r"-1\.0.*negative"):
        js_divergence([1, -1], [1, 1])
    with pytest.raises(ConfigError, match="3 and 2 entries"):
        js_divergence([1, 1, 1], [1, 1])
    with pytest.raises(ConfigError, match="sums to 0"):
        js_divergence([0, 0], [1, 1])
    with pytest.raises(ConfigError, match="base must be"):
        js_divergence([1, 0], [0, 1], base=1)


def test_label_counts_distribution_and_server_sum():
    y = np.array([0, 2, 2, 1, 2, 0, 3])
    mask = np.array([1, 1, 1, 0, 1, 0, 1], dtype=bool)
    assert label_counts(y, 5, mask).tolist() == [1, 0, 3, 1, 0]
    assert label_distribution([1, 0, 3, 1, 0]).tolist() == [0.2, 0.0, 0.6, 0.2, 0.0]
    assert sum_counts([[1, 0, 3], [2, 2, 0]]).tolist() == [3, 2, 3]
    with pytest.raises(ConfigError, match=r"label 3 is outside the valid classes 0\.\.2"):
        label_counts(y, 3)


def test_mixing_against_hand_computation_and_the_off_switch():
    local = {"w": np.array([[1.0, 2.0]], dtype=np.float32), "b": np.array([4.0], dtype=np.float32)}
    server = {"w": np.array([[3.0, 6.0]], dtype=np.float32), "b": np.array([0.0], dtype=np.float32)}
    mixed = mix_arrays(local, server, 0.25)  # 0.25 * local + 0.75 * server
    assert mixed["w"].tolist() == [[2.5, 5.0]] and mixed["b"].tolist() == [1.0]
    assert mixed["w"].dtype == np.float32
    assert mix_arrays(local, server, 1.0)["w"].tolist() == [[1.0, 2.0]]
    off = mix_arrays(local, server, 0.25, use_js=False)  # plain replacement
    assert off["w"].tolist() == [[3.0, 6.0]] and off["b"].tolist() == [0.0]
    assert local["w"].tolist() == [[1.0, 2.0]]  # inputs untouched
    with pytest.raises(ConfigError, match=r"js 1\.5 is outside \[0, 1\]"):
        mix_arrays(local, server, 1.5)
    with pytest.raises(ConfigError, match=r"missing \['b'\]"):
        mix_arrays(local, {"w": server["w"]}, 0.5)


def test_average_arrays_plain_and_weighted():
    a = {"w": np.array([0.0, 4.0])}
    b = {"w": np.array([4.0, 8.0])}
    assert average_arrays([a, b])["w"].tolist() == [2.0, 6.0]
    assert average_arrays([a, b], weights=[1, 3])["w"].tolist() == [3.0, 7.0]
    with pytest.raises(ConfigError, match="2 weights for 3"):
        average_arrays([a, b, a], weights=[1, 1])


# --------------------------------------------------------------------------------------------------- networks


def _toy_graph(n=6, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g)
    edges = torch.tensor([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [0, 3]]).t()
    return x, torch.cat([edges, edges.flip(0)], dim=1)


def test_sgnn_fgnn_shapes_and_unit_embeddings():
    x, ei = _toy_graph()
    model = build_model(in_dim=5, num_classes=7, hidden=64, depth=3, dropout=0.5, seed=1)
    model.eval()
    h = model.embed(x, ei)
    assert h.shape == (6, 64)
    assert torch.allclose(h.norm(dim=1), torch.ones(6), atol=1e-6)
    assert model(x, ei).shape == (6, 7)
    assert len(model.sgnn.convs) == 3
    assert torch.allclose(model(sparse_csr(x), ei), model(x, ei), atol=1e-6)  # the sparse input path
    assert model.fgnn.lin1.weight.shape == (64, 64) and model.fgnn.lin2.weight.shape == (7, 64)


def test_sgnn_k1_against_a_hand_computation():
    """K = 1: H_v = normalise(tanh(W_r h_v + W_l mean_{u in N(v)} h_u + b)), h = x W_0 (Algorithm 1)."""
    x, ei = _toy_graph()
    model = build_model(in_dim=5, num_classes=3, hidden=8, depth=1, seed=4)
    model.eval()
    n = x.size(0)
    adj = torch.zeros(n, n)
    adj[ei[1], ei[0]] = 1.0  # row v: the neighbours u of v
    h0 = x @ model.sgnn.input.weight.t()
    mean = (adj @ h0) / adj.sum(1, keepdim=True)
    conv = model.sgnn.convs[0]
    h1 = torch.tanh(h0 @ conv.lin_r.weight.t() + mean @ conv.lin_l.weight.t() + conv.lin_l.bias)
    expected = h1 / h1.norm(dim=1, keepdim=True)
    assert torch.allclose(model.embed(x, ei), expected, atol=1e-6)
    logits = torch.tanh(expected @ model.fgnn.lin1.weight.t() + model.fgnn.lin1.bias) @ model.fgnn.lin2.weight.t()
    assert torch.allclose(model(x, ei), logits + model.fgnn.lin2.bias, atol=1e-6)


def test_fgnn_arrays_exclude_every_sgnn_parameter():
    model = build_model(in_dim=5, num_classes=4, hidden=64, depth=4, seed=0)
    shared = fgnn_arrays(model)
    assert sorted(shared) == ["fgnn.lin1.bias", "fgnn.lin1.weight", "fgnn.lin2.bias", "fgnn.lin2.weight"]
    sgnn_names = {f"sgnn.{name}" for name, _ in model.sgnn.named_parameters()}
    assert len(sgnn_names) == 1 + 3 * 4  # W_0 + (lin_l weight, lin_l bias, lin_r weight) per layer
    assert not sgnn_names & set(shared)
    assert set(sgnn_keys(model)) | set(fgnn_keys(model)) == set(model.state_dict())
    # loading: exactly the discriminator's names; an SGNN name is refused and named
    other = build_model(in_dim=5, num_classes=4, hidden=64, depth=2, seed=9)  # another client, other K
    before = sgnn_arrays(other)
    load_fgnn_arrays(other, shared)
    assert all(np.array_equal(fgnn_arrays(other)[k], v) for k, v in shared.items())
    assert all(np.array_equal(sgnn_arrays(other)[k], v) for k, v in before.items())
    with pytest.raises(ConfigError, match=r"sgnn\.input\.weight.*private SGNN"):
        load_fgnn_arrays(other, {**shared, "sgnn.input.weight": before["sgnn.input.weight"]})
    with pytest.raises(ConfigError, match=r"missing \['fgnn\.lin2\.bias'\]"):
        load_fgnn_arrays(other, {k: v for k, v in shared.items() if k != "fgnn.lin2.bias"})


def test_l2_penalty_hand_computation():
    model = build_model(in_dim=3, num_classes=2, hidden=4, depth=1, seed=0)
    squares = sum(float((p.detach() ** 2).sum()) for n, p in model.named_parameters() if "weight" in n)
    assert float(l2_penalty(model, 0.01).detach()) == pytest.approx(0.01 * squares / 2, rel=1e-6)


def test_bad_model_and_hyperparameter_values_name_the_choices():
    with pytest.raises(ConfigError, match=r"depth K 6 is invalid; valid choices: 1, 2, 3, 4, 5"):
        build_model(in_dim=3, num_classes=2, hidden=4, depth=6)
    with pytest.raises(ConfigError, match=r"dropout 1\.0 is outside the valid range \[0, 1\)"):
        HyperParams(dropout=1.0)
    with pytest.raises(ConfigError, match=r"lr -0\.1 is invalid"):
        HyperParams(lr=-0.1)
    with pytest.raises(ConfigError, match=r"unknown hyper-parameters \['K'\]; valid names: hidden, depth"):
        HyperParams.from_dict({"K": 2})


def test_no_flower_import():
    code = (
        "import sys, importlib.util; import flowergraph.methods.asfgnn.maths.reference as r, "
        "flowergraph.methods.asfgnn.maths.search as s\n"
        "if importlib.util.find_spec('smac'): s.SmacSearch(s.SearchSpace(), 2).ask()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'flwr'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def cora_clients(shared_data):
    return adata.all_clients("Cora", "label", 1.0, 0, data_dir=str(shared_data))


def test_cora_label_split_matches_the_paper(shared_data, cora_clients):
    graph = adata.load_graph("Cora", str(shared_data))
    assert adata.class_names("Cora", graph) == (
        "Theory",
        "Reinforcement_Learning",
        "Genetic_Algorithms",
        "Neural_Networks",
        "Probabilistic_Methods",
        "Case_Based",
        "Rule_Learning",
    )
    assert adata.paper_parts("Cora", graph) == ((0, 1, 2, 4), (3, 5, 6))
    a, b = cora_clients
    assert (a.num_nodes, b.num_nodes) == (1412, 1296)  # Table 2
    assert (a.num_edges, b.num_edges) == (2657, 1961)  # Table 2
    assert a.classes() == (0, 1, 2, 4) and b.classes() == (3, 5, 6)
    assert a.train_label_counts().tolist() == [20, 20, 20, 0, 20, 0, 0]  # the public split, restricted
    assert (a.num_train, a.num_val, a.num_test, b.num_train, b.num_val, b.num_test) == (80, 256, 514, 60, 244, 486)
    assert a.num_classes == b.num_classes == 7
    # the induced subgraph: local edges map to global edges between the client's own nodes
    ids = a.global_ids
    src, dst = ids[a.edge_index[0]], ids[a.edge_index[1]]
    global_edges = set(map(tuple, graph.edge_index.t().tolist()))
    assert all((int(u), int(v)) in global_edges for u, v in zip(src[:200], dst[:200]))
    assert torch.equal(a.x, graph.x[ids]) and torch.equal(a.y, graph.y[ids])


def test_alpha_moves_nodes_and_labels_between_the_clients(shared_data):
    part1 = np.isin(adata.load_graph("Cora", str(shared_data)).y.numpy(), (0, 1, 2, 4))
    a, b = adata.all_clients("Cora", "label", 0.8, 0, data_dir=str(shared_data))
    ga, gb = a.global_ids.numpy(), b.global_ids.numpy()
    assert not set(ga) & set(gb) and a.num_nodes + b.num_nodes == 2708  # disjoint, covering the graph
    # A: ~0.8 of part 1 (1412) and ~0.2 of part 2 (1296), per class and split role up to rounding
    assert abs(part1[ga].sum() - 0.8 * 1412) <= 12 and abs((~part1[ga]).sum() - 0.2 * 1296) <= 12
    assert a.train_label_counts().tolist() == [16, 16, 16, 4, 16, 4, 4]  # round(0.8 * 20) per home class
    assert b.train_label_counts().tolist() == [4, 4, 4, 16, 4, 16, 16]
    half_a, half_b = adata.all_clients("Cora", "label", 0.5, 0, data_dir=str(shared_data))
    assert half_a.train_label_counts().tolist() == half_b.train_label_counts().tolist() == [10] * 7
    # a pure function of (dataset, setting, alpha, seed, client); another seed draws other nodes
    again = adata.client_data("Cora", "label", 0.8, 0, 0, data_dir=str(shared_data))
    assert torch.equal(again.global_ids, a.global_ids)
    other = adata.client_data("Cora", "label", 0.8, 1, 0, data_dir=str(shared_data))
    assert not torch.equal(other.global_ids, a.global_ids)
    # raising alpha only moves nodes home: A's part-1 nodes at 0.8 are a subset of those at 0.9
    a9 = adata.client_data("Cora", "label", 0.9, 0, 0, data_dir=str(shared_data)).global_ids.numpy()
    assert set(ga[part1[ga]]) <= set(a9[part1[a9]])


def test_the_papers_client_sizes_at_alpha_09_overlap_as_the_paper_forces(shared_data, tmp_path):
    """Section 5.1.2 read literally: A holds alpha N1 nodes of part 1 and (1 - alpha) N1 of part 2, B (1 - alpha) N2
    and alpha N2, with N1 = 1,412 and N2 = 1,296 (Table 2). The numbers here are worked out by hand from those."""
    d = str(shared_data)
    part1 = np.isin(adata.load_graph("Cora", d).y.numpy(), (0, 1, 2, 4))
    # alpha N1 = 1270.8, (1 - alpha) N1 = 141.2, (1 - alpha) N2 = 129.6, alpha N2 = 1166.4
    want = {"A": (1271, 141), "B": (130, 1166)}
    for sizes in ("paper", "paper-independent"):
        a, b = adata.all_clients("Cora", "label", 0.9, 0, data_dir=d, sizes=sizes)
        ga, gb = a.global_ids.numpy(), b.global_ids.numpy()
        assert (a.num_nodes, b.num_nodes) == (1412, 1296)  # N1 and N2 at every alpha
        assert (part1[ga].sum(), (~part1[ga]).sum()) == want["A"]
        assert (part1[gb].sum(), (~part1[gb]).sum()) == want["B"]
        both = np.intersect1d(ga, gb)
        if sizes == "paper":
            # part 2 is asked for 141 + 1166 = 1307 of its 1296 nodes: 11 in both clients; part 1 for
            # 1271 + 130 = 1401 of 1412: none in both, 11 in neither
            assert (part1[both].sum(), (~part1[both]).sum()) == (0, 11)
            assert 2708 - np.union1d(ga, gb).size == 11
        else:  # independent draws: ~1271 x 130 / 1412 = 117 and ~141 x 1166 / 1296 = 127 shared by chance
            assert 90 <= part1[both].sum() <= 145 and 100 <= (~part1[both]).sum() <= 155
        # the label mix follows the fractions as in the disjoint split: round(0.9 x 20) training labels at home
        assert a.train_label_counts().tolist() == [18, 18, 18, 2, 18, 2, 2]
        assert b.train_label_counts().tolist() == [2, 2, 2, 18, 2, 18, 18]
    # ours (disjoint): A = 0.9 of part 1 + 0.1 of part 2 by stratum, every node in one client
    a, b = adata.all_clients("Cora", "label", 0.9, 0, data_dir=d)
    assert (a.num_nodes, b.num_nodes) == (1400, 1308) and a.num_nodes + b.num_nodes == 2708
    # a data owner's own file says which sizes it was exported for, and a run of the other sizes refuses it
    from flowergraph.methods.asfgnn.maths.files import SplitSpec, export_asfgnn_partitions, load_asfgnn_partition

    spec = SplitSpec("Cora", "label", 0.9, 0, 2, d, sizes="paper")
    export_asfgnn_partitions(spec, tmp_path / "parts", log=lambda *a: None)
    own = load_asfgnn_partition(tmp_path / "parts" / "client-0.npz", spec, 0)
    assert torch.equal(own.global_ids, spec.client(0).global_ids) and own.num_nodes == 1412
    with pytest.raises(PartitionError, match=r"exported with sizes='paper', but this run has sizes='disjoint'"):
        load_asfgnn_partition(tmp_path / "parts" / "client-0.npz", SplitSpec("Cora", "label", 0.9, 0, 2, d), 0)
    # alpha = 1: every reading is the disjoint split; CM and the graph setting refuse the overlapping sizes
    for sizes in adata.SIZES:
        one = adata.all_clients("Cora", "label", 1.0, 0, data_dir=d, sizes=sizes)
        assert [c.num_nodes for c in one] == [1412, 1296]
    with pytest.raises(ConfigError, match=r"sizes 'paper': the centralized baseline needs each node in one client"):
        adata.centralized_data("Cora", "label", 0.9, 0, data_dir=d, sizes="paper")
    with pytest.raises(ConfigError, match=r"sizes 'paper' applies to the 'label' setting only"):
        adata.client_data("Cora", "graph", 1.0, 0, 0, data_dir=d, sizes="paper")
    with pytest.raises(ConfigError, match=r"sizes 'x' is unknown; valid choices: disjoint, paper, paper-independent"):
        adata.client_data("Cora", "label", 0.9, 0, 0, data_dir=d, sizes="x")
    # alpha too small for the paper's sizes: B asks part 1 for (1 - 0.05) x 1296 = 1231 of its 1412 nodes (fine),
    # A asks part 2 for 0.95 x 1412 = 1341 of its 1296
    with pytest.raises(ConfigError, match=r"client 0 asks part 2 for 1341 nodes, which holds 1296"):
        adata.client_data("Cora", "label", 0.05, 0, 0, data_dir=d, sizes="paper")


def test_citeseer_parts_graph_variant_and_disjoint_clients(shared_data):
    d = str(shared_data)
    graph = adata.load_graph("CiteSeer", d)
    assert adata.class_names("CiteSeer", graph) == ("AI", "ML", "IR", "DB", "Agents", "HCI")
    assert len(adata.placeholder_nodes(graph)) == 15
    a, b = adata.all_clients("CiteSeer", "label", 1.0, 0, data_dir=d)
    assert (a.num_nodes, b.num_nodes) == (1507, 1805) and a.classes() == (0, 1, 2) and b.classes() == (3, 4, 5)
    # non-IID graph (Cora): A = part-1 nodes of degree <= 3, B = part-2 nodes of degree > 3 (global degree)
    cora = adata.load_graph("Cora", d)
    deg = np.bincount(cora.edge_index[0].numpy(), minlength=cora.num_nodes)
    ga, gb = adata.all_clients("Cora", "graph", 1.0, 0, data_dir=d)
    ya = cora.y.numpy()
    expected_a = np.flatnonzero(np.isin(ya, (0, 1, 2, 4)) & (deg <= 3))
    expected_b = np.flatnonzero(np.isin(ya, (3, 5, 6)) & (deg > 3))
    assert ga.global_ids.tolist() == expected_a.tolist() and gb.global_ids.tolist() == expected_b.tolist()
    # 3 clients with disjoint label sets covering every class and node
    clients = adata.all_clients("Cora", "disjoint", 1.0, 0, num_clients=3, data_dir=d)
    sets = [set(c.classes()) for c in clients]
    assert all(not s & t for s, t in itertools.combinations(sets, 2)) and set.union(*sets) == set(range(7))
    assert sum(c.num_nodes for c in clients) == 2708
    assert adata.balanced_class_groups(np.array([351, 217, 418, 818, 426, 298, 180]), 3) == (
        (3,),
        (1, 4, 5),
        (0, 2, 6),
    )  # hand-run greedy: 818 | 426+298+217 | 418+351+180
    cm = adata.centralized_data("Cora", "label", 1.0, 0, data_dir=d)
    assert cm.num_nodes == 2708 and cm.num_edges == 5278 and cm.owner.bincount().tolist() == [1412, 1296]


def test_bad_split_values_name_the_choices(shared_data):
    d = str(shared_data)
    with pytest.raises(ConfigError, match=r"alpha 1\.5 is outside the valid range \[0, 1\]"):
        adata.client_data("Cora", "label", 1.5, data_dir=d)
    with pytest.raises(ConfigError, match=r"setting 'dirichlet' is unknown; valid choices: label, graph, disjoint"):
        adata.client_data("Cora", "dirichlet", data_dir=d)
    with pytest.raises(ConfigError, match=r"client 2 is out of range; valid choices: 0\.\.1"):
        adata.client_data("Cora", "label", 1.0, client=2, data_dir=d)
    with pytest.raises(ConfigError, match=r"dataset 'PubMed' is not supported.*Cora, CiteSeer"):
        adata.client_data("PubMed", data_dir=d)
    with pytest.raises(ConfigError, match=r"alpha 0\.7 applies to the 'label' setting only"):
        adata.client_data("Cora", "graph", 0.7, data_dir=d)
    with pytest.raises(ConfigError, match=r"cannot split 7 classes into 8"):
        adata.client_data("Cora", "disjoint", num_clients=8, data_dir=d)


# --------------------------------------------------------------------------------------------------- training

HP = HyperParams(hidden=64, depth=2, dropout=0.5, l2=5e-3, lr=0.01)


def test_local_round_is_deterministic_and_learns(cora_clients):
    a = cora_clients[0]

    def run(seed):
        model = make_model(a, HP, seed=seed)
        opt = make_optimizer(model, HP)
        return [local_round(model, opt, a, HP, generator=round_generator(seed, 0, t)) for t in range(1, 16)], model

    first, model = run(3)
    second, _ = run(3)
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]  # bit for bit
    assert [r.train_loss for r in run(4)[0]] != [r.train_loss for r in first]
    assert first[-1].train_loss < first[0].train_loss
    assert evaluate(model, a).train_acc > 0.9  # 80 training nodes, 4 classes
    assert first[0].num_train == 80


def test_reference_runs_are_deterministic_and_share_only_what_they_should(cora_clients):
    hps = [HP, HyperParams(hidden=64, depth=1, dropout=0.0, l2=0.0, lr=0.005)]
    one = run_clients(cora_clients, hps, method="sfgnn", rounds=4, seed=1)
    two = run_clients(cora_clients, hps, method="sfgnn", rounds=4, seed=1)
    assert one.to_dict() == two.to_dict() and len(one.history) == 5
    assert one.js == pytest.approx(
        [
            0.5 * (math.log2(14 / 11) + 4 / 7 * math.log2(8 / 11) + 3 / 7),
            js_divergence([0, 0, 0, 20, 0, 20, 20], [20] * 7),
        ]
    )
    assert one.best_val == max(h["mean_val"] for h in one.history) and one.cost == 1 - one.best_val
    # the ablation differs from the JS run only by the mixing weight
    nojs = run_clients(cora_clients, hps, method="sfgnn-nojs", rounds=4, seed=1)
    assert nojs.history[0] == one.history[0] and nojs.history[2] != one.history[2]
    with pytest.raises(ConfigError, match=r"depths \[2, 1\] must match"):
        run_clients(cora_clients, hps, method="fl", rounds=1)
    with pytest.raises(ConfigError, match=r"fgnn_init 'server' is unknown; valid choices: client, shared"):
        run_clients(cora_clients, hps, method="sfgnn", rounds=1, fgnn_init="server")
    with pytest.raises(ConfigError, match=r"method 'fedprox' is unknown; valid choices: sfgnn, sfgnn-nojs, fl, sp"):
        run_clients(cora_clients, hps, method="fedprox", rounds=1)
    assert run_clients(cora_clients, HP, method="fl", rounds=2).history[-1]["mean_val"] >= 0
    config = config_from_hyperparams(hps)
    assert run_config(cora_clients, config, method="sfgnn", rounds=4, seed=1).to_dict() == one.to_dict()


def test_one_sfgnn_round_by_hand(cora_clients):
    """Round 1 of the reference run replayed from the public pieces: local rounds, 1/I average of the
    discriminators, JS mixing; the mixed discriminators differ, the private SGNNs are untouched by mixing."""
    models = [make_model(c, HP, seed=i + 10) for i, c in enumerate(cora_clients)]
    opts = [make_optimizer(m, HP) for m in models]
    for i, (m, o, c) in enumerate(zip(models, opts, cora_clients)):
        local_round(m, o, c, HP, generator=round_generator(0, i, 1))
    uploads = [fgnn_arrays(m) for m in models]
    private = [sgnn_arrays(m) for m in models]
    server = {k: (uploads[0][k] + uploads[1][k]) / 2 for k in uploads[0]}
    q_s = np.array([20.0] * 7) / 140
    for i, (m, c) in enumerate(zip(models, cora_clients)):
        js = js_divergence(c.train_label_counts() / c.num_train, q_s)
        load_fgnn_arrays(m, mix_arrays(uploads[i], server, js))
        for k, v in fgnn_arrays(m).items():
            np.testing.assert_allclose(v, js * uploads[i][k] + (1 - js) * server[k], rtol=1e-6, atol=1e-7)
        assert all(np.array_equal(sgnn_arrays(m)[k], v) for k, v in private[i].items())
    assert not np.array_equal(fgnn_arrays(models[0])["fgnn.lin1.weight"], fgnn_arrays(models[1])["fgnn.lin1.weight"])


def test_centralized_baseline_reports_per_client_accuracy(shared_data):
    cm = adata.centralized_data("Cora", "label", 1.0, 0, data_dir=str(shared_data))
    result = run_centralized(cm, HP, rounds=2, seed=0)
    entry = result.history[-1]
    assert len(entry["client_test"]) == 2
    # overall test accuracy = per-client accuracies weighted by the clients' test nodes (514 and 486)
    assert entry["mean_test"] == pytest.approx((514 * entry["client_test"][0] + 486 * entry["client_test"][1]) / 1000)


# ----------------------------------------------------------------------------------------------------- search


def _synthetic_cost(config):
    return sum(
        (c["dropout"] - 0.3) ** 2 + 0.01 * (c["depth"] - 3) ** 2 + 10 * abs(c["lr"] - 0.005) for c in config["clients"]
    ) + 0.1 * (config["hidden"] != 256)


def test_grid_enumerates_the_grid():
    small = SearchSpace(
        num_clients=2, hidden=(64, 128), grid_dropout=(0.0, 0.5), grid_l2=(0.0,), grid_depth=(1, 2), grid_lr=(1e-3,)
    )
    driver = GridSearch(small)
    seen = []
    while (trial := driver.ask()) is not None:
        seen.append(trial.config)
        driver.tell(trial.index, _synthetic_cost(trial.config))
    expected = [
        {
            "hidden": h,
            "clients": [
                {"dropout": d0, "l2": 0.0, "depth": k0, "lr": 1e-3},
                {"dropout": d1, "l2": 0.0, "depth": k1, "lr": 1e-3},
            ],
        }
        for h, d0, k0, d1, k1 in itertools.product((64, 128), (0.0, 0.5), (1, 2), (0.0, 0.5), (1, 2))
    ]
    assert seen == expected  # 2 * (2 * 2)^2 = 32 points, last axis fastest
    best = {"hidden": 64, "clients": [{"dropout": 0.5, "l2": 0.0, "depth": 2, "lr": 1e-3}] * 2}  # ties: earliest
    assert driver.best()[1] == best and driver.best()[0] == expected.index(best)
    paper = SearchSpace()
    assert paper.grid_size() == 4 * (2 * 5 * 5 * 4) ** 2  # the paper's grid for two clients
    assert paper.grid_point(paper.grid_size() - 1)["clients"][1] == {"dropout": 0.5, "l2": 0.01, "depth": 5, "lr": 0.01}
    shuffled = GridSearch(small, shuffle_seed=1)
    assert sorted(map(json.dumps, shuffled)) == sorted(map(json.dumps, expected))


def test_random_search_is_seeded_in_range_and_resumes():
    space = SearchSpace(num_clients=3)
    first = RandomSearch(space, n_trials=6, seed=5)
    configs = [first.ask().config for _ in range(6)]
    assert first.ask() is None
    again = RandomSearch(space, n_trials=6, seed=5)
    assert [again.ask().config for _ in range(6)] == configs
    assert len({json.dumps(c) for c in configs}) == 6
    assert RandomSearch(space, n_trials=6, seed=6).ask().config != configs[0]
    for c in configs:
        assert c["hidden"] in (64, 128, 256, 512) and len(c["clients"]) == 3
        for v in c["clients"]:
            assert 0 <= v["dropout"] <= 0.5 and 0 <= v["l2"] <= 1e-2 and v["depth"] in range(1, 6)
            assert 5e-4 <= v["lr"] <= 1e-2
    # resume after 3 told + 1 pending
    driver = RandomSearch(space, n_trials=6, seed=5)
    for _ in range(3):
        t = driver.ask()
        driver.tell(t.index, 1.0)
    pending = driver.ask()
    resumed = load_driver(json.loads(json.dumps(driver.export_state())))
    assert resumed.ask() == pending
    assert [resumed.ask().config for _ in range(2)] == configs[4:]
    shared = RandomSearch(SearchSpace(num_clients=2, per_client=False), n_trials=2, seed=0).ask().config
    assert shared["clients"][0] == shared["clients"][1]


def test_smac_ask_tell_and_resume_proposes_the_same_configurations():
    pytest.importorskip("smac", reason="smac (SMAC3 >= 2.2) is not installed")
    space = SearchSpace(num_clients=2)
    full = SmacSearch(space, n_trials=12, seed=3)
    for _ in range(7):
        trial = full.ask()
        full.tell(trial.index, _synthetic_cost(trial.config))
    pending = full.ask()  # asked, not told, when the state is exported
    state = json.loads(json.dumps(full.export_state()))
    assert [t["cost"] is None for t in state["trials"]] == [False] * 7 + [True]
    full.tell(pending.index, _synthetic_cost(pending.config))
    following = []
    for _ in range(3):
        trial = full.ask()
        following.append(trial.config)
        full.tell(trial.index, _synthetic_cost(trial.config))

    resumed = load_driver(state)
    assert resumed.resume_mode == "replay" and resumed.pending == [7]
    again = resumed.ask()
    assert again.index == 7 and again.config == pending.config
    resumed.tell(again.index, _synthetic_cost(again.config))
    got = []
    for _ in range(3):
        trial = resumed.ask()
        got.append(trial.config)
        resumed.tell(trial.index, _synthetic_cost(trial.config))
    assert got == following
    assert resumed.best() == full.best()
    for config in got:
        space.validate(config)
        assert len(client_hyperparams(config, space)) == 2

    # a recorded configuration SMAC would not propose again: flagged warm start, the search still continues
    tampered = json.loads(json.dumps(state))
    tampered["trials"][0]["config"]["clients"][0]["dropout"] = 0.123
    with pytest.warns(RuntimeWarning, match="warm start"):
        warm = load_driver(tampered)
    assert warm.resume_mode == "warmstart" and warm.finished[0][1]["clients"][0]["dropout"] == 0.123
    trial = warm.ask()
    assert trial.index == 7
    warm.tell(trial.index, 0.5)
    assert warm.ask().index == 8


_HASH_SEED_SCRIPT = """
import json
from flowergraph.methods.asfgnn.maths.search import SearchSpace, SmacSearch, load_driver
line = input()
state = json.loads(line) if line.strip() else None
driver = load_driver(state) if state else SmacSearch(SearchSpace(num_clients=2), n_trials=10, seed=5)
out = []
while (trial := driver.ask()) is not None:
    c = trial.config
    driver.tell(trial.index, sum(abs(x["lr"] - 0.004) * 50 + x["dropout"] for x in c["clients"]) + 0.1 * (c["hidden"] !=
    128))
    out.append(c)
    if not state and len(out) == 6:
        print(json.dumps(driver.export_state()))
print(json.dumps(out))
"""


def test_smac_proposals_do_not_depend_on_the_interpreters_hash_seed():
    """A resumed tuning run is a new interpreter, with another string-hash salt: SMAC's local search ordered its
    start points by hash (list(set(...))), so the resumed run proposed other configurations. Runs under two
    PYTHONHASHSEEDs, and a resume after 6 trials under a third, propose the same 10 configurations (each run is
    an interpreter importing SMAC, ~11 s here: two salts already differ)."""
    pytest.importorskip("smac", reason="smac (SMAC3 >= 2.2) is not installed")
    import os

    def run(hash_seed, state=""):
        env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
        done = subprocess.run(
            [sys.executable, "-c", _HASH_SEED_SCRIPT],
            input=state + "\n",
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return done.stdout.strip().splitlines()

    runs = [run(seed) for seed in (1, 2)]
    proposals = [json.loads(r[-1]) for r in runs]
    assert len(proposals[0]) == 10 and proposals[0] == proposals[1]
    resumed = json.loads(run(3, runs[1][0])[-1])
    assert resumed == proposals[0][6:]


def test_search_errors_name_the_value_and_the_choices():
    space = SearchSpace()
    with pytest.raises(ConfigError, match=r"search driver 'bayes' is unknown; valid choices: smac, grid, random"):
        make_driver("bayes", space, 3)
    with pytest.raises(ConfigError, match=r"SMAC facade 'gp' is unknown; valid choices: hpo, blackbox"):
        SmacSearch(space, 3, facade="gp")
    with pytest.raises(ConfigError, match=r"hidden size 100 is invalid; valid choices: 64, 128, 256, 512"):
        space.validate({"hidden": 100, "clients": [{"dropout": 0.0, "l2": 0.0, "depth": 1, "lr": 1e-3}] * 2})
    with pytest.raises(ConfigError, match=r"client 1: depth 7 is outside the valid range \(1, 5\)"):
        space.validate(
            {
                "hidden": 64,
                "clients": [
                    {"dropout": 0.0, "l2": 0.0, "depth": 1, "lr": 1e-3},
                    {"dropout": 0.0, "l2": 0.0, "depth": 7, "lr": 1e-3},
                ],
            }
        )
    driver = RandomSearch(space, 2)
    trial = driver.ask()
    with pytest.raises(ConfigError, match=r"trial index 5 was never asked; asked trials: 0\.\.0"):
        driver.tell(5, 0.1)
    driver.tell(trial.index, 0.1)
    with pytest.raises(ConfigError, match="already told"):
        driver.tell(trial.index, 0.2)
    with pytest.raises(ConfigError, match="cost nan must be finite"):
        driver.tell(driver.ask().index, float("nan"))
    with pytest.raises(ConfigError, match=r"search state kind 'annealing' is unknown"):
        load_driver({**driver.export_state(), "kind": "annealing"})
