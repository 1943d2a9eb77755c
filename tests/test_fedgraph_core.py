"""FedGraph's Flower-free core: cross-client convolution exactness, what owners send, sampling (eq. 7), local
training, eq. 8/9, the DDPG agent (soft update, replay buffer, exact export/restore) and the data synthesis."""

import copy
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from flowergraph.errors import ConfigError
from flowergraph.storage.npzio import read_npz, write_npz
from flowergraph.tasks.federated_graph import ClientGraph, GraphSpec, load_global_graph
from flowergraph.methods.fedgraph.maths import (
    NETWORKS,
    SHARING,
    UPDATE_RULES,
    ActionSpace,
    DDPGAgent,
    DDPGConfig,
    FullBatch,
    LayerWise,
    NodeWise,
    ReplayBuffer,
    RoundCost,
    Rows,
    SamplingPolicy,
    aggregate,
    backward_macs,
    build_model,
    build_view,
    client_graphs,
    degree_rows,
    exchange_convs,
    exchange_degrees,
    exact_sample,
    exchange_in_process,
    export_plan,
    forward,
    forward_macs,
    full_forward,
    make_scheme,
    owner_rows,
    owner_rows_and_macs,
    request_plan,
    reward,
    shared_convs,
    soft_update,
    synthesise,
    time_penalty_alpha,
    train_macs,
    train_round,
)
from flowergraph.methods.fedgraph.maths.clock import delta_of
from flowergraph.methods.fedgraph.maths.model import evaluate
from flowergraph.tasks.training import TrainConfig

SYN = GraphSpec(dataset="synthetic", seed=2)


def _perturbed_model(data, seed=1, num_convs=2):
    """A model whose weights are not the initial ones (and biases non-zero)."""
    model = build_model(data.num_features, data.num_classes, num_convs=num_convs, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model.eval()


def _federation(graphs):
    degrees = exchange_degrees(graphs)
    return [build_view(g, degrees[g.client_id]) for g in graphs]


def _central(model, data, edges_per_conv):
    """The same GCN run centrally, convolution k on ``edges_per_conv[k]`` (PyG GCNConv, its own normalisation)."""
    h = data.x
    for k, (conv, ei) in enumerate(zip(model.convs, edges_per_conv)):
        h = conv(h, ei)
        if k < len(model.convs) - 1:
            h = F.relu(h)
    return F.log_softmax(h, dim=-1)


def _cut_edges(data, owner):
    ei = data.edge_index
    return ei[:, owner[ei[0]] == owner[ei[1]]]


def _owner(graphs, num_nodes):
    owner = torch.full((num_nodes,), -1, dtype=torch.long)
    for g in graphs:
        owner[g.global_ids] = g.client_id
    return owner


# ------------------------------------------------------------------------------------ cross-client convolution
@pytest.mark.parametrize("dataset,scheme,k,num_convs", [("Cora", "metis", 5, 2), ("synthetic", "louvain", 4, 3)])
def test_exact_exchange_equals_centralised_gcn(dataset, scheme, k, num_convs, shared_data):
    gspec = GraphSpec(dataset=dataset, data_dir=str(shared_data) if dataset == "Cora" else "", seed=2)
    data = load_global_graph(gspec)
    graphs = client_graphs(gspec, scheme, k, seed=2)
    views = _federation(graphs)
    owner = _owner(graphs, data.num_nodes)
    assert (owner >= 0).all()
    full, cut = data.edge_index, _cut_edges(data, owner)
    model = _perturbed_model(data, num_convs=num_convs)
    with torch.no_grad():
        refs = {
            "allshare": _central(model, data, [full] * num_convs),  # = the plain GCN on the whole graph
            "nonshare": _central(model, data, [cut] * num_convs),
            "fedgraph": _central(model, data, [cut] + [full] * (num_convs - 1)),
        }
        torch.testing.assert_close(refs["allshare"], model(data.x, data.edge_index))
        assert not torch.allclose(refs["fedgraph"], refs["allshare"], atol=1e-3)
        assert not torch.allclose(refs["fedgraph"], refs["nonshare"], atol=1e-3)
        for sharing in SHARING:
            tables = exchange_in_process([model] * k, views, sharing)
            assert all(sorted(t) == list(exchange_convs(sharing, num_convs)) for t in tables)
            for view, table in zip(views, tables):
                out = full_forward(model, view, sharing, table)
                torch.testing.assert_close(out, refs[sharing][view.graph.global_ids], atol=2e-5, rtol=0)


def test_literal_first_layer_normalisation():
    """cut_norm="global": the first convolution keeps the whole graph's weights and drops the remote terms."""
    data = load_global_graph(SYN)
    graphs = client_graphs(SYN, "random", 3, seed=1)
    degrees = exchange_degrees(graphs)
    views = [build_view(g, degrees[g.client_id], cut_norm="global") for g in graphs]
    model = _perturbed_model(data)
    owner = _owner(graphs, data.num_nodes)
    n = data.num_nodes
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    ei, w = gcn_norm(data.edge_index, num_nodes=n, add_self_loops=True)
    q = torch.zeros(n, n).index_put_((ei[1], ei[0]), w, accumulate=True)
    q_cut = q * (owner[:, None] == owner[None, :])
    c0, c1 = model.convs
    with torch.no_grad():
        h = F.relu(q_cut @ c0.lin(data.x) + c0.bias)
        ref = F.log_softmax(q @ c1.lin(h) + c1.bias, dim=-1)
        tables = exchange_in_process([model] * 3, views, "fedgraph")
        for view, table in zip(views, tables):
            torch.testing.assert_close(
                full_forward(model, view, "fedgraph", table), ref[view.graph.global_ids], atol=2e-5, rtol=0
            )


def test_what_owners_send(shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data))
    data = load_global_graph(gspec)
    graphs = client_graphs(gspec, "metis", 4)
    views = _federation(graphs)
    model = _perturbed_model(data)
    # Plans agree: what owner j sends to i is what i asks of j; ids are owner j's boundary nodes.
    for gi in graphs:
        for j, ids in request_plan(gi).items():
            np.testing.assert_array_equal(export_plan(graphs[j])[gi.client_id], ids)
    for g, view in zip(graphs, views):
        boundary = set(g.global_ids[torch.unique(g.cross_edges[0])].tolist())
        exported = set(np.concatenate(list(export_plan(g).values())).tolist())
        assert exported == boundary
        # FedGraph never sends anything computed by the first convolution's inputs alone: conv 0 is refused.
        with pytest.raises(
            ConfigError,
            match=r"conv=0: with sharing 'fedgraph' and 2 convolutions owners send "
            r"rows for convolutions \[1\] only",
        ):
            owner_rows(model, view, "fedgraph", 0)
        rows = owner_rows(model, view, "fedgraph", 1)
        assert set(rows.ids.tolist()) == boundary
        # h^(1) W^(1): 16 hidden units times W^(1) (16 x 7), so 7 numbers per node, not its 1433 features.
        assert rows.values.shape == (len(boundary), 7) and rows.values.dtype == np.float32
        # The rows are h^(1) W^(1) of the first convolution over the client's own subgraph.
        local = torch.full((data.num_nodes,), -1, dtype=torch.long)
        local[g.global_ids] = torch.arange(g.num_nodes)
        with torch.no_grad():
            h = F.relu(model.convs[0](g.x, g.edge_index))
            expect = model.convs[1].lin(h)[local[torch.as_tensor(rows.ids)]]
        np.testing.assert_allclose(rows.values, expect.numpy(), atol=1e-5)
        deg = degree_rows(g)
        np.testing.assert_array_equal(deg.ids, rows.ids)
        assert deg.values.shape == (len(boundary), 1)
    # allShare's first convolution sends x W^(0) (its privacy cost), width = hidden.
    assert owner_rows(model, views[0], "allshare", 0).values.shape[1] == 16


