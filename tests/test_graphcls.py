"""FedStar's Flower-free core: structure embeddings, data settings/splits, models' parts, training."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from flowergraph.errors import ConfigError, DatasetUnavailableError, PartitionError
from flowergraph.tasks.graphcls import data as gdata
from flowergraph.tasks.graphcls import structure as st
from flowergraph.tasks.graphcls.data import (
    SETTINGS,
    GraphTaskSpec,
    client_graph_data,
    dataset_graphs,
    parse_graph_datasets,
    stratified_split,
)
from flowergraph.tasks.graphcls.models import build_graph_model, get_arrays, part_keys, set_arrays
from flowergraph.tasks.graphcls.training import GraphTrainConfig, evaluate, make_optimizer, train_epochs
from flowergraph.tasks.torch_state import load_optimizer_state, optimizer_state


# ---------------------------------------------------------------- structure embeddings


def _dense_rwse(edges, n, k):
    """Independent reference: numpy matrix powers of T = A D^-1 (isolated node: zero column)."""
    a = np.zeros((n, n))
    for u, v in edges:
        if u != v:
            a[u, v] = a[v, u] = 1.0
    d = a.sum(axis=0)
    t = a / np.where(d > 0, d, np.inf)[None, :]
    return np.stack([np.diag(np.linalg.matrix_power(t, p)) for p in range(1, k + 1)], axis=1)


def _concat(graphs):
    """[(undirected edge list, n)] -> global edge_index with both directions, and node counts."""
    cols, off = [], 0
    for edges, n in graphs:
        e = np.array(edges, dtype=np.int64).reshape(-1, 2)
        cols.append(np.concatenate([e, e[:, ::-1]]).T + off)
        off += n
    return np.concatenate(cols, axis=1), [n for _, n in graphs]


SMALL_GRAPHS = [
    ([(0, 1), (1, 2), (2, 0), (2, 3)], 5),  # triangle with a tail and isolated node 4
    ([(0, 1)], 2),
    ([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)], 6),
    ([(i, j) for i in range(7) for j in range(i + 1, 7) if (i * j) % 3 != 1], 7),
]


@pytest.mark.parametrize("budget", [1 << 22, 20])  # batched graphs / one graph in column blocks
def test_rwse_equals_dense_matrix_powers(budget):
    edge_index, num_nodes = _concat(SMALL_GRAPHS)
    got = st.random_walk_se(edge_index, num_nodes, steps=16, budget=budget)
    want = np.concatenate([_dense_rwse(e, n, 16) for e, n in SMALL_GRAPHS])
    assert got.shape == (sum(num_nodes), 16) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.all(np.isfinite(got)) and np.all(got[4] == 0)  # the isolated node: zeros, not NaN
    assert got[5, 1] == pytest.approx(1.0) and got[5, 0] == 0  # an edge: back after 2 steps surely


def test_rwse_on_real_graphs_and_disk_cache(shared_data, tmp_path, monkeypatch):
    mutag = dataset_graphs("MUTAG", str(shared_data))
    graphs = [([tuple(e) for e in g.edge_index.t().tolist()], g.num_nodes) for g in mutag.graphs[:12]]
    edge_index, num_nodes = _concat(graphs)
    want = np.concatenate([_dense_rwse(e, n, 8) for e, n in graphs])
    path = tmp_path / "rwse.npz"
    np.testing.assert_allclose(st.cached_random_walk_se(edge_index, num_nodes, 8, path), want, atol=1e-6)
    assert path.is_file() and not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(st, "random_walk_se", lambda *a, **k: pytest.fail("recomputed despite the cache"))
    np.testing.assert_allclose(st.cached_random_walk_se(edge_index, num_nodes, 8, path), want, atol=1e-6)
    monkeypatch.undo()
    edge_index[:, :2] = edge_index[:, [1, 0]]  # other graphs (a changed edge list): the file is stale
    calls = []
    monkeypatch.setattr(st, "random_walk_se", lambda *a, **k: calls.append(1) or np.zeros((sum(num_nodes), 8)))
    st.cached_random_walk_se(edge_index, num_nodes, 8, path)
    assert calls == [1]


def test_dse_clipping():
    # isolated node (degree 0); stars whose centres have degree 16, 17, 40 and 5; leaves have degree 1
    graphs, centre = [([], 1)], {}
    for k in (16, 17, 40, 5):
        centre[k] = sum(n for _, n in graphs)
        graphs.append(([(0, i) for i in range(1, k + 1)], k + 1))
    edge_index, num_nodes = _concat(graphs)
    dse = st.degree_se(edge_index, sum(num_nodes), 16)
    assert dse.shape == (sum(num_nodes), 16) and np.all(dse.sum(axis=1) == 1)
    pos = dse.argmax(axis=1)
    assert pos[0] == 0  # degree 0 shares position 0 with degree 1 (authors' clip(1, k1))
    assert pos[centre[16]] == 15 and pos[centre[17]] == 15 and pos[centre[40]] == 15 and pos[centre[5]] == 4
    leaves = np.setdiff1d(np.arange(1, sum(num_nodes)), list(centre.values()))
    assert np.all(pos[leaves] == 0)


def test_structure_ablations_shapes_and_order():
    edge_index, num_nodes = _concat(SMALL_GRAPHS)
    n = sum(num_nodes)
    full = st.structure_embeddings(edge_index, num_nodes, ("dse", "rwse"), 16, 16)
    dse = st.degree_se(edge_index, n, 16)
    rwse = st.random_walk_se(edge_index, num_nodes, 16)
    assert full.shape == (n, 32) and np.array_equal(full, np.concatenate([dse, rwse], axis=1))
    assert np.array_equal(
        st.structure_embeddings(edge_index, num_nodes, "rwse,dse"), np.concatenate([rwse, dse], axis=1)
    )
    assert st.structure_embeddings(edge_index, num_nodes, ("dse",), 8, 4).shape == (n, 8)
    assert st.structure_embeddings(edge_index, num_nodes, "rwse", 8, 4).shape == (n, 4)
    ones = st.structure_embeddings(edge_index, num_nodes, ())
    assert ones.shape == (n, st.ONES_DIM) and np.all(ones == 1)
    assert [st.structure_dim(k, 8, 4) for k in [("dse", "rwse"), ("dse",), ("rwse",), ()]] == [12, 8, 4, 16]
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "unknown structure embedding 'lap' in 'dse,lap'; valid "
            "choices: a comma-separated subset of dse, rwse, or 'ones'"
        ),
    ):
        st.parse_structure("dse,lap")
    with pytest.raises(ConfigError, match=re.escape("structure embedding 'dse' listed twice in ('dse', 'DSE')")):
        st.parse_structure(("dse", "DSE"))


def test_spec_structure_reaches_the_graphs(shared_data):
    spec = GraphTaskSpec("MUTAG", data_dir=str(shared_data), structure="dse", dse_dim=8)
    graph = client_graph_data(spec, 0).train[0]
    assert spec.structure_dim == 8 and graph.s.shape == (graph.num_nodes, 8)
    ones = client_graph_data(GraphTaskSpec("MUTAG", data_dir=str(shared_data), structure="ones"), 0)
    assert ones.structure_dim == 16 and torch.all(ones.test[0].s == 1)


# ---------------------------------------------------------------- features


def test_featureless_datasets_get_one_hot_degree(shared_data):
    from flowergraph.tasks.datasets import load_pyg_dataset

    data = dataset_graphs("IMDB-BINARY", str(shared_data))
    assert data.num_features == 136 and data.num_classes == 2 and len(data.graphs) == 1000
    raw = load_pyg_dataset("IMDB-BINARY", shared_data)
    for i in (0, 17, 999):
        g = data.graphs[i]
        deg = torch.bincount(raw[i].edge_index[0], minlength=raw[i].num_nodes)
        assert g.x.shape == (raw[i].num_nodes, 136) and torch.all(g.x.sum(dim=1) == 1)
        assert torch.equal(g.x.argmax(dim=1), deg)


def test_one_hot_degree_cap_error(shared_data, monkeypatch):
    from flowergraph.tasks.datasets import load_pyg_dataset

    raw = load_pyg_dataset("IMDB-MULTI", shared_data)
    degs = [int(torch.bincount(raw[i].edge_index[0]).max()) for i in range(len(raw))]
    first = degs.index(max(degs))
    monkeypatch.setitem(gdata.ONE_HOT_DEGREE, "IMDB-MULTI", 50)
    with pytest.raises(ConfigError) as err:
        dataset_graphs.__wrapped__("IMDB-MULTI", str(shared_data), (), 16, 16, False)
    assert str(err.value) == (
        f"dataset 'IMDB-MULTI': graph {first} has a node of degree {max(degs)}, above the "
        f"one-hot degree cap 50 FedStar uses for it (OneHotDegree(50)); the raw files differ "
        f"from the TU originals"
    )
    assert max(degs) == 88


def test_letter_uses_its_2d_node_attributes(shared_data):
    data = dataset_graphs("Letter-low", str(shared_data))
    raw = shared_data / "TUDataset" / "Letter-low" / "raw"
    attrs = np.loadtxt(raw / "Letter-low_node_attributes.txt", delimiter=",")
    indicator = np.loadtxt(raw / "Letter-low_graph_indicator.txt", dtype=np.int64)
    assert data.num_features == 2 and data.num_classes == 15
    for i in (0, 1, 2249):
        np.testing.assert_allclose(data.graphs[i].x.numpy(), attrs[indicator == i + 1], rtol=1e-6)


def test_node_label_datasets_use_one_hot_labels(shared_data):
    data = dataset_graphs("MUTAG", str(shared_data))
    labels = np.loadtxt(shared_data / "TUDataset" / "MUTAG" / "raw" / "MUTAG_node_labels.txt", dtype=np.int64)
    x = torch.cat([g.x for g in data.graphs])
    assert x.dtype == torch.float32 and x.shape == (len(labels), 7)
    assert np.array_equal(x.argmax(dim=1).numpy(), labels - labels.min())


# ---------------------------------------------------------------- settings and specs


def test_parse_settings_names_case_and_lists(shared_data):
    assert parse_graph_datasets("CHEM") == ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")
    assert parse_graph_datasets("bio-chem") == SETTINGS["CHEM"] + ("ENZYMES", "DD", "PROTEINS")
    assert parse_graph_datasets("Bio-Chem-SN")[-3:] == ("IMDB-BINARY", "IMDB-MULTI", "COLLAB")
    assert len(parse_graph_datasets("BIO-SN-CV")) == 9
    assert parse_graph_datasets(" mutag, imdb-binary ,letter-HIGH") == ("MUTAG", "IMDB-BINARY", "Letter-high")
    assert parse_graph_datasets("chem,ENZYMES") == SETTINGS["CHEM"] + ("ENZYMES",)
    offline = parse_graph_datasets("BIO-SN-CV", offline_only=True, data_dir=str(shared_data))
    assert offline == tuple(d for d in SETTINGS["BIO-SN-CV"] if d != "COLLAB")
    assert parse_graph_datasets("COLLAB,MUTAG", offline_only=True, data_dir=str(shared_data))[0] == "COLLAB"


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "MUTAG,Cora",
            "unknown graph dataset or setting 'Cora'; valid choices: settings CHEM, BIO-CHEM, BIO-CHEM-SN, "
            "BIO-SN-CV; TU datasets MUTAG, PTC_MR, NCI1, NCI109, PROTEINS, ENZYMES, DD, IMDB-BINARY, "
            "IMDB-MULTI, COLLAB, BZR, COX2, DHFR, AIDS, Letter-low, Letter-med, Letter-high",
        ),
        ("MUTAG,,PTC_MR", "empty dataset name in 'MUTAG,,PTC_MR'; valid choices: settings CHEM"),
        ("MUTAG,mutag", "dataset 'MUTAG' appears twice in 'MUTAG,mutag'; each client owns one dataset"),
        ("CHEM,BIO-CHEM", "dataset 'MUTAG' appears twice in 'CHEM,BIO-CHEM'"),
        ("", "no graph dataset given (''); valid choices: settings CHEM"),
    ],
)
def test_parse_settings_errors(text, message):
    with pytest.raises(ConfigError) as err:
        parse_graph_datasets(text)
    assert str(err.value).startswith(message)


def test_spec_client_count_errors():
    with pytest.raises(ConfigError) as err:
        GraphTaskSpec("MUTAG,PTC_MR,BZR", num_clients=2)
    assert str(err.value) == (
        "num_clients=2 but 3 datasets were given (MUTAG, PTC_MR, BZR): with several datasets "
        "each client owns one, so num_clients must be 3"
    )
    spec = GraphTaskSpec(("mutag", "ptc_mr"))
    assert (
        spec.datasets == ("MUTAG", "PTC_MR")
        and spec.client_count == 2
        and hash(spec) == hash(GraphTaskSpec("MUTAG,PTC_MR"))
    )
    with pytest.raises(ConfigError, match=re.escape("client_id 2 out of range; valid choices: 0..1")):
        client_graph_data(spec, 2)
    with pytest.raises(ConfigError, match=re.escape("split (0.7, 0.2, 0.2): expected three fractions")):
        GraphTaskSpec("MUTAG", split=(0.7, 0.2, 0.2))


def test_collab_missing_says_where_to_put_it(tmp_path, monkeypatch):
    from torch_geometric.datasets import TUDataset

    def offline(self):
        raise OSError("offline")

    monkeypatch.setattr(TUDataset, "download", offline)  # no network in tests
    with pytest.raises(DatasetUnavailableError) as err:
        dataset_graphs("COLLAB", str(tmp_path))
    where = f"{tmp_path.resolve()}/TUDataset/COLLAB/raw/COLLAB_{{A,graph_indicator,graph_labels}}.txt"
    assert str(err.value) == (
        f"dataset 'COLLAB': raw files not found and the download failed (OSError: offline). Put the raw files at "
        f"{where} and pass that folder as data-dir (or set FLOWERGRAPH_DATA). (COLLAB is not in the offline "
        f"dataset collection; parse_graph_datasets(..., offline_only=True) drops it from a setting)"
    )


# ---------------------------------------------------------------- splits and clients


def _positions(client, spec):
    graphs = dataset_graphs(
        client.dataset, spec.data_dir, spec.structure, spec.dse_dim, spec.rwse_dim, spec.rwse_disk_cache
    ).graphs  # the memoised objects the client's splits hold
    index = {id(g): i for i, g in enumerate(graphs)}
    return [[index[id(g)] for g in client.split(s)] for s in ("train", "val", "test")]


def test_stratified_split_80_10_10_per_class(shared_data):
    labels = np.loadtxt(shared_data / "TUDataset" / "PTC_MR" / "raw" / "PTC_MR_graph_labels.txt", dtype=np.int64)
    spec = GraphTaskSpec("CHEM", data_dir=str(shared_data), split_method="per-class")
    client = client_graph_data(spec, 4)
    assert client.name == "PTC_MR" and client.num_classes == 2 and client.num_features == 18
    train, val, test = _positions(client, spec)
    assert sorted(train + val + test) == list(range(344))
    for c in np.unique(labels):
        n = int((labels == c).sum())
        in_split = [int(np.isin(np.flatnonzero(labels == c), s).sum()) for s in (train, val, test)]
        assert in_split == [n - 2 * int(np.floor(0.1 * n + 0.5))] + [int(np.floor(0.1 * n + 0.5))] * 2
    y = lambda graphs: sorted(int(g.y) for g in graphs)  # noqa: E731
    assert y(client.train) == sorted(int(labels[i] > 0) for i in train)


def test_split_depends_on_split_seed_only(shared_data):
    spec = GraphTaskSpec("MUTAG,PTC_MR", data_dir=str(shared_data))
    torch.manual_seed(1), np.random.seed(1)
    first = _positions(client_graph_data(spec, 0), spec)
    client_graph_data.cache_clear()
    torch.manual_seed(2), np.random.seed(2)
    torch.rand(3), np.random.rand(3)
    assert _positions(client_graph_data(spec, 0), spec) == first
    in_chem = GraphTaskSpec("CHEM", data_dir=str(shared_data))
    assert _positions(client_graph_data(in_chem, 0), in_chem) == first  # same dataset, same split anywhere
    other = GraphTaskSpec("MUTAG,PTC_MR", data_dir=str(shared_data), split_seed=7)
    assert _positions(client_graph_data(other, 0), other) != first
    a = stratified_split(np.arange(50) % 3, seed=(5, 1))
    np.random.seed(9)
    assert all(np.array_equal(x, y) for x, y in zip(a, stratified_split(np.arange(50) % 3, seed=(5, 1))))


def _skew(assignment, labels):
    """Mean total-variation distance between each client's label distribution and the global one."""
    glob = np.bincount(labels) / len(labels)
    return np.mean(
        [
            0.5
            * np.abs(np.bincount(labels[assignment == k], minlength=len(glob)) / (assignment == k).sum() - glob).sum()
            for k in np.unique(assignment)
        ]
    )


