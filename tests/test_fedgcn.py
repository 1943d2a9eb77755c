"""FedGCN: exactness of the 2-hop forward pass, what crosses the wire, CKKS, bad input."""

import numpy as np
import pytest
import torch
from flwr.app import RecordDict
from flwr.common import Code, GetPropertiesRes, Status
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from flowergraph.methods.fedgcn.client import FedGCNClient, received_rows
from flowergraph import wire as protocol
from flowergraph.settings import parse_run_config
from flowergraph.errors import ConfigError, KeyFileError
from flowergraph.privacy import ckks
from flowergraph.strategies.common import config_bytes
from flowergraph.methods.fedgcn.server import FedGCNStrategy
from flowergraph.methods.fedgcn.maths import contributions, extended_graph, fedgcn_forward, global_degrees, server_sum
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph, load_global_graph
from flowergraph.tasks.models import build_node_model
from flowergraph.tasks.training import TrainConfig
from flowergraph.strategies import FederationPolicy
from flowergraph.app.loop import LegacyNodes

SYN = GraphSpec(dataset="synthetic", seed=2)


class ClientProxyInProcess(ClientProxy):
    """Delivers phase messages (get_properties) to a real FedGCNClient; any other message is an error (the phase
    must never travel as fit, which Flower's training mods would intercept)."""

    def __init__(self, cid, client):
        super().__init__(cid)
        self.client = client
        self.messages = []

    def get_properties(self, ins, timeout, group_id):
        res = GetPropertiesRes(status=Status(Code.OK, ""), properties=self.client.get_properties(dict(ins.config)))
        self.messages.append((ins, res))
        return res

    def fit(self, ins, timeout, group_id):
        raise NotImplementedError

    def get_parameters(self, ins, timeout, group_id):
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


def _federation(gspec, pspec, hops, he=False, key_files=None):
    clients = [
        FedGCNClient(
            client_graph(gspec, pspec, k),
            TrainConfig(),
            {"kind": "gcn"},
            seed=0,
            hops=hops,
            state=RecordDict(),
            key_file=(key_files[k] if key_files else None),
        )
        for k in range(pspec.num_clients)
    ]
    manager = SimpleClientManager()
    proxies = [ClientProxyInProcess(f"{k:02d}", c) for k, c in enumerate(clients)]
    for p in proxies:
        manager.register(p)
    strategy = FedGCNStrategy(
        FederationPolicy(num_clients=len(clients)), hops=hops, he=he, initial_parameters=clients[0].get_parameters({})
    )
    stats = strategy.communication_phase(strategy.use(LegacyNodes(manager)))  # the legacy face's client calls
    return clients, proxies, stats


def _centralized_logits(gspec, weights):
    data = load_global_graph(gspec)
    model = build_node_model("gcn", data.num_features, data.num_classes)
    model.load_state_dict(weights)
    model.eval()
    with torch.no_grad():
        return model(data.x, data.edge_index)


@pytest.mark.parametrize(
    "dataset,partitioner,k", [("Cora", "dirichlet", 10), ("synthetic", "louvain", 4), ("synthetic", "random", 7)]
)
def test_two_hop_forward_equals_centralized_gcn(dataset, partitioner, k, shared_data):
    gspec = GraphSpec(dataset=dataset, data_dir=str(shared_data) if dataset == "Cora" else "", seed=2)
    clients, _, _ = _federation(gspec, PartitionSpec(partitioner=partitioner, num_clients=k, seed=2), hops=2)
    # Train one client a little so the weights are not the initial ones, then share them.
    clients[0].fit(clients[0].get_parameters({}), {"server_round": 1})
    weights = clients[0].model.state_dict()
    ref = _centralized_logits(gspec, weights)
    for c in clients:
        c.model.load_state_dict(weights)
        c.model.eval()
        with torch.no_grad():
            out = c.forward()
        torch.testing.assert_close(out, ref[c.graph.global_ids], atol=1e-5, rtol=0)