def test_missing_rows_and_bad_arguments_are_named():
    data = load_global_graph(SYN)
    graphs = client_graphs(SYN, "random", 2, seed=0)
    view = build_view(graphs[0])  # no remote degrees
    model = _perturbed_model(data)
    with pytest.raises(ConfigError, match="no remote degrees"):
        full_forward(model, view, "fedgraph", {})
    full_forward(model, view, "nonshare")  # cut-only convolutions need nothing
    views = _federation(graphs)
    with pytest.raises(KeyError, match="convolution 1 aggregates .* remote neighbours but no received rows"):
        full_forward(model, views[0], "fedgraph", {})
    with pytest.raises(KeyError, match="remote neighbours have no row"):
        views[0].remote_table(Rows(np.array([0], np.int64), np.zeros((1, 16), np.float32)))
    zeros = views[0].remote_table(Rows(np.zeros(0, np.int64), np.zeros((0, 16))), allow_missing=True, width=16)
    assert zeros.shape == (views[0].num_remote, 16) and not zeros.any()
    with pytest.raises(ConfigError, match="unknown sharing 'some'; valid choices: fedgraph, allshare, nonshare"):
        shared_convs("some", 2)
    with pytest.raises(ConfigError, match="unknown cut-norm 'x'; valid choices: local, global"):
        build_view(graphs[0], cut_norm="x")
    with pytest.raises(
        ConfigError, match="unknown sampling scheme 'ladies'; valid choices: full, fedgraph, graphsage, fastgcn"
    ):
        make_scheme("ladies")
    with pytest.raises(ConfigError, match=r"probs\[1\]=1.5: a sampling probability must be in \(0, 1\]"):
        SamplingPolicy(kappa=8, probs=(0.5, 1.5))
    with pytest.raises(ConfigError, match="kappa=0: a mini-batch size must be an integer >= 1"):
        SamplingPolicy(kappa=0, probs=(0.5, 0.5))
    with pytest.raises(ConfigError, match=r"policy has 1 probabilities \(0.5,\); the model has 2 convolutions"):
        train_round(model, views[0], SamplingPolicy(kappa=8, probs=(0.5,)), "nonshare")


# ------------------------------------------------------------------------------------------------- sampling
def _tiny():
    """Client 0: nodes 0..4 (global ids 0..4); internal edges 0-1, 0-2, 0-3, 1-2; cross edges 0-10 and 3-11
    (owner 1); node 4 isolated. Remote degrees d_10 = 3, d_11 = 2."""
    und = [(0, 1), (0, 2), (0, 3), (1, 2)]
    ei = torch.tensor(und + [(b, a) for a, b in und]).t()
    g = ClientGraph(
        client_id=0,
        num_clients=2,
        global_ids=torch.arange(5),
        x=torch.eye(5),
        y=torch.zeros(5).long(),
        train_mask=torch.tensor([True, False, False, False, False]),
        val_mask=torch.zeros(5, dtype=torch.bool),
        test_mask=torch.zeros(5, dtype=torch.bool),
        edge_index=ei,
        cross_edges=torch.tensor([[0, 3], [10, 11]]),
        cross_owner=torch.tensor([1, 1]),
        num_global_nodes=12,
        num_classes=2,
    )
    return build_view(g, Rows(np.array([10, 11]), np.array([[3.0], [2.0]])))