def test_one_dataset_dirichlet_clients(shared_data):
    labels = dataset_graphs("PTC_MR", str(shared_data)).labels
    skews = {}
    for beta in (0.1, 1000.0):
        spec = GraphTaskSpec("PTC_MR", data_dir=str(shared_data), num_clients=4, beta=beta)
        clients = [client_graph_data(spec, k) for k in range(4)]
        assert [c.name for c in clients] == ["0-PTC_MR", "1-PTC_MR", "2-PTC_MR", "3-PTC_MR"]
        owned = sorted(i for c in clients for s in _positions(c, spec) for i in s)
        assert owned == list(range(len(labels)))  # every graph exactly once
        assert min(c.num_train + c.num_val + c.num_test for c in clients) >= spec.min_graphs
        assignment = np.empty(len(labels), dtype=np.int64)
        for k, c in enumerate(clients):
            assignment[[i for s in _positions(c, spec) for i in s]] = k
        skews[beta] = _skew(assignment, labels)
    assert skews[0.1] > skews[1000.0] + 0.1
    with pytest.raises(ConfigError) as err:
        client_graph_data(GraphTaskSpec("MUTAG", data_dir=str(shared_data), num_clients=20), 0)
    assert str(err.value) == "num_clients=20 x min_graphs=10 = 200 exceeds the 188 graphs of MUTAG"
    with pytest.raises(
        PartitionError,
        match=re.escape(
            "dataset 'MUTAG': no Dirichlet(beta=0.01) split of its 188 graphs gave every one of the 18 clients >= "
        ),
    ):
        gdata.dirichlet_clients(GraphTaskSpec("MUTAG", data_dir=str(shared_data), num_clients=18, beta=0.01))


