"""Per-process memos (flowergraph.tasks.memo): the byte bound, and releasing every memo of data at once, as the
simulation launcher does after its data check (issue 91: it kept the graph and its cut for the whole run)."""

import torch

from flowergraph.data import GraphSpec, PartitionSpec
from flowergraph.tasks.memo import BytesLRU, nbytes, release_process_caches


def test_the_memo_keeps_recent_entries_within_its_byte_budget():
    memo = BytesLRU(budget=3 * 400)  # three 100-float tensors
    for k in range(4):
        memo.get_or_build(k, lambda: torch.zeros(100))
    assert memo.get(0) is None and all(memo.get(k) is not None for k in (1, 2, 3))
    assert memo.used == 3 * nbytes(torch.zeros(100))
    assert not memo.put("big", torch.zeros(1000)) and memo.get("big") is None  # larger than the budget: not kept


def test_release_drops_every_memo_of_data_and_rebuilds_the_same_on_demand():
    from flowergraph.tasks.federated_graph import _graph_cut, client_graph, load_global_graph, node_assignment

    gspec = GraphSpec(dataset="synthetic", seed=0)
    pspec = PartitionSpec(num_clients=3)
    before = client_graph(gspec, pspec, 1)
    memo = BytesLRU()
    memo.put("x", torch.ones(10))
    assert load_global_graph.cache_info().currsize > 0 and node_assignment.cache_info().currsize > 0
    release_process_caches()
    caches = (load_global_graph, node_assignment, _graph_cut)
    assert [c.cache_info().currsize for c in caches] == [0, 0, 0]
    assert memo.get("x") is None and memo.used == 0
    again = client_graph(gspec, pspec, 1)
    assert again is not before and torch.equal(again.x, before.x) and torch.equal(again.edge_index, before.edge_index)