def _dense(sample, k, view):
    """Convolution k's sampled Q~ as {(target node, source node or 'r<global id>'): weight}."""
    lower, remote, e = sample.nodes[k], sample.remote[k], sample.convs[k]
    names = [int(v) for v in lower] + [f"r{int(view.remote_ids[r])}" for r in remote]
    return {(int(sample.nodes[k + 1][d]), names[s]): float(w) for d, s, w in zip(e.dst, e.src, e.weight)}


def test_eq7_rescaling_by_hand():
    view = _tiny()
    d = {0: 5, 1: 3, 2: 3, 3: 3, 4: 1, "r10": 3, "r11": 2}  # global degrees (1 + deg)
    d_loc = {0: 4, 1: 3, 2: 3, 3: 2, 4: 1}  # inside the client (cut convolution, local normalisation)
    nbrs_full = {0: [1, 2, 3, "r10"]}
    nbrs_cut = {0: [1, 2, 3], 1: [0, 2], 2: [0, 1], 3: [0], 4: []}
    policy = SamplingPolicy(kappa=1, probs=(0.5, 0.5))
    gen = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(30):
        s = policy.sample(view, torch.tensor([0]), shared_convs("fedgraph", 2), gen)
        assert s.batch.tolist() == [0]
        top = _dense(s, 1, view)  # sharing convolution: |V(0)| = 4, |N(0)| = ceil(0.5 * 4) = 2
        assert top.pop((0, 0)) == pytest.approx(1 / 5)  # self loop, never rescaled
        assert len(top) == 2 and all(u in nbrs_full[0] for _, u in top)
        for (_, u), w in top.items():
            assert w == pytest.approx(4 / 2 * (d[0] * d[u]) ** -0.5, rel=1e-6)
        seen |= {u for _, u in top}
        assert sorted(s.nodes[1].tolist()) == sorted({0} | {u for _, u in top if isinstance(u, int)})
        bottom = _dense(s, 0, view)  # cut convolution: own neighbours only, local degrees
        for v in s.nodes[1].tolist():
            assert bottom.pop((v, v)) == pytest.approx(1 / d_loc[v])
            mine = {u: w for (t, u), w in bottom.items() if t == v}
            k = math.ceil(0.5 * len(nbrs_cut[v]))
            assert len(mine) == k
            for u, w in mine.items():
                assert u in nbrs_cut[v]
                assert w == pytest.approx(len(nbrs_cut[v]) / k * (d_loc[v] * d_loc[u]) ** -0.5, rel=1e-6)
        assert s.remote[0].numel() == 0  # the first convolution never reads remote rows
    assert seen == set(nbrs_full[0])  # the remote neighbour is sampled like an own one


@pytest.mark.parametrize(
    "scheme",
    [SamplingPolicy(kappa=1, probs=(0.5, 0.5)), LayerWise(batch_size=1, layer_size=6)],
    ids=["fedgraph", "fastgcn"],
)
def test_sampled_weights_are_unbiased(scheme):
    """E[Q~] = Q: eq. 7's |V(v)|/|N(v)| and FastGCN's c(u)/(t q(u)) are inverse inclusion weights."""
    view = _tiny()
    gen = torch.Generator().manual_seed(1)
    total: dict = {}
    draws = 2000
    for _ in range(draws):
        for key, w in _dense(scheme.sample(view, torch.tensor([0]), (False, True), gen), 1, view).items():
            total[key] = total.get(key, 0.0) + w / draws
    exact = _dense(FullBatch().sample(view, torch.tensor([0]), (False, True)), 1, view)
    assert set(total) == set(exact)
    for key, w in exact.items():
        assert total[key] == pytest.approx(w, rel=0.07)


def test_fastgcn_weights_by_hand():
    view = _tiny()
    scheme = LayerWise(batch_size=1, layer_size=3)
    gen = torch.Generator().manual_seed(3)
    adj = view.full
    q = adj.column_sq_norms()
    q = (q / q.sum()).tolist()
    # Column 0 (own node 0) as the client sees it: 1/25 (self) + 1/15 (nodes 1, 2, 3: each 1/(5*3)).
    assert adj.column_sq_norms()[0].item() == pytest.approx(1 / 25 + 3 / 15)
    s = scheme.sample(view, torch.tensor([0]), (False, True), gen)
    top = _dense(s, 1, view)
    for (v, u), w in top.items():
        col = u if isinstance(u, int) else 5 + int(view.remote_ids.tolist().index(int(u[1:])))
        q_vu = 1 / 5 if u == 0 else (5 * {1: 3, 2: 3, 3: 3, "r10": 3}[u]) ** -0.5
        times = w * 3 * q[col] / q_vu  # w = Q(v, u) c(u) / (t q(u)) with c(u) the times u was drawn
        assert round(times) >= 1 and times == pytest.approx(round(times), abs=1e-4)
    assert s.nodes[0].numel() <= 3 and s.nodes[1].numel() + s.remote[1].numel() <= 3


@pytest.mark.parametrize("sharing", ["fedgraph", "allshare"])
def test_probability_one_full_batch_equals_full_forward(sharing, shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data), split="random:0.5/0.2/0.3")
    data = load_global_graph(gspec)
    graphs = client_graphs(gspec, "metis", 3)
    views = _federation(graphs)
    model = _perturbed_model(data)
    tables = exchange_in_process([model] * 3, views, sharing)
    shared = shared_convs(sharing, 2)
    for view, table in zip(views, tables):
        train = torch.nonzero(view.graph.train_mask, as_tuple=True)[0]
        with torch.no_grad():
            ref = full_forward(model, view, sharing, table)
            for scheme in (
                SamplingPolicy(kappa=10**6, probs=(1.0, 1.0)),
                FullBatch(),
                NodeWise(batch_size=None, fanouts=(10**6, 10**6)),
            ):
                s = scheme.sample(view, train, shared, torch.Generator().manual_seed(0))
                assert s.batch.tolist() == train.tolist()
                torch.testing.assert_close(forward(model, view, s, table), ref[train], atol=1e-5, rtol=0)