# ---------------------------------------------------------------- models and their parts


@pytest.fixture(scope="module")
def mutag(shared_data):
    return client_graph_data(GraphTaskSpec("MUTAG", data_dir=str(shared_data)), 0)


def _batch(graphs):
    from torch_geometric.data import Batch

    return Batch.from_data_list(list(graphs))


def test_structure_part_is_exactly_the_structure_branch():
    model = build_graph_model("decoupled", 7, 2, 32, seed=0)
    branch = [f"struct_in.{k}" for k in model.struct_in.state_dict()] + [
        f"struct_convs.{k}" for k in model.struct_convs.state_dict()
    ]
    assert part_keys(model, "structure") == branch
    assert len(branch) == 2 + 2 * 3 and all("feat" not in k for k in branch)
    parts = [set(part_keys(model, p)) for p in ("structure", "feature", "classifier")]
    assert set.union(*parts) == set(model.state_dict()) and sum(map(len, parts)) == len(model.state_dict())
    assert set(part_keys(model, "all-but-classifier")) == parts[0] | parts[1]
    assert set(part_keys(model, "convs")) == {k for k in model.state_dict() if "_convs." in k}
    # Dataset-independent layers start identical on every client with the same seed (and differ across seeds).
    other = build_graph_model("decoupled", 18, 3, 32, seed=0)
    for a, b in zip(
        get_arrays(model, "structure") + get_arrays(model, "convs"),
        get_arrays(other, "structure") + get_arrays(other, "convs"),
    ):
        assert np.array_equal(a, b)
    assert not np.array_equal(
        get_arrays(model, "structure")[0], get_arrays(build_graph_model("decoupled", 7, 2, 32, seed=1), "structure")[0]
    )
    gin = build_graph_model("gin", 7, 2, seed=0)
    with pytest.raises(ConfigError) as err:
        part_keys(gin, "structure")
    assert str(err.value) == (
        "unknown part 'structure' for GIN; valid choices: feature, classifier, convs, all-but-classifier, all"
    )
    assert part_keys(gin, "classifier") == ["fc.weight", "fc.bias", "out.weight", "out.bias"]