def test_one_hop_first_layer_is_exact_and_second_layer_is_the_local_gcn():
    pspec = PartitionSpec(partitioner="random", num_clients=5, seed=2)
    data = load_global_graph(SYN)
    ei, w = gcn_norm(data.edge_index, num_nodes=data.num_nodes, add_self_loops=True)
    a_hat = torch.zeros(data.num_nodes, data.num_nodes).index_put_((ei[0], ei[1]), w, accumulate=True)
    ax = a_hat @ data.x  # independent computation of (Â X)
    clients, _, _ = _federation(SYN, pspec, hops=1)
    for c in clients:
        ext = c._extended()
        assert ext.remote_ids.numel() == 0
        torch.testing.assert_close(ext.features, ax[c.graph.global_ids], atol=1e-5, rtol=1e-5)
        # Second-layer weights: the GCN normalisation of the client's own subgraph, computed independently
        # from the global graph restricted to the client's nodes.
        own = c.graph.global_ids
        sub = torch.zeros(data.num_nodes, dtype=torch.bool)
        sub[own] = True
        keep = sub[data.edge_index[0]] & sub[data.edge_index[1]]
        local = torch.full((data.num_nodes,), -1, dtype=torch.long)
        local[own] = torch.arange(len(own))
        lei, lw = gcn_norm(local[data.edge_index[:, keep]], num_nodes=len(own), add_self_loops=True)
        expected = torch.zeros(len(own), len(own)).index_put_((lei[1], lei[0]), lw, accumulate=True)
        dense = torch.zeros(len(own), len(own))
        dense[ext.prop_index[0], ext.prop_index[1]] = ext.prop_weight
        torch.testing.assert_close(dense, expected, atol=1e-6, rtol=0)
        assert not torch.allclose(dense, a_hat[own][:, own])  # not the global weights (boundary nodes differ)


def test_only_boundary_rows_cross_the_wire(shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data))
    pspec = PartitionSpec(partitioner="metis", num_clients=5, seed=0)
    for hops in (1, 2):
        _, proxies, stats = _federation(gspec, pspec, hops=hops)
        for k, proxy in enumerate(proxies):
            g = client_graph(gspec, pspec, k)
            boundary = set(g.global_ids[torch.unique(g.cross_edges[0])].tolist())
            remote = set(torch.unique(g.cross_edges[1]).tolist())
            (up_ins, up_res), (down_ins, down_res) = proxy.messages
            assert (up_ins.config[protocol.PHASE], down_ins.config[protocol.PHASE]) == (
                "fedgcn.upload",
                "fedgcn.download",
            )
            ids, request = protocol.unpack_arrays(up_res.properties)[:2]
            assert set(ids.tolist()) == boundary | remote  # nothing else leaves the client
            assert ids.dtype == np.int64 and np.all(np.diff(ids) > 0)
            expected_request = boundary if hops == 1 else boundary | remote
            assert set(request.tolist()) == expected_request
            rows = protocol.unpack_arrays(down_ins.config)[0]
            assert set(rows.tolist()) == expected_request  # only the rows it asked for come back
            own_interior = set(g.global_ids.tolist()) - boundary
            assert not own_interior & set(ids.tolist())
        # Byte accounting equals the payloads that were exchanged.
        up = sum(config_bytes(r.properties) for p in proxies for _, r in p.messages)
        down = sum(config_bytes(i.config) for p in proxies for i, _ in p.messages)
        assert (stats["bytes_up"], stats["bytes_down"]) == (up, down)