def test_baselines_respect_their_budgets(shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data), split="random:0.6/0.2/0.2")
    graphs = client_graphs(gspec, "louvain", 2)
    view = _federation(graphs)[0]
    train = torch.nonzero(view.graph.train_mask, as_tuple=True)[0]
    gen = torch.Generator().manual_seed(0)
    sage = NodeWise(batch_size=256, fanouts=(3, 2)).sample(view, train, (False, True), gen)
    assert sage.batch.numel() == 256
    for k, fan in enumerate((3, 2)):
        per_target = torch.bincount(sage.convs[k].dst, minlength=sage.nodes[k + 1].numel())
        assert int(per_target.max()) <= fan + 1  # + the self loop
    fast = LayerWise(batch_size=256, layer_size=64).sample(view, train, (False, True), gen)
    assert fast.nodes[0].numel() <= 64 and fast.nodes[1].numel() + fast.remote[1].numel() <= 64
    pol = SamplingPolicy(kappa=100, probs=(0.2, 0.2)).sample(view, train, (False, True), gen)
    full = FullBatch().sample(view, train, (False, True))
    assert pol.batch.numel() == 100 and pol.num_edges() < full.num_edges()


def test_forward_macs_by_hand():
    """The deterministic round cost (fedgraph.round-time=work) counted by hand on the tiny client: mini-batch {0},
    exact sample. Convolution 1 (sharing): own nodes {0, 1, 2, 3}, remote r10 (a received row: no h W on this
    client), 5 edges into node 0 (self loop + 4 neighbours); convolution 0 (cut): the same 4 own nodes, edges into
    them 4 + 3 + 3 + 2 = 12 (self loops included). x is 5-wide, 16 hidden units, 2 classes."""
    view = _tiny()
    model = build_model(5, 2, hidden=16, num_convs=2, seed=0)
    sample = exact_sample(view, torch.tensor([0]), shared_convs("fedgraph", 2))
    assert [n.numel() for n in sample.nodes] == [4, 4, 1] and [e.num_edges for e in sample.convs] == [12, 5]
    assert forward_macs(model, sample) == 4 * 5 * 16 + 12 * 16 + 4 * 16 * 2 + 5 * 2
    # nonShare drops the remote neighbour: one edge fewer into node 0
    cut = exact_sample(view, torch.tensor([0]), shared_convs("nonshare", 2))
    assert forward_macs(model, cut) == 4 * 5 * 16 + 12 * 16 + 4 * 16 * 2 + 4 * 2
    with pytest.raises(ConfigError, match="the sample has 2 convolutions, the model 3"):
        forward_macs(build_model(5, 2, num_convs=3, seed=0), sample)


def test_backward_and_rows_macs_by_hand():
    """The parallel clock's work on the tiny client. Backward of the same sample: convolution 0's weight gradient
    (4 x 5 x 16; no input gradient for the features) and its aggregation (12 x 16), convolution 1's weight and
    input gradients (2 x 4 x 16 x 2) and aggregation (5 x 2). An owner's rows of convolution 1 for its boundary
    nodes 0 and 3: the exact forward of convolution 0 over them and their own neighbours (nodes 0-3: 4 x 5 x 16;
    edges into 0 and 3, self loops included: 4 + 2) and h W^(1) of the two (2 x 16 x 2); asked for node 3 alone:
    nodes 0 and 3, 2 edges into 3, one row, equal to the full computation's."""
    view = _tiny()
    model = build_model(5, 2, hidden=16, num_convs=2, seed=0)
    sample = exact_sample(view, torch.tensor([0]), shared_convs("fedgraph", 2))
    assert backward_macs(model, sample) == 4 * 5 * 16 + 12 * 16 + 2 * 4 * 16 * 2 + 5 * 2
    assert train_macs(model, sample) == forward_macs(model, sample) + backward_macs(model, sample)
    rows, macs = owner_rows_and_macs(model, view, "fedgraph", 1, {})
    assert rows.ids.tolist() == [0, 3] and macs == 4 * 5 * 16 + 6 * 16 + 2 * 16 * 2
    sub, sub_macs = owner_rows_and_macs(model, view, "fedgraph", 1, {}, ids=np.array([3]))
    np.testing.assert_allclose(sub.values, rows.values[1:], rtol=1e-6)
    assert sub_macs == 2 * 5 * 16 + 2 * 16 + 1 * 16 * 2
    empty, none = owner_rows_and_macs(model, view, "fedgraph", 1, {}, ids=np.zeros(0, np.int64))
    assert empty.values.shape == (0, 2) and none == 0
    with pytest.raises(KeyError, match="not its boundary nodes"):
        owner_rows_and_macs(model, view, "fedgraph", 1, {}, ids=np.array([1]))


