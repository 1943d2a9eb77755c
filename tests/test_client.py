import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from flowergraph.clients.node import NodeClassificationClient
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.models import MODELS, build_node_model, get_weights, set_weights
from flowergraph.tasks.training import TrainConfig

SYN = GraphSpec(dataset="synthetic", seed=1)
PART = PartitionSpec(partitioner="louvain", num_clients=3, seed=1)
ALLOWED = (bool, bytes, float, int, str)  # what Flower accepts in metrics


def _client(cid=0, **train):
    graph = client_graph(SYN, PART, cid)
    return NodeClassificationClient(graph, TrainConfig(**{"local_steps": 5, **train}), {"kind": "gcn"}, seed=4)


def test_fit_trains_on_own_nodes_and_reports_counts():
    client = _client(0)
    start = client.get_parameters({})
    loss0, _, m0 = client.evaluate(start, {"server_round": 0})
    new, n, metrics = client.fit(start, {"server_round": 1})
    assert n == client.graph.num_train == metrics["num_train"] == metrics["batch_size"]
    assert metrics["partition_id"] == 0 and all(isinstance(v, ALLOWED) for v in metrics.values())
    assert [a.shape for a in new] == [a.shape for a in start]
    assert any(not np.allclose(a, b) for a, b in zip(new, start))
    for _ in range(10):
        new, _, _ = client.fit(new, {"server_round": 2})
    loss1, _, m1 = client.evaluate(new, {"server_round": 2})
    assert loss1 < loss0 and m1["train_accuracy"] > m0["train_accuracy"]


def test_evaluate_matches_an_independent_forward_pass():
    client = _client(1)
    params, _, _ = client.fit(client.get_parameters({}), {"server_round": 1})
    loss, n_test, metrics = client.evaluate(params, {"server_round": 1})
    g = client.graph
    # Independent computation: a fresh model with the same weights on the client's own subgraph.
    model = build_node_model("gcn", g.num_features, g.num_classes)
    set_weights(model, params)
    model.eval()
    with torch.no_grad():
        out = model(g.x, g.edge_index)
    acc = float((out.argmax(1)[g.test_mask] == g.y[g.test_mask]).float().mean())
    nll = float(F.nll_loss(out[g.test_mask], g.y[g.test_mask]))
    assert n_test == int(g.test_mask.sum()) == metrics["num_test"]
    assert metrics["accuracy"] == pytest.approx(acc) and loss == pytest.approx(nll, rel=1e-5)
    assert all(isinstance(v, ALLOWED) for v in metrics.values())


def test_training_is_reproducible_per_round_seed():
    a = _client(2)
    b = _client(2)
    p = a.get_parameters({})
    np.testing.assert_array_equal(p[0], b.get_parameters({})[0])  # same seed, same initial model
    wa, _, _ = a.fit(p, {"server_round": 3})
    wb, _, _ = b.fit(p, {"server_round": 3})
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)
    wc, _, _ = b.fit(p, {"server_round": 4})  # another round draws other dropout masks
    assert any(not np.array_equal(x, y) for x, y in zip(wa, wc))


def test_client_without_training_nodes_returns_weights_unchanged():
    graph = client_graph(SYN, PART, 0)
    graph = type(graph)(**{**graph.__dict__, "train_mask": torch.zeros_like(graph.train_mask)})
    client = NodeClassificationClient(graph, TrainConfig(), seed=0)
    p = client.get_parameters({})
    new, n, metrics = client.fit(p, {"server_round": 1})
    assert n == 0 and math.isnan(metrics["train_loss"])
    for x, y in zip(p, new):
        np.testing.assert_array_equal(x, y)


def test_wrong_parameters_are_refused_by_name():
    client = _client(0)
    p = client.get_parameters({})
    with pytest.raises(ValueError, match=r"array for 'convs.0.bias' has shape \(3, 3\), expected \(16,\)"):
        client.fit([np.zeros((3, 3), np.float32)] + p[1:], {})
    with pytest.raises(ValueError, match="expected 4 arrays"):
        client.fit(p[:2], {})


@pytest.mark.parametrize("kind", MODELS)
def test_models_forward_and_roundtrip(kind):
    m = build_node_model(kind, 8, 3, hidden=4, layers=3, seed=0)
    x, ei = torch.randn(10, 8), torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    out = m(x, ei)
    assert out.shape == (10, 3) and torch.allclose(out.exp().sum(1), torch.ones(10))
    other = build_node_model(kind, 8, 3, hidden=4, layers=3, seed=1)
    set_weights(other, get_weights(m))
    m.eval()
    other.eval()
    assert torch.equal(m(x, ei), other(x, ei))