@pytest.mark.parametrize("kind,part", [("decoupled", "structure"), ("gin", "convs")])
def test_set_arrays_really_changes_the_model(mutag, kind, part):
    batch = _batch(mutag.test)
    a = build_graph_model(kind, mutag.num_features, 2, mutag.structure_dim, seed=0).eval()
    b = build_graph_model(kind, mutag.num_features, 2, mutag.structure_dim, seed=1).eval()
    params = [id(p) for p in a.parameters()]
    before = a(batch)
    set_arrays(a, part, get_arrays(b, part))
    assert all(np.array_equal(x, y) for x, y in zip(get_arrays(a, part), get_arrays(b, part)))
    assert [id(p) for p in a.parameters()] == params  # copied into the live parameters (the optimizer's)
    assert not torch.allclose(a(batch), before)
    set_arrays(a, "all", get_arrays(b, "all"))
    assert torch.equal(a(batch), b(batch))
    keys = part_keys(a, part)
    bad = get_arrays(b, part)
    bad[1] = np.zeros((3, 3), dtype=np.float32)
    with pytest.raises(
        ConfigError,
        match=re.escape(f"array for {keys[1]!r} has shape (3, 3), expected {tuple(get_arrays(b, part)[1].shape)}"),
    ):
        set_arrays(a, part, bad)
    with pytest.raises(ConfigError, match=re.escape(f"part {part!r} of {type(a).__name__} has {len(keys)} arrays")):
        set_arrays(a, part, bad[:-1])