def test_owner_rows_of_a_subset_equal_the_full_rows(shared_data):
    """Rows asked for a random subset of an owner's boundary nodes (the per-iteration exchange) equal those rows of
    the all-boundary computation (the round exchange), and cost fewer multiply-adds."""
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data), seed=2)
    views = _federation(client_graphs(gspec, "metis", 4, seed=2))
    model = _perturbed_model(load_global_graph(gspec))
    full, full_macs = owner_rows_and_macs(model, views[1], "fedgraph", 1, {})
    ids = np.sort(np.random.default_rng(0).choice(full.ids, size=len(full.ids) // 3, replace=False))
    part, part_macs = owner_rows_and_macs(model, views[1], "fedgraph", 1, {}, ids=ids)
    np.testing.assert_array_equal(part.ids, ids)
    np.testing.assert_allclose(part.values, full.select(ids).values, rtol=1e-5, atol=1e-6)
    assert 0 < part_macs < full_macs


def test_parallel_clock_by_hand():
    """delta = max_i(c work_i + c0 steps_i + c1 rows_i) + 8 max_i(bytes_i) / B + messages x RTT + server, on both
    networks; a stored round re-priced with other constants."""
    cost = RoundCost(
        work=[10**9, 4 * 10**8], bytes=[10**6, 3 * 10**6], messages=3, server_s=0.01, steps=[3, 3], rows=[1, 0]
    )
    lan = cost.delta(1e-10, NETWORKS["lan"], 1e-3, 5e-4)
    assert lan["compute_s"] == pytest.approx(0.1 + 3e-3 + 5e-4)
    assert lan["transfer_s"] == pytest.approx(8 * 3e6 / 1e9) and lan["latency_s"] == pytest.approx(3e-3)
    assert lan["delta_s"] == pytest.approx(0.1035 + 0.024 + 0.003 + 0.01)
    wan = cost.delta(1e-10, NETWORKS["wan"], 1e-3, 5e-4)
    assert wan["delta_s"] == pytest.approx(0.1035 + 8 * 3e6 / 50e6 + 3 * 0.03 + 0.01)
    record = cost.record(1e-10, 1e-3, 5e-4)
    assert record["lan_s"] == pytest.approx(lan["delta_s"]) and record["wan_s"] == pytest.approx(wan["delta_s"])
    assert delta_of(record, "lan", seconds_per_step=0.0, seconds_per_rows=0.0) == pytest.approx(0.1 + 0.024 + 0.013)
    with pytest.raises(ConfigError, match="unknown network 'dsl'; valid choices: lan, wan"):
        delta_of(record, "dsl")
    with pytest.raises(ConfigError, match="seconds-per-mac=0.0: must be a finite number > 0"):
        cost.delta(0.0, NETWORKS["lan"])


def test_dealt_metis_blocks(shared_data):
    """METIS into K x m parts dealt to K clients: every part lies inside one client, every client holds m parts."""
    from flowergraph.methods.fedgraph.maths import dealt_metis_assignment
    from flowergraph.tasks.partition import metis_partition

    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data), seed=0)
    data = load_global_graph(gspec)
    assignment = dealt_metis_assignment(gspec, 5, 4, 0)
    parts = metis_partition(data.edge_index.numpy(), int(data.num_nodes), 20, seed=0)
    owners = [np.unique(assignment[parts == p]) for p in range(20)]
    assert all(len(o) == 1 for o in owners)
    assert np.bincount([int(o[0]) for o in owners], minlength=5).tolist() == [4] * 5
    with pytest.raises(ConfigError, match="parts-per-client must be >= 1, got 0"):
        dealt_metis_assignment.__wrapped__(gspec, 5, 0, 0)


# ---------------------------------------------------------------------------------------------- local round
def test_train_round(shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data), split="random:0.6/0.2/0.2")
    data = load_global_graph(gspec)
    graphs = client_graphs(gspec, "metis", 3)
    views = _federation(graphs)
    model = build_model(data.num_features, data.num_classes, seed=0)
    torch.manual_seed(0)
    for scheme in (SamplingPolicy(kappa=64, probs=(0.5, 0.8)), FullBatch(), NodeWise(), LayerWise()):
        tables = exchange_in_process([model] * 3, views, "fedgraph")
        before = [p.detach().clone() for p in model.parameters()]
        res = train_round(model, views[0], scheme, "fedgraph", tables[0], generator=torch.Generator().manual_seed(0))
        n_train = views[0].graph.num_train
        expected = {"fedgraph": 64, "full": n_train, "graphsage": min(256, n_train), "fastgcn": min(256, n_train)}
        assert res.num_samples == expected[scheme.name]
        assert res.iterations == 3 and math.isfinite(res.loss) and res.seconds > 0
        assert 0 <= res.sample_seconds <= res.seconds and res.nodes_per_iteration > 0
        if scheme.name == "full":  # one deterministic sample per round, three iterations
            once = forward_macs(
                model,
                scheme.sample(views[0], torch.nonzero(views[0].graph.train_mask)[:, 0], shared_convs("fedgraph", 2)),
            )
            assert res.forward_macs == 3 * once > 0
        else:
            assert res.forward_macs > 0
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # Training with the exchange improves this client's validation accuracy over the initial model.
    fresh = build_model(data.num_features, data.num_classes, seed=0)
    acc0 = evaluate(fresh, views[0], "fedgraph", exchange_in_process([fresh] * 3, views, "fedgraph")[0])
    tables = exchange_in_process([model] * 3, views, "fedgraph")
    for _ in range(5):
        train_round(
            model,
            views[0],
            SamplingPolicy(kappa=128, probs=(0.5, 0.5)),
            "fedgraph",
            tables[0],
            TrainConfig(local_steps=5, optimizer="adam", lr=0.01, weight_decay=5e-4),
        )
    acc = evaluate(model, views[0], "fedgraph", tables[0])
    assert acc["val_accuracy"] > acc0["val_accuracy"] + 0.2
    # A client without labelled nodes trains nothing and weighs 0 in eq. 8.
    g = views[1].graph
    g_empty = ClientGraph(
        **{
            **{f: getattr(g, f) for f in g.__dataclass_fields__ if f != "uid"},
            "train_mask": torch.zeros_like(g.train_mask),
        }
    )
    res = train_round(model, build_view(g_empty, exchange_degrees(graphs)[1]), FullBatch(), "fedgraph", tables[1])
    assert res.num_samples == 0 and math.isnan(res.loss)