def test_upload_wire_format():
    pspec = PartitionSpec(partitioner="random", num_clients=3, seed=1)
    g = client_graph(SYN, pspec, 0)
    client = FedGCNClient(g, TrainConfig(), seed=0, hops=2, state=RecordDict())
    metrics = client.get_properties(protocol.phase_message("fedgcn.upload", hops=2))
    assert metrics["partition_id"] == 0 and metrics["width"] == g.num_features + 1
    ids, request, *rows = protocol.unpack_arrays(metrics)
    assert metrics["encoding"] == "dense" and rows[0].shape == (len(ids), g.num_features + 1)
    assert rows[0].dtype == np.float32
    # Last column: d_u^{-1/2} for own rows, 0 for remote rows.
    own = np.isin(ids, g.global_ids.numpy())
    d = global_degrees(g).numpy()
    local = {int(gid): i for i, gid in enumerate(g.global_ids.tolist())}
    np.testing.assert_allclose(rows[0][own, -1], [d[local[int(i)]] ** -0.5 for i in ids[own]], rtol=1e-6)
    assert np.all(rows[0][~own, -1] == 0)
    with pytest.raises(ValueError, match="the server runs 1-hop FedGCN but this client was configured with hops=2"):
        client.get_properties(protocol.phase_message("fedgcn.upload", hops=1))
    with pytest.raises(
        ValueError,
        match="this client does not answer phase 'fedgcn.sync'; valid phases: "
        "fedgcn.download, fedgcn.index, fedgcn.upload",
    ):
        client.get_properties(protocol.phase_message("fedgcn.sync"))
    # no phase: the identity request (the partition, and the names of the model's arrays)
    assert client.get_properties({}) == {"partition_id": 0, protocol.KEYS: protocol.encode_keys(client.model_keys())}


def test_training_without_the_phase_fails_clearly():
    g = client_graph(SYN, PartitionSpec(num_clients=2), 0)
    client = FedGCNClient(g, TrainConfig(), seed=0, hops=2, state=RecordDict())
    with pytest.raises(RuntimeError, match="no neighbour aggregations in context.state"):
        client.fit(client.get_parameters({}), {"server_round": 1})


# ------------------------------------------------------------------------------------------------ CKKS
@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    return str(ckks.write_key_file(tmp_path_factory.mktemp("keys") / "ckks.bin"))


def test_server_context_cannot_decrypt(key_file):
    ctx = ckks.load_key_file(key_file)
    server = ckks.load_server_context(ckks.server_context_bytes(ctx))
    assert not server.is_private()
    ct = ckks.encrypt_rows(ctx, np.ones((1, 5)), np.array([0]), ckks.num_slots(ctx))[1][0]
    import tenseal as ts

    with pytest.raises(ValueError, match="doesn't hold a secret_key"):
        ts.ckks_vector_from(server, ct).decrypt()
    with pytest.raises(ValueError, match="refusing a context that holds a secret key"):
        ckks.load_server_context(ctx.serialize(save_secret_key=True))


def test_encrypted_phase_matches_plaintext(key_file):
    pspec = PartitionSpec(partitioner="random", num_clients=4, seed=3)
    plain, _, plain_stats = _federation(SYN, pspec, hops=2)
    enc, proxies, stats = _federation(SYN, pspec, hops=2, he=True, key_files=[key_file] * 4)
    for p, e in zip(plain, enc):
        (rows_a, sums_a), (rows_b, sums_b) = received_rows(p.state), received_rows(e.state)
        np.testing.assert_array_equal(rows_a, rows_b)
        np.testing.assert_allclose(sums_b, sums_a, atol=1e-4, rtol=1e-5)
    assert stats["he"] and stats["ciphertexts_up"] > 0 and stats["bytes_up"] > plain_stats["bytes_up"]
    # The index reply carries the key-less context, never a secret one.
    index_res = proxies[0].messages[0][1]
    assert not ckks.load_server_context(index_res.properties["server_context"]).is_private()


def test_encrypted_training_accuracy_matches_plaintext(key_file, shared_data):
    gspec = GraphSpec(dataset="Cora", data_dir=str(shared_data))
    pspec = PartitionSpec(partitioner="louvain", num_clients=3, seed=0)
    accs = []
    for he in (False, True):
        clients, _, _ = _federation(gspec, pspec, hops=2, he=he, key_files=[key_file] * 3 if he else None)
        params = clients[0].get_parameters({})
        for r in range(1, 31):
            res = [c.fit(params, {"server_round": r}) for c in clients]
            total = sum(n for _, n, _ in res)
            params = [sum(w[i] * n for w, n, _ in res) / total for i in range(len(params))]
        ev = [c.evaluate(params, {}) for c in clients]
        accs.append(sum(m["accuracy"] * m["num_test"] for _, _, m in ev) / sum(m["num_test"] for _, _, m in ev))
    assert accs[0] > 0.7
    assert abs(accs[0] - accs[1]) <= 0.005