def _dense_forward(model, batch):
    """The docstring's equations with dense matrices: an independent computation of the models' forward (eval)."""
    n = batch.num_nodes
    a = torch.zeros(n, n)
    a[batch.edge_index[1], batch.edge_index[0]] = 1.0  # row = target: sum over in-neighbours
    a_hat = a + torch.eye(n)
    d = a_hat.sum(1).pow(-0.5)
    gcn = d[:, None] * a_hat * d[None, :]
    pool = torch.zeros(int(batch.batch.max()) + 1, n)
    pool[batch.batch, torch.arange(n)] = 1.0

    def gin(conv, x):  # GIN with eps = 0: MLP(x + sum of neighbours)
        return conv.nn(x + a @ x)

    if hasattr(model, "struct_in"):
        h, g = model.feat_in(batch.x), model.struct_in(batch.s)
        for conv, sconv in zip(model.feat_convs, model.struct_convs):
            h = torch.relu(gin(conv, torch.cat([h, g], -1)))
            g = torch.tanh(gcn @ sconv.lin(g) + sconv.bias)
        hg = torch.cat([h, g], -1)
        z = pool @ model.pool_fc(hg) if model.pool_order == "per-node" else model.pool_fc(pool @ hg)
    else:
        h = model.feat_in(batch.x)
        for conv in model.feat_convs:
            h = torch.relu(gin(conv, h))
        z = pool @ h
    return torch.log_softmax(model.out(torch.relu(model.fc(z))), -1)