# ----------------------------------------------------------------------------------------------- server maths
def test_eq8_aggregation():
    a = {"w": np.array([[1.0, 2.0]], np.float32), "b": np.array([0.0], np.float32)}
    b = {"w": np.array([[3.0, 6.0]], np.float32), "b": np.array([4.0], np.float32)}
    out = aggregate([(a, 256), (b, 64)])
    np.testing.assert_allclose(out["w"], [[(256 * 1 + 64 * 3) / 320, (256 * 2 + 64 * 6) / 320]], rtol=1e-7)
    np.testing.assert_allclose(out["b"], [64 * 4 / 320], rtol=1e-7)
    assert list(out) == ["w", "b"] and out["w"].dtype == np.float32
    with pytest.raises(ValueError, match="update 1 has arrays"):
        aggregate([(a, 1), ({"w": a["w"]}, 1)])
    with pytest.raises(ValueError, match="update 0 has weight -1"):
        aggregate([(a, -1), (b, 1)])
    with pytest.raises(ValueError, match="the weights sum to 0.0"):
        aggregate([(a, 0), (b, 0)])


def test_eq9_reward():
    assert reward(0.80, 2.0, 0.90, omega=128, alpha=0.5, beta=0.4) == pytest.approx(128**-0.1 - 0.5 * 1.6)
    assert reward(0.9016, 0.0, 0.9016) == pytest.approx(1.0)
    # Exponential in accuracy: the same 1-point gain is worth more near the target.
    assert (reward(0.90, 1, 0.9) - reward(0.89, 1, 0.9)) > (reward(0.60, 1, 0.9) - reward(0.59, 1, 0.9))
    with pytest.raises(ValueError, match="accuracy=80: an accuracy is a fraction in"):
        reward(80, 1.0, 0.9)
    with pytest.raises(ConfigError, match="omega=1: the base of the exponential must be > 1"):
        reward(0.8, 1.0, 0.9, omega=1)
    alpha = time_penalty_alpha([2.0, 3.0, 4.0], beta=1.0)
    assert alpha * (3.0 - 1.0) == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------------ DDPG
def test_soft_update_by_hand():
    src, dst = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before_t = [p.detach().clone() for p in dst.parameters()]
    soft_update(dst, src, 0.1)
    for t0, s, t in zip(before_t, src.parameters(), dst.parameters()):
        expect = 0.1 * s.detach().numpy().astype(np.float64) + 0.9 * t0.numpy().astype(np.float64)
        np.testing.assert_allclose(t.detach().numpy(), expect, rtol=1e-6, atol=1e-7)
    soft_update(dst, src, 1.0)
    assert all(torch.equal(a, b) for a, b in zip(src.parameters(), dst.parameters()))
    with pytest.raises(ConfigError, match="tau=0: must be in"):
        soft_update(dst, src, 0)


def test_replay_buffer():
    buf = ReplayBuffer(capacity=4, state_dim=2, action_dim=1)
    for i in range(6):
        buf.add([i, i], [i], float(i), [i + 1, i + 1], done=(i == 5))
    assert len(buf) == 4 and buf.position == 2
    assert sorted(buf.rewards.tolist()) == [2.0, 3.0, 4.0, 5.0]  # the two oldest were dropped
    rng = np.random.default_rng(0)
    idx = buf.sample_indices(3, rng)
    assert len(set(idx.tolist())) == 3 and set(idx.tolist()) <= {0, 1, 2, 3}
    assert len(buf.sample_indices(10, rng)) == 4  # never more than stored, never twice
    counts = np.bincount(np.concatenate([buf.sample_indices(1, rng) for _ in range(4000)]), minlength=4)
    assert counts.min() > 850  # uniform
    s, _, _, s2, d = buf.batch(np.arange(4))
    np.testing.assert_array_equal(s2.numpy() - s.numpy(), np.ones((4, 2)))
    assert d.tolist() == [0.0, 1.0, 0.0, 0.0]
    arrays, values = buf.export_state()
    again = ReplayBuffer.from_state(arrays, json.loads(json.dumps(values)))
    for f in ReplayBuffer.FIELDS:
        np.testing.assert_array_equal(getattr(again, f), getattr(buf, f))
    with pytest.raises(ValueError, match="the replay buffer is empty"):
        ReplayBuffer(2, 1, 1).sample_indices(1, rng)


def test_action_space():
    space = ActionSpace(num_clients=2, num_convs=2, kappa_min=32, kappa_max=512, p_min=0.1, p_max=1.0)
    pols = space.policies(np.array([-1, -1, 1, 1, 0, 5.0]))
    assert (pols[0].kappa, pols[0].probs) == (32, (0.1, 1.0))
    assert (pols[1].kappa, pols[1].probs) == (512, (0.55, 1.0))  # clipped to [-1, 1]
    np.testing.assert_allclose(space.action(pols), [-1, -1, 1, 1, 0, 1], atol=1e-6)
    with pytest.raises(ValueError, match=r"action has shape \(5,\), this action space needs \(6,\)"):
        space.policies(np.zeros(5))
    with pytest.raises(ConfigError, match="probability range"):
        ActionSpace(num_clients=2, p_min=0.0)


def _weights(rng, scale=1.0):
    return {"w": (rng.normal(size=(6, 4)) * scale).astype(np.float32), "b": rng.normal(size=4).astype(np.float32)}


