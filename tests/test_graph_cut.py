"""Every client's data cut in one pass (:class:`flowergraph.tasks.federated_graph.GraphCut`) is what the per-client
construction it replaced built, array for array and in the same order: the reference below is that construction,
kept here as it was (one full-graph scan per client)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowergraph.errors import ConfigError
from flowergraph.tasks import federated_graph as fg
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, cut_graph, load_global_graph, node_assignment
from flowergraph.tasks.synthetic import CSBMParams

FIELDS = ("global_ids", "x", "y", "train_mask", "val_mask", "test_mask", "edge_index", "cross_edges", "cross_owner")


def reference_client(data, assignment, client_id, num_clients):
    """The per-client construction of flowergraph <= 0.3 (``build_client_graph``), as a dict of its arrays."""
    owner = torch.as_tensor(np.array(assignment, dtype=np.int64))
    own = torch.nonzero(owner == client_id, as_tuple=True)[0]
    local = torch.full((int(data.num_nodes),), -1, dtype=torch.long)
    local[own] = torch.arange(own.numel())
    src, dst = data.edge_index
    mine = owner[src] == client_id
    internal = mine & (owner[dst] == client_id)
    cross = mine & (owner[dst] != client_id)
    return {
        "client_id": client_id,
        "num_clients": num_clients,
        "global_ids": own,
        "x": data.x[own],
        "y": data.y[own],
        "train_mask": data.train_mask[own],
        "val_mask": data.val_mask[own],
        "test_mask": data.test_mask[own],
        "edge_index": torch.stack([local[src[internal]], local[dst[internal]]]),
        "cross_edges": torch.stack([local[src[cross]], dst[cross]]),
        "cross_owner": owner[dst[cross]],
        "num_global_nodes": int(data.num_nodes),
        "num_classes": int(data.num_classes),
    }


def assert_same(graph, ref):
    for name in ("client_id", "num_clients", "num_global_nodes", "num_classes"):
        assert getattr(graph, name) == ref[name], name
    for name in FIELDS:
        got, want = getattr(graph, name), ref[name]
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype, got.shape)
        assert torch.equal(got, want), name
        assert got.is_contiguous(), name
    assert graph.x.untyped_storage().nbytes() == graph.x.numel() * graph.x.element_size()  # owns its storage


def check_cut(gspec: GraphSpec, pspec: PartitionSpec) -> None:
    data = load_global_graph(gspec)
    assignment = node_assignment(gspec, pspec)
    cut = cut_graph(data, assignment, pspec.num_clients)
    for k in range(pspec.num_clients):
        ref = reference_client(data, assignment, k, pspec.num_clients)
        assert_same(cut.client(k), ref)
        assert_same(fg.build_client_graph(data, assignment, k, pspec.num_clients), ref)
    # together they hold every node once and every directed edge once (internal or cross)
    graphs = cut.clients()
    assert sum(g.num_nodes for g in graphs) == int(data.num_nodes)
    assert sum(g.edge_index.size(1) + g.cross_edges.size(1) for g in graphs) == int(data.edge_index.size(1))


SYN = GraphSpec(dataset="synthetic", seed=3, synthetic=CSBMParams(num_nodes=600))


@pytest.mark.parametrize("partitioner", ["dirichlet", "random", "metis", "louvain"])
@pytest.mark.parametrize("num_clients", [1, 7])
def test_one_pass_cut_equals_the_per_client_construction(partitioner, num_clients):
    if partitioner == "dirichlet":
        pspec = PartitionSpec(partitioner, num_clients, beta=0.5, min_size=5, seed=2)  # label skew: uneven sizes
    else:
        pspec = PartitionSpec(partitioner, num_clients, seed=2)
    check_cut(SYN, pspec)


def test_one_pass_cut_on_cora(cora, shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data))
    for pspec in (PartitionSpec("metis", 10, seed=1), PartitionSpec("dirichlet", 5, beta=1.0, seed=4)):
        check_cut(gspec, pspec)


def test_a_client_without_nodes_and_an_assignment_naming_fewer_clients():
    """An assignment where some client has no node (an empty part) and one whose largest owner is below
    ``num_clients - 1``: the same (empty) arrays as the old construction."""
    data = load_global_graph(SYN)
    n = int(data.num_nodes)
    assignment = np.where(np.arange(n) % 3 == 0, 0, 2).astype(np.int64)  # client 1 owns nothing; 3 unused
    cut = cut_graph(data, assignment, 4)
    for k in range(4):
        assert_same(cut.client(k), reference_client(data, assignment, k, 4))
    assert cut.client(1).num_nodes == 0 and cut.client(3).edge_index.shape == (2, 0)
    with pytest.raises(ConfigError, match=r"partition-id 4 out of range \[0, 3\]"):
        cut.client(4)


def test_client_graph_builds_each_client_once_per_process(monkeypatch):
    """``client_graph`` cuts the graph once per (graph spec, partition spec) and returns the same object for a
    client every time, for any number of clients (the old per-client memo held 64)."""
    pspec = PartitionSpec("random", 150, seed=9)
    cuts = []
    real = fg.cut_graph
    monkeypatch.setattr(fg, "cut_graph", lambda *a, **k: cuts.append(1) or real(*a, **k))
    first = [fg.client_graph(SYN, pspec, k) for k in range(150)]
    again = [fg.client_graph(SYN, pspec, k) for k in reversed(range(150))][::-1]
    assert len(cuts) == 1 and all(a is b for a, b in zip(first, again))
    assert len({g.uid for g in first}) == 150


@pytest.mark.simulation
def test_200_clients_on_the_inline_engine_build_each_clients_data_once(tmp_path, monkeypatch):
    """The issue's acceptance test (not timed): a fedavg run of 200 clients on the inline engine (every client in
    this process) cuts the graph once, builds each client's ClientGraph once and its model once. Before, the
    per-client memo held 64 graphs and the model cache 32: past those, every message rebuilt its client's data
    (a full-graph scan) and its model."""
    from flowergraph.app import client_app, server_app
    from flowergraph.app.generator import write_app
    from flowergraph.app.inline import run_inline
    from flowergraph.clients import node
    from flowergraph.storage.results import read_run

    built: dict[int, int] = {}
    real_init = fg.ClientGraph.__init__

    def counting_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        built[self.client_id] = built.get(self.client_id, 0) + 1

    monkeypatch.setattr(fg.ClientGraph, "__init__", counting_init)
    cuts, models = [], []
    real_cut, real_model = fg.cut_graph, node.build_node_model
    monkeypatch.setattr(fg, "cut_graph", lambda *a, **k: cuts.append(1) or real_cut(*a, **k))
    monkeypatch.setattr(node, "build_node_model", lambda *a, **k: models.append(k.get("cached")) or real_model(*a, **k))
    app_dir = write_app(tmp_path / "app")
    overrides = {
        "method": "fedavg",
        "num-clients": 200,
        "rounds": 2,
        "seed": 11,  # specs no other test uses: this process's memo has no cut of them yet
        "node.partitioner": "random",
        "node.synthetic-nodes": 3000,
        "node.local-steps": 1,
        "out-dir": str(tmp_path / "out"),
    }
    run_inline(server_app.app, client_app.app, num_supernodes=200, app_dir=app_dir, overrides=overrides)
    run = read_run(tmp_path / "out")
    assert run["summary"]["status"] == "completed" and run["summary"]["rounds_completed"] == 2
    assert len(cuts) == 1
    assert built == {k: 1 for k in range(200)}
    assert models.count(True) == 200  # one bound model per client (the seeded initial weights are memoised apart)