@pytest.mark.parametrize("kind", ["decoupled", "gin"])
def test_forward_equals_dense_equations_and_the_edge_list_path(mutag, kind):
    """The sparse-adjacency forward (what trains) = the module docstring's equations computed with dense matrices,
    and = PyG's edge-list message passing, forward and gradients."""
    from flowergraph.tasks.graphcls.models import adjacency

    batch = _batch(list(mutag.train)[:40])
    model = build_graph_model(kind, mutag.num_features, 2, mutag.structure_dim, seed=0).eval()
    out = model(batch)
    assert torch.allclose(out, _dense_forward(model, batch), atol=1e-4)
    assert adjacency(batch).layout == torch.sparse_csr
    edge_list = batch.clone()
    import flowergraph.tasks.graphcls.models as models

    original = models.adjacency
    try:
        models.adjacency = lambda data: data.edge_index  # PyG's gather/scatter path
        ref = model(edge_list)
        ref.sum().backward()
        grads_ref = [p.grad.clone() for p in model.parameters()]
    finally:
        models.adjacency = original
    model.zero_grad()
    out = model(batch)
    out.sum().backward()
    assert torch.allclose(out, ref, atol=1e-5)
    assert all(torch.allclose(p.grad, g, atol=1e-4, rtol=1e-4) for p, g in zip(model.parameters(), grads_ref))