def test_pca_state():
    agent = DDPGAgent(ActionSpace(num_clients=3), DDPGConfig(pca_components=20, episode_rounds=3), seed=0)
    rng = np.random.default_rng(0)
    w0 = _weights(rng)
    state0 = agent.observe(w0, [w0] * 3)  # every model equal: no PCA yet, the state is zeros
    assert state0.shape == (80,) and not state0.any() and not agent.pca.fitted
    clients = [{k: v + 0.1 * rng.normal(size=v.shape).astype(np.float32) for k, v in w0.items()} for _ in range(3)]
    state1 = agent.observe(w0, clients)
    assert agent.pca.fitted and agent.pca.components.shape == (3, 28)  # 4 samples: at most 3 axes
    assert state1.reshape(4, 20)[:, 3:].sum() == 0 and state1.any()
    with pytest.raises(ValueError, match="weights have arrays"):
        agent.observe({"w": w0["w"]}, clients)


def _run(agent, rng, rounds):
    out = []
    for _ in range(rounds):
        clients = [_weights(rng, 0.5) for _ in range(agent.space.num_clients)]
        step = agent.record(float(rng.normal()), agent.observe(_weights(rng), clients))
        out.append(step)
        if step.done:
            agent.start_episode(agent.observe(_weights(rng), clients))
    return out


@pytest.mark.parametrize("rule", sorted(UPDATE_RULES))
def test_ddpg_export_restores_the_agent_exactly(tmp_path, rule):
    cfg = DDPGConfig(episode_rounds=4, batch_size=4, buffer_capacity=6, **UPDATE_RULES[rule])
    agent = DDPGAgent(ActionSpace(num_clients=3, num_convs=2), cfg, seed=5)
    rng = np.random.default_rng(1)
    w = _weights(rng)
    action = agent.start_episode(agent.observe(w, [w] * 3))
    assert action.shape == (9,) and np.all(np.abs(action) <= 1)
    steps = _run(agent, rng, 6)  # one episode end (round 4) and the buffer has wrapped
    assert [s.done for s in steps] == [False, False, False, True, False, False]
    assert steps[3].action is None and agent.episode == 2 and len(agent.buffer) == 6
    assert agent.noise_std == pytest.approx(0.2 * 0.98)

    arrays, values = agent.export_state()
    write_npz(tmp_path / "agent.npz", arrays, {"agent": values})
    saved_arrays, meta = read_npz(tmp_path / "agent.npz")
    restored = DDPGAgent.from_state(saved_arrays, meta["agent"])

    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    a_steps, b_steps = _run(agent, rng_a, 3), _run(restored, rng_b, 3)
    for a, b in zip(a_steps, b_steps):
        assert a.critic_loss == b.critic_loss and a.actor_loss == b.actor_loss and a.done == b.done
        np.testing.assert_array_equal(a.action, b.action)
    assert restored.nets == agent.nets and len(agent.nets) == (6 if rule == "td3" else 4)
    for name in agent.nets:
        for p, q in zip(getattr(agent, name).parameters(), getattr(restored, name).parameters()):
            assert torch.equal(p, q)
    # The restored agent is not just the same seed: a fresh agent with that seed acts differently.
    fresh = DDPGAgent(ActionSpace(num_clients=3, num_convs=2), cfg, seed=5)
    fresh.pca = restored.pca
    s = restored.observe(w, [w] * 3)
    assert not np.array_equal(fresh.act(s, explore=False), restored.act(s, explore=False))


def _params(net):
    return [p.detach().clone() for p in net.parameters()]


def test_td3_update_by_hand():
    """TD3's step against a hand computation: the first critic's loss is the MSE to r + gamma (1 - d) min(q1~, q2~)
    at the smoothed target action (noise drawn from the agent's generator right after the mini-batch, clipped to
    +-0.5); the actor and the three targets stay put on odd steps and move on even ones (soft update by tau); both
    critics move on every step."""
    cfg = DDPGConfig(episode_rounds=50, pca_components=2, batch_size=8, gamma=0.9, tau=0.1, **UPDATE_RULES["td3"])
    space = ActionSpace(num_clients=2, num_convs=1)
    agent = DDPGAgent(space, cfg, seed=3)
    rng = np.random.default_rng(0)
    for i in range(12):
        agent.buffer.add(
            rng.normal(size=agent.state_dim),
            rng.uniform(-1, 1, size=space.dim),
            float(rng.normal()),
            rng.normal(size=agent.state_dim),
            done=(i % 5 == 4),
        )
    for step in (1, 2):
        before = {name: _params(getattr(agent, name)) for name in agent.nets}
        gen = copy.deepcopy(agent.rng)
        idx = gen.choice(len(agent.buffer), size=8, replace=False)
        s, a, r, s2, d = (torch.from_numpy(getattr(agent.buffer, f)[idx]) for f in ReplayBuffer.FIELDS)
        eps = torch.from_numpy(np.clip(gen.normal(0.0, 0.2, size=(8, space.dim)), -0.5, 0.5)).float()
        with torch.no_grad():
            a2 = (agent.actor_target(s2) + eps).clamp(-1, 1)
            q = torch.minimum(agent.critic_target(s2, a2), agent.critic2_target(s2, a2))
            want = float(((agent.critic(s, a) - (r + 0.9 * (1 - d) * q)) ** 2).mean())
        critic_loss, actor_loss = agent.update()
        assert critic_loss == pytest.approx(want, rel=1e-5)
        moved = {
            name: not all(torch.equal(p, q) for p, q in zip(before[name], _params(getattr(agent, name))))
            for name in agent.nets
        }
        assert moved["critic"] and moved["critic2"]
        if step == 1:  # delayed: the actor and every target wait
            assert actor_loss is None
            assert not any(moved[n] for n in ("actor", "actor_target", "critic_target", "critic2_target"))
        else:
            assert actor_loss is not None and all(moved.values())
            for name, src in (("actor_target", "actor"), ("critic_target", "critic"), ("critic2_target", "critic2")):
                for t0, now, new in zip(before[name], _params(getattr(agent, name)), _params(getattr(agent, src))):
                    torch.testing.assert_close(now, 0.9 * t0 + 0.1 * new, rtol=1e-5, atol=1e-6)
    assert agent.updates == 2