def test_unknown_model_and_optimizer():
    from flowergraph.errors import ConfigError

    with pytest.raises(ValueError, match="unknown model 'gin'; valid choices: gcn, sage, gat"):
        build_node_model("gin", 4, 2)  # models raise ValueError: they know nothing of run configurations
    with pytest.raises(ValueError, match="layers must be >= 1, got 0"):
        build_node_model("gcn", 4, 2, layers=0)
    with pytest.raises(ConfigError, match="unknown optimizer 'lbfgs'; valid choices: sgd, adam"):
        _client(0, optimizer="lbfgs")


def test_fused_evaluation_reports_what_evaluate_would_and_trains_the_same():
    client = _client(2)
    params = client.fit(client.get_parameters({}), {"server_round": 1})[0]
    loss, n_test, expected = client.evaluate(params, {"server_round": 1})
    plain, _, m_plain = client.fit(params, {"server_round": 2})
    fused, _, m_fused = client.fit(params, {"server_round": 2, "evaluate_global": True})
    for a, b in zip(plain, fused):
        np.testing.assert_array_equal(a, b)  # the evaluation does not disturb training (same dropout masks)
    for key, value in expected.items():
        if key == "partition_id":
            continue
        got = m_fused[f"eval_{key}"]
        assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(value), key
    assert m_fused["eval_num_test"] == n_test and m_fused["eval_loss"] == pytest.approx(loss)
    assert not any(k.startswith("eval_") for k in m_plain)
    assert all(isinstance(v, ALLOWED) for v in m_fused.values())


def test_the_noop_floor_honours_fused_evaluation():
    """The benchmark floor must send as many messages as a real client: with evaluate_global it answers the
    evaluation inside its fit reply (otherwise the strategy falls back to a separate evaluate message)."""
    from flowergraph.clients.node import NoOpClient
    from flowergraph.strategies.evaluation import fused_metrics

    arrays, n, metrics = NoOpClient([np.zeros(2)], 3).fit([np.ones(2)], {"server_round": 2, "evaluate_global": True})
    assert fused_metrics(metrics) == {"loss": 0.0, "num_test": 1} and n == 1
    np.testing.assert_array_equal(arrays[0], np.ones(2))
    assert NoOpClient([], 3).evaluate([], {})[2] == {"partition_id": 3, "loss": 0.0, "num_test": 1}


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_node_models_are_pygs_with_input_dropout_and_log_softmax(kind):
    """GCN and GraphSAGE are PyG's models: the same parameters (names, seeded values) and, in eval mode, the same
    output as PyG's model followed by a log-softmax."""
    import torch
    from torch_geometric.nn.models import GCN, GraphSAGE

    x, edge_index = torch.randn(30, 6), torch.randint(0, 30, (2, 90))
    ours = build_node_model(kind, 6, 3, hidden=5, layers=3, seed=11).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        cls, extra = (GCN, {}) if kind == "gcn" else (GraphSAGE, {"aggr": "mean"})
        theirs = cls(in_channels=6, hidden_channels=5, num_layers=3, out_channels=3, dropout=0.5, **extra).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key], value, rtol=0, atol=0)
    torch.testing.assert_close(ours(x, edge_index), torch.log_softmax(theirs(x, edge_index), -1), rtol=0, atol=0)


def test_the_bound_model_is_built_once_per_graph_for_any_number_of_clients():
    """One model per graph a process serves, kept for as long as the graph (the old cache was cleared at 32
    entries: past 32 clients every message rebuilt the model and its normalisation), and freed with it."""
    import gc
    import weakref

    from flowergraph.clients import node

    part = PartitionSpec(partitioner="random", num_clients=40, seed=1)
    graphs = [client_graph(SYN, part, k) for k in range(40)]
    first = [node.bound_model(g, {"kind": "gcn"}, 0) for g in graphs]
    assert all(node.bound_model(g, {"kind": "gcn"}, 0) is m for g, m in zip(graphs, first))
    assert node.bound_model(graphs[0], {"kind": "gcn"}, 1) is not first[0]  # another seed: another model
    lone = client_graph(SYN, PartitionSpec(partitioner="random", num_clients=2, seed=1), 0)
    lone = type(lone)(**{f: getattr(lone, f) for f in lone.__dataclass_fields__ if f != "uid"})  # not memoised
    gone = weakref.ref(node.bound_model(lone, {"kind": "gcn"}, 0))
    del lone
    gc.collect()
    assert gone() is None  # the model went with its graph