# ---------------------------------------------------------------- training


def test_optimizer_state_round_trip_is_exact(mutag):
    cfg = GraphTrainConfig()
    model = build_graph_model("decoupled", mutag.num_features, 2, mutag.structure_dim, seed=3)
    opt = make_optimizer(model, cfg)
    train_epochs(model, opt, mutag.train, cfg, seed=0, round=0)
    weights = get_arrays(model, "all")
    arrays, values = optimizer_state(opt)
    assert all(isinstance(a, np.ndarray) for a in arrays.values()) and values["param_groups"][0]["lr"] == cfg.lr
    n = len(list(model.parameters()))
    assert sum(k.endswith((".exp_avg", ".exp_avg_sq")) for k in arrays) == 2 * n  # the moments of every parameter
    train_epochs(model, opt, mutag.train, cfg, seed=0, round=1)  # uninterrupted

    def fresh(restore):
        m = build_graph_model("decoupled", mutag.num_features, 2, mutag.structure_dim, seed=99)
        set_arrays(m, "all", weights)
        o = make_optimizer(m, cfg)
        if restore:
            load_optimizer_state(o, {k: a.copy() for k, a in arrays.items()}, values)
        train_epochs(m, o, mutag.train, cfg, seed=0, round=1)
        return m

    assert all(torch.equal(x, y) for x, y in zip(fresh(True).state_dict().values(), model.state_dict().values()))
    assert not all(torch.equal(x, y) for x, y in zip(fresh(False).state_dict().values(), model.state_dict().values()))
    with pytest.raises(ValueError, match=f"saved optimizer state covers {n} parameters, the optimizer {n - 1}"):
        load_optimizer_state(torch.optim.Adam(list(model.parameters())[:-1]), arrays, values)


def test_training_reduces_loss_and_is_reproducible(mutag):
    cfg = GraphTrainConfig()

    def run(seed):
        model = build_graph_model("decoupled", mutag.num_features, 2, mutag.structure_dim, seed=0)
        opt = make_optimizer(model, cfg)
        start = evaluate(model, mutag, splits=("train",))["train_loss"]
        losses = [train_epochs(model, opt, mutag.train, cfg, seed=seed, round=r, client=0) for r in range(20)]
        return start, losses, evaluate(model, mutag), model

    start, losses, metrics, model = run(0)
    assert metrics["train_loss"] < 0.75 * start and losses[-1] < losses[0]
    assert metrics["num_train"] == 150 and metrics["num_test"] == 19
    model.eval()  # the test accuracy, graph by graph, against evaluate()'s batched one
    with torch.no_grad():
        right = [int(model(Batch.from_data_list([g])).argmax(dim=-1).item() == int(g.y)) for g in mutag.split("test")]
    assert metrics["test_accuracy"] == pytest.approx(sum(right) / 19)
    assert run(0)[1] == losses and run(1)[1] != losses  # (seed, round, client) fixes batches and dropout