def test_ddpg_rule_is_the_papers_update():
    """The default rule keeps the paper's update: one critic, the actor and the targets move on every step."""
    agent = DDPGAgent(ActionSpace(num_clients=1, num_convs=1), DDPGConfig(pca_components=2), seed=0)
    assert agent.critic2 is None and agent.nets == DDPGAgent.NETS and DDPGConfig() == DDPGConfig(**UPDATE_RULES["ddpg"])
    agent.buffer.add(np.zeros(agent.state_dim), np.zeros(2), 1.0, np.zeros(agent.state_dim), False)
    before = _params(agent.actor_target)
    assert agent.update()[1] is not None
    assert not all(torch.equal(p, q) for p, q in zip(before, _params(agent.actor_target)))
    with pytest.raises(ConfigError, match=r"ddpg policy_delay=0: must be >= 1"):
        DDPGConfig(policy_delay=0).validate()


@pytest.mark.parametrize("rule", sorted(UPDATE_RULES))
def test_ddpg_learns_a_bandit(rule):
    """Sanity: with reward -(a - 0.5)^2 summed over dimensions and a constant state, the actor moves toward 0.5."""
    space = ActionSpace(num_clients=1, num_convs=1)
    cfg = DDPGConfig(
        episode_rounds=1,
        pca_components=2,
        batch_size=32,
        actor_lr=1e-3,
        critic_lr=1e-3,
        gamma=0.0,
        tau=0.05,
        noise_std=0.5,
        noise_decay=1.0,
        **UPDATE_RULES[rule],
    )
    agent = DDPGAgent(space, cfg, seed=0)
    state = np.ones(agent.state_dim, dtype=np.float32)
    torch.manual_seed(0)
    for _ in range(200 if rule == "ddpg" else 400):  # TD3's actor moves every 2nd step: twice the episodes
        a = agent.start_episode(state)
        agent.record(-float(np.sum((a - 0.5) ** 2)), state)
    assert np.abs(agent.act(state, explore=False) - 0.5).max() < 0.2


# ------------------------------------------------------------------------------------------------------ data
def test_synthesis(shared_data):
    data = load_global_graph(GraphSpec(dataset="Cora", data_dir=str(shared_data)))
    syn = synthesise(data, num_clients=4, var=0.1, seed=3)
    again = synthesise(data, num_clients=4, var=0.1, seed=3)
    assert torch.equal(syn.edge_index, again.edge_index) and np.array_equal(syn.origin, again.origin)
    assert not np.array_equal(synthesise(data, 4, 0.1, seed=4).xi, syn.xi)
    assert np.all((syn.xi >= 0.1) & (syn.xi <= 1.0))
    graphs = [syn.client(k) for k in range(4)]
    n = data.num_nodes
    for k, g in enumerate(graphs):
        assert g.num_nodes == round(syn.xi[k] * n)
        origin = torch.from_numpy(syn.origin[g.global_ids.numpy()])
        assert torch.equal(g.x, data.x[origin]) and torch.equal(g.test_mask, data.test_mask[origin])
    # Cross-client edges are symmetric: (a, b) at a's owner  <=>  (b, a) at b's owner.
    cross = set()
    for g in graphs:
        a = g.global_ids[g.cross_edges[0]]
        cross |= set(zip(a.tolist(), g.cross_edges[1].tolist()))
    assert all((b, a) in cross for a, b in cross)
    # A copy's neighbours (internal and remote) cover its dataset node's neighbours held by anyone (plus, maybe,
    # copies that other clients chose as the remote end of their own edges).
    held = set(syn.origin.tolist())
    nbrs = [set() for _ in range(n)]
    for s, d in data.edge_index.t().tolist():
        nbrs[s].add(d)
    g = graphs[0]
    origin = syn.origin
    for v in range(0, g.num_nodes, 37):
        mine = g.global_ids[g.edge_index[1][g.edge_index[0] == v]].tolist()
        mine += g.cross_edges[1][g.cross_edges[0] == v].tolist()
        own_origin = origin[int(g.global_ids[v])]
        targets = sorted(origin[c] for c in mine)
        expected = {u for u in nbrs[own_origin] if u in held}
        assert expected <= set(targets)  # plus maybe copies chosen by others as their remote end
    # The federation over G' is exact like a partition's: allShare equals the GCN on G'.
    gprime = syn.data()
    views = _federation(graphs)
    model = _perturbed_model(data)
    with torch.no_grad():
        ref = model(gprime.x, gprime.edge_index)
        for view, table in zip(views, exchange_in_process([model] * 4, views, "allshare")):
            torch.testing.assert_close(
                full_forward(model, view, "allshare", table), ref[view.graph.global_ids], atol=2e-5, rtol=0
            )
    with pytest.raises(ConfigError, match="var=-1: the variance of xi must be"):
        synthesise(data, 4, -1)
    with pytest.raises(ConfigError, match="unknown data scheme 'kmeans'; valid choices: synthesis, dirichlet"):
        client_graphs(GraphSpec(), "kmeans", 2)


def test_core_never_imports_flower():
    import subprocess
    import sys

    code = (
        "import sys, flowergraph.methods.fedgraph.maths\n"
        "bad = sorted(m for m in sys.modules if m == 'flwr' or m.startswith('flwr.'))\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