def test_clients_with_different_keys_are_refused(tmp_path, key_file):
    other = str(ckks.write_key_file(tmp_path / "other.bin"))
    with pytest.raises(RuntimeError, match="clients hold different CKKS keys"):
        _federation(SYN, PartitionSpec(num_clients=2), hops=2, he=True, key_files=[key_file, other])


def test_bad_key_files(tmp_path, key_file):
    with pytest.raises(KeyFileError, match=r"key-file '/no/such.key' does not exist"):
        ckks.load_key_file("/no/such.key")
    junk = tmp_path / "junk.key"
    junk.write_bytes(b"not a context")
    with pytest.raises(KeyFileError, match=r"key-file '.*junk.key' is not a TenSEAL CKKS context"):
        ckks.load_key_file(junk)
    public = tmp_path / "public.key"
    public.write_bytes(ckks.server_context_bytes(ckks.load_key_file(key_file)))
    with pytest.raises(KeyFileError, match="holds no secret key"):
        ckks.load_key_file(public)


def test_he_without_key_file_fails_at_client_start():
    from flwr.app import Context

    from flowergraph.app.node_client import build_client

    ctx = Context(
        run_id=1,
        node_id=1,
        node_config={"partition-id": 0, "num-partitions": 3},
        state=RecordDict(),
        run_config={"method": "fedgcn", "fedgcn.he": True, "num-clients": 3},
    )
    with pytest.raises(
        ConfigError,
        match="method 'fedgcn' with these settings encrypts, so it needs the data "
        "owners' CKKS key file: set key-file in the node config",
    ):
        build_client(ctx)