def test_fedprox_term_pulls_shared_part_to_the_anchor(mutag):
    def drift(mu):
        model = build_graph_model("decoupled", mutag.num_features, 2, mutag.structure_dim, seed=0)
        anchor = get_arrays(model, "structure")
        cfg = GraphTrainConfig(local_epochs=3, lr=0.01, mu=mu)
        train_epochs(model, make_optimizer(model, cfg), mutag.train, cfg, seed=0, prox_part="structure")
        return sum(float(((a - b) ** 2).sum()) for a, b in zip(get_arrays(model, "structure"), anchor))

    assert drift(10.0) < 0.5 * drift(0.0)
    with pytest.raises(ConfigError, match=re.escape("mu > 0 (FedProx) needs prox_part")):
        train_epochs(
            build_graph_model("gin", 7, 2),
            make_optimizer(build_graph_model("gin", 7, 2)),
            mutag.train,
            GraphTrainConfig(mu=0.01),
        )


def test_no_flower_import():
    import subprocess
    import sys

    code = (
        "import sys, flowergraph.tasks.graphcls as g; import flowergraph.tasks.graphcls.training; "
        "print(any(m == 'flwr' or m.startswith('flwr.') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == "False"


def test_the_default_split_is_the_authors_sklearn_split():
    """graph.split=paper equals scikit-learn's train_test_split called as the FedStar authors call it (lib/setupGC.py:
    test_size=0.2 stratified, then 50/50 of the held-out part, random_state = the split seed): the same indices in
    the same order, on a small labelled set."""
    from sklearn.model_selection import train_test_split

    from flowergraph.tasks.graphcls.data import paper_split

    labels = np.array([0] * 23 + [1] * 11 + [2] * 7)
    rng = np.random.default_rng(5)
    labels = labels[rng.permutation(len(labels))]
    items = list(range(len(labels)))  # the authors split the list of graphs itself
    tv, held = train_test_split(items, test_size=0.2, stratify=labels, shuffle=True, random_state=123)
    val, test = train_test_split(
        held, train_size=0.5, test_size=0.5, stratify=labels[held], shuffle=True, random_state=123
    )
    got = paper_split(labels, 123)
    assert [list(g) for g in got] == [tv, val, test]
    assert sorted(np.concatenate(got).tolist()) == items  # every graph once
    assert paper_split(labels, 7)[2].tolist() != test  # the split seed moves it


def test_both_splits_are_available_and_differ(shared_data):
    from flowergraph.tasks.graphcls.data import GraphTaskSpec, client_graph_data

    a = client_graph_data(GraphTaskSpec(datasets="MUTAG", data_dir=str(shared_data)), 0)
    b = client_graph_data(GraphTaskSpec(datasets="MUTAG", data_dir=str(shared_data), split_method="per-class"), 0)
    assert (a.num_train, a.num_val, a.num_test) == (150, 19, 19) and (b.num_train, b.num_val, b.num_test) == (
        150,
        19,
        19,
    )
    assert {id(g) for g in a.test} != {id(g) for g in b.test}
    with pytest.raises(ConfigError, match="unknown split method 'sklearn'; valid choices: paper, per-class"):
        GraphTaskSpec(datasets="MUTAG", split_method="sklearn")


def test_pool_order_differs_only_in_the_bias():
    """per-node adds FC(2h,h)'s bias once per node, pooled once per graph: with a zero bias they agree."""
    from torch_geometric.data import Batch, Data

    from flowergraph.tasks.graphcls.models import build_graph_model

    g = Data(x=torch.randn(5, 3), s=torch.randn(5, 4), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]]))
    batch = Batch.from_data_list([g, g])
    a = build_graph_model("decoupled", 3, 2, 4, hidden=8, seed=1, pool_order="per-node").eval()
    b = build_graph_model("decoupled", 3, 2, 4, hidden=8, seed=1, pool_order="pooled").eval()
    assert not torch.allclose(a(batch), b(batch))
    with torch.no_grad():
        a.pool_fc.bias.zero_()
        b.pool_fc.bias.zero_()
    torch.testing.assert_close(a(batch), b(batch))
    with pytest.raises(ConfigError, match="unknown pool_order 'mean'; valid choices: per-node, pooled"):
        build_graph_model("decoupled", 3, 2, 4, pool_order="mean")