@pytest.mark.parametrize(
    "raw,match",
    [
        ({"method": "fedgcn", "fedgcn.hops": 3}, "unknown fedgcn.hops 3; valid choices: 0, 1, 2"),
        ({"method": "fedgcn", "node.model": "sage"}, "method 'fedgcn' trains a 2-layer GCN; got node.model='sage'"),
        ({"method": "fedgcn", "node.layers": 3}, "got node.model='gcn' node.layers=3"),
        ({"method": "fedgcn", "fedgcn.he": True, "fedgcn.hops": 0}, "fedgcn.he=true needs fedgcn.hops=1 or 2"),
        ({"method": "fedgcn", "node.input-dropout": 0.5}, "input-dropout must be 0"),
    ],
)
def test_bad_fedgcn_settings(raw, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config(raw)


def test_server_sum_and_contributions_add_up_to_the_global_aggregation():
    pspec = PartitionSpec(partitioner="dirichlet", num_clients=6, beta=1.0, seed=0)
    data = load_global_graph(SYN)
    graphs = [client_graph(SYN, pspec, k) for k in range(6)]
    rows, sums = server_sum([(c.ids, c.values) for c in (contributions(g, 2) for g in graphs)])
    # Independent: sum_{l in N(u)+u} d_l^{-1/2} x_l from the global graph.
    deg = torch.bincount(data.edge_index[0], minlength=data.num_nodes).double() + 1
    scaled = data.x.double() * deg.rsqrt()[:, None]
    ref = scaled.clone().index_add_(0, data.edge_index[1], scaled[data.edge_index[0]])
    np.testing.assert_allclose(sums[:, :-1], ref[rows].numpy(), atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(sums[:, -1], deg[rows].rsqrt().numpy(), rtol=1e-6)
    ext = extended_graph(graphs[0], 2, rows, sums)
    model = build_node_model("gcn", data.num_features, data.num_classes, seed=0).eval()
    assert fedgcn_forward(model, ext).shape == (graphs[0].num_nodes, data.num_classes)


@pytest.mark.parametrize("hops", [1, 2])
def test_second_layer_as_a_csr_product_equals_the_edge_gather(hops):
    """Issue 91: the second layer is one sparse CSR product (backward: its transpose's); outputs and every
    parameter's gradient equal the previous computation, a gather and index_add over the weighted edges."""
    pspec = PartitionSpec(partitioner="dirichlet", num_clients=4, beta=1.0, seed=0)
    data = load_global_graph(SYN)
    graphs = [client_graph(SYN, pspec, k) for k in range(4)]
    rows, sums = server_sum([(c.ids, c.values) for c in (contributions(g, hops) for g in graphs)])
    ext = extended_graph(graphs[1], hops, rows, sums)
    model = build_node_model("gcn", data.num_features, data.num_classes, seed=0).train()
    conv1, conv2 = model.convs

    def edge_gather():
        h = torch.relu(conv1.lin(ext.features) + conv1.bias)
        hw = conv2.lin(h)
        out = torch.zeros((ext.num_own, hw.size(1))).index_add(
            0, ext.prop_index[0], hw[ext.prop_index[1]] * ext.prop_weight[:, None]
        )
        return torch.log_softmax(out + conv2.bias, dim=-1)

    model.dropout.p = 0.0  # train mode (autograd as in training), no random mask
    outs, grads = [], []
    for forward in (edge_gather, lambda: fedgcn_forward(model, ext)):
        model.zero_grad()
        out = forward()
        out[graphs[1].train_mask].sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    for new, old in zip(grads[1], grads[0]):
        torch.testing.assert_close(new, old, atol=1e-5, rtol=1e-5)


def test_he_layout_places_every_row_once_and_clients_find_exactly_their_rows():
    """The CKKS packing against a direct computation: every row gets `width` slots of its own, inside its group's
    ciphertexts; rows_for returns exactly the rows a client contributed to / requested, and ciphertexts_for exactly
    the ciphertexts those slots touch."""
    rng = np.random.default_rng(3)
    width, slots, clients = 7, 16, 4
    contributed = {c: np.sort(rng.choice(60, size=25, replace=False)) for c in range(clients)}
    every = np.unique(np.concatenate(list(contributed.values())))
    requested = {c: np.sort(rng.choice(every, size=15, replace=False)) for c in range(clients)}
    layout = ckks.he_layout(contributed, requested, width, slots)
    assert sorted(layout.row_ids.tolist()) == every.tolist()  # each row exactly once
    used = np.zeros(layout.num_ciphertexts * slots, dtype=int)
    for off in layout.offsets.tolist():
        used[off : off + width] += 1
    assert used.max() == 1  # no two rows share a slot
    for contrib, req, ct0, n_ct in layout.groups:
        rows = [
            r
            for r in every.tolist()
            if frozenset(c for c in range(clients) if r in contributed[c]) == contrib
            and frozenset(c for c in range(clients) if r in requested[c]) == req
        ]
        mine = [i for i, r in enumerate(layout.row_ids.tolist()) if r in rows]
        assert all(ct0 * slots <= layout.offsets[i] and layout.offsets[i] + width <= (ct0 + n_ct) * slots for i in mine)
    for c in range(clients):
        for role, expected in (("contributor", contributed[c]), ("requester", requested[c])):
            ids, offs = layout.rows_for(c, role)
            assert sorted(ids.tolist()) == expected.tolist()
            assert offs.tolist() == [int(layout.offsets[layout.row_ids.tolist().index(r)]) for r in ids.tolist()]
            touched = sorted({s // slots for o in offs.tolist() for s in range(o, o + width)})
            assert ckks.ciphertexts_for(offs, width, slots).tolist() == touched
    with pytest.raises(ValueError, match="strictly ascending"):
        ckks.HELayout(width=width, slots=slots, row_ids=np.array([0, 1]), offsets=np.array([7, 0]))
