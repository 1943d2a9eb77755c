"""FedStar's decoupled GNN (paper App. A.4, Table 9), the GIN baseline, and their parts as arrays.

``DecoupledGIN`` (hidden h = 64, L = 3, dropout p = 0.5 by default), for node features x and structure
embeddings s of one batch of graphs::

    h_0 = W_x x + b                      FC(n_feat, h)       feature encoder
    g_0 = W_s s + b                      FC(struct_dim, h)   structure encoder (shared)
    for l = 1..L:
        h_l = Dropout(ReLU(GIN_l([h_{l-1} || g_{l-1}])))     GIN(2h -> h), MLP Linear(2h,h)-ReLU-Linear(h,h), eps = 0
        g_l = tanh(GCN_l(g_{l-1}))                           GCN(h, h), self loops + symmetric normalisation (shared)
    z = sum over the graph's nodes of FC(2h, h)([h_L || g_L])   pool_order="per-node" (the authors' code)
      = FC(2h, h)(sum over the graph's nodes of [h_L || g_L])   pool_order="pooled" (the paper's Table 9)
    z = Dropout(ReLU(FC(h, h)(z)));  out = log_softmax(FC(h, n_class)(z))

``pool_order``: the authors' code applies ``FC(2h, h)`` ("Whp") to every node *before* the sum pooling (the
default here); Table 9 pools first. The two differ only in the bias, which the authors' order adds once per node
(``n_nodes * b``) instead of once per graph. Everything else (GIN inner MLP without batch norm, eps fixed at 0,
GCNConv defaults, no dropout on the structure branch, ReLU + dropout after FC(h, h) only) follows the code.

``GIN`` (the baselines' model, as in the authors' code): ``FC(n_feat, h)``; L x [GIN(h -> h) with MLP
Linear(h,h)-ReLU-Linear(h,h), ReLU, Dropout]; sum pooling; ``FC(h, h)``, ReLU, Dropout; ``FC(h, n_class)``;
log_softmax.

Parts (``state_dict`` keys by module prefix; arrays travel in ``state_dict`` order, buffers included: the
fixed GIN ``eps`` is a buffer of the feature part):

* ``structure``: ``struct_in`` + ``struct_convs`` -- exactly what FedStar shares (Table 9's bold layers; the
  authors' ``'_s' in key`` filter selects the same ``embedding_s`` + ``graph_convs_s_gcn``). DecoupledGIN only.
* ``feature``: ``feat_in`` + ``feat_convs``.
* ``classifier``: everything after pooling (``pool_fc`` (DecoupledGIN only), ``fc``, ``out``).
* ``convs``: the graph convolutions only (``feat_convs`` and, for DecoupledGIN, ``struct_convs``). This is the
  paper's FedPer ("only the parameters in graph convolution layers are shared", App. A.2) and also what the
  authors' (GCFL-derived) code shares for FedAvg/FedProx/FedPer: its server model holds only ``graph_convs``.
* ``all-but-classifier``: feature + structure encoders (FedPer in Arivazhagan et al.'s sense); ``all``: every key.

``feat_in`` depends on ``n_feat`` and ``out`` on ``n_class``, so ``all``, ``all-but-classifier`` and
``feature`` can only be averaged among clients of one dataset (a Dirichlet split); across datasets share
``structure`` (FedStar) or ``convs`` (FedAvg/FedProx/FedPer as in the paper's runs).

Message passing runs as a sparse matrix product: each forward turns the batch's ``edge_index`` into the
transposed adjacency as a ``torch.sparse_csr`` tensor (:func:`adjacency`) and hands that to every GIN and GCN
layer. PyG then aggregates with one CSR ``spmm`` per layer instead of a gather + scatter over the edge list: the
same sums (to float rounding; tests compare both paths), about 2x faster per epoch on DD on one core (measured
7.4/5.9 s -> 3.3/3.5 s for DD's 942 training graphs).

Seeding: with ``seed`` every layer is initialised from its own generator seeded by (seed, layer name), so the
weights are a pure function of the seed and every layer whose shape does not depend on the dataset
(structure encoder, GIN layers 2..L, FC(h, h)) starts identical on every client with the same seed -- what the
authors obtain by copying the server's initial layers to all clients.
"""

from __future__ import annotations

import contextlib
import warnings
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError
from ..compute import seed_torch

MODELS = ("decoupled", "gin")
POOL_ORDERS = ("per-node", "pooled")  # where DecoupledGIN applies FC(2h, h): see the module docstring
PARTS = ("structure", "feature", "classifier", "convs", "all-but-classifier", "all")


@contextlib.contextmanager
def _seeded(seed: int | None, name: str):
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        state = np.random.SeedSequence([int(seed), zlib.crc32(name.encode())]).generate_state(1)[0]
        seed_torch(int(state))
        yield


def _gin(d_in: int, hidden: int):
    from torch_geometric.nn import GINConv

    return GINConv(
        nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden)), eps=0.0, train_eps=False
    )


def adjacency(data) -> torch.Tensor:
    """The batch's transposed adjacency (row = target node, column = source) as a ``torch.sparse_csr`` tensor;
    what the convolutions aggregate over (see the module docstring). An adjacency passed in already (a sparse
    ``edge_index``) is returned as it is."""
    edge_index = data.edge_index
    if edge_index.layout != torch.strided:
        return edge_index
    from torch_geometric.utils import to_torch_csr_tensor

    n = data.num_nodes
    with warnings.catch_warnings():  # torch's notes on its sparse tensors ("in beta state", "invariant checks")
        warnings.filterwarnings("ignore", "Sparse (CSR tensor support|invariant checks)", UserWarning)
        return to_torch_csr_tensor(edge_index.flip(0), size=(n, n))


def _check(hidden: int, layers: int, dropout: float, **dims: int) -> None:
    for key, value in {"hidden": hidden, "layers": layers, **dims}.items():
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{key} must be an integer >= 1, got {value!r}")
    if not 0.0 <= dropout < 1.0:
        raise ConfigError(f"dropout must be in [0, 1), got {dropout}")


def _shared_gcn_norm(convs, edge_index: torch.Tensor, x: torch.Tensor):
    """The normalised adjacency every one of ``convs`` (PyG ``GCNConv``) would compute from ``edge_index`` for
    features like ``x``, computed once (``gcn_norm``: self-loops, degrees, ``D^-1/2 A D^-1/2``), or None when the
    convolutions would not all compute the same one (a cached or non-normalising layer, other options, hooks on
    a layer): the caller then calls each layer as before. FedStar's structure encoder runs three identically
    built GCN layers over the same batch, and each normalised it again: ~8 % of a FedStar client's train
    message on NCI1. The layers then get exactly the values they would have computed themselves."""
    from torch_geometric.nn import GCNConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    first = convs[0]
    options = (first.improved, first.add_self_loops, first.flow, first.node_dim)
    for conv in convs:
        if (
            type(conv) is not GCNConv
            or not conv.normalize
            or conv.cached
            or (conv.improved, conv.add_self_loops, conv.flow, conv.node_dim) != options
            or conv._forward_hooks
            or conv._forward_pre_hooks
            or conv._backward_hooks
            or conv._backward_pre_hooks
        ):
            return None
    module = nn.modules.module
    if (
        module._global_forward_hooks
        or module._global_forward_pre_hooks
        or module._global_backward_hooks
        or module._global_backward_pre_hooks
    ):
        return None
    return gcn_norm(edge_index, None, x.size(first.node_dim), first.improved, first.add_self_loops, first.flow, x.dtype)


def _gcn_normalised(conv, x: torch.Tensor, normalised) -> torch.Tensor:
    """``conv(x, edge_index)`` (PyG ``GCNConv.forward``) given the normalised adjacency it would have computed
    (:func:`_shared_gcn_norm`)."""
    edge_index, edge_weight = normalised
    out = conv.propagate(edge_index, x=conv.lin(x), edge_weight=edge_weight)
    if conv.bias is not None:
        out = out + conv.bias
    return out


class DecoupledGIN(nn.Module):
    """FedStar's model (see the module docstring). ``forward(batch)`` needs ``x``, ``s``, ``edge_index``, ``batch``."""

    part_prefixes = {
        "structure": ("struct_in", "struct_convs"),
        "feature": ("feat_in", "feat_convs"),
        "classifier": ("pool_fc", "fc", "out"),
        "convs": ("feat_convs", "struct_convs"),
    }

    def __init__(
        self,
        num_features: int,
        structure_dim: int,
        num_classes: int,
        hidden: int = 64,
        layers: int = 3,
        dropout: float = 0.5,
        seed: int | None = None,
        pool_order: str = "per-node",
    ):
        super().__init__()
        from torch_geometric.nn import GCNConv

        _check(hidden, layers, dropout, num_features=num_features, structure_dim=structure_dim, num_classes=num_classes)
        if pool_order not in POOL_ORDERS:
            raise ConfigError(f"unknown pool_order {pool_order!r}; valid choices: {', '.join(POOL_ORDERS)}")
        self.dropout = dropout
        self.pool_order = pool_order
        with _seeded(seed, "feat_in"):
            self.feat_in = nn.Linear(num_features, hidden)
        with _seeded(seed, "struct_in"):
            self.struct_in = nn.Linear(structure_dim, hidden)
        self.feat_convs, self.struct_convs = nn.ModuleList(), nn.ModuleList()
        for i in range(layers):
            with _seeded(seed, f"feat_convs.{i}"):
                self.feat_convs.append(_gin(2 * hidden, hidden))
            with _seeded(seed, f"struct_convs.{i}"):
                self.struct_convs.append(GCNConv(hidden, hidden))
        with _seeded(seed, "pool_fc"):
            self.pool_fc = nn.Linear(2 * hidden, hidden)
        with _seeded(seed, "fc"):
            self.fc = nn.Linear(hidden, hidden)
        with _seeded(seed, "out"):
            self.out = nn.Linear(hidden, num_classes)

    def forward(self, data) -> torch.Tensor:
        from torch_geometric.nn import global_add_pool

        edge_index = adjacency(data)
        h, g = self.feat_in(data.x), self.struct_in(data.s)
        normalised = _shared_gcn_norm(self.struct_convs, edge_index, g)
        for gin, gcn in zip(self.feat_convs, self.struct_convs):
            h = F.dropout(F.relu(gin(torch.cat([h, g], dim=-1), edge_index)), self.dropout, self.training)
            g = torch.tanh(gcn(g, edge_index) if normalised is None else _gcn_normalised(gcn, g, normalised))
        if self.pool_order == "per-node":
            z = global_add_pool(self.pool_fc(torch.cat([h, g], dim=-1)), data.batch)
        else:
            z = self.pool_fc(global_add_pool(torch.cat([h, g], dim=-1), data.batch))
        z = F.dropout(F.relu(self.fc(z)), self.dropout, self.training)
        return F.log_softmax(self.out(z), dim=-1)


class GIN(nn.Module):
    """The baselines' GIN (see the module docstring); ``forward(batch)`` uses ``x``, ``edge_index``, ``batch``."""

    part_prefixes = {"feature": ("feat_in", "feat_convs"), "classifier": ("fc", "out"), "convs": ("feat_convs",)}

    def __init__(
        self,
        num_features: int,
        num_classes: int,
        hidden: int = 64,
        layers: int = 3,
        dropout: float = 0.5,
        seed: int | None = None,
    ):
        super().__init__()
        _check(hidden, layers, dropout, num_features=num_features, num_classes=num_classes)
        self.dropout = dropout
        with _seeded(seed, "feat_in"):
            self.feat_in = nn.Linear(num_features, hidden)
        self.feat_convs = nn.ModuleList()
        for i in range(layers):
            with _seeded(seed, f"feat_convs.{i}"):
                self.feat_convs.append(_gin(hidden, hidden))
        with _seeded(seed, "fc"):
            self.fc = nn.Linear(hidden, hidden)
        with _seeded(seed, "out"):
            self.out = nn.Linear(hidden, num_classes)

    def forward(self, data) -> torch.Tensor:
        from torch_geometric.nn import global_add_pool

        h = self.feat_in(data.x)
        edge_index = adjacency(data)
        for gin in self.feat_convs:
            h = F.dropout(F.relu(gin(h, edge_index)), self.dropout, self.training)
        z = F.dropout(F.relu(self.fc(global_add_pool(h, data.batch))), self.dropout, self.training)
        return F.log_softmax(self.out(z), dim=-1)


def build_graph_model(
    kind: str,
    num_features: int,
    num_classes: int,
    structure_dim: int = 32,
    hidden: int = 64,
    layers: int = 3,
    dropout: float = 0.5,
    seed: int | None = None,
    pool_order: str = "per-node",
) -> nn.Module:
    """``decoupled`` (FedStar, uses ``structure_dim`` and ``pool_order``) or ``gin`` (baselines, ignore them)."""
    if kind == "decoupled":
        return DecoupledGIN(num_features, structure_dim, num_classes, hidden, layers, dropout, seed, pool_order)
    if kind == "gin":
        return GIN(num_features, num_classes, hidden, layers, dropout, seed)
    raise ConfigError(f"unknown graph model {kind!r}; valid choices: {', '.join(MODELS)}")


def part_keys(model: nn.Module, part: str) -> list[str]:
    """The ``state_dict`` keys of a part, in ``state_dict`` order (see the module docstring)."""
    prefixes = getattr(model, "part_prefixes", None)
    if prefixes is None:
        raise ConfigError(f"{type(model).__name__} has no named parts; use DecoupledGIN or GIN")
    valid = [p for p in PARTS if p in prefixes or p in ("all", "all-but-classifier")]
    if part not in valid:
        raise ConfigError(f"unknown part {part!r} for {type(model).__name__}; valid choices: {', '.join(valid)}")
    keys = list(model.state_dict().keys())
    if part == "all":
        return keys
    if part == "all-but-classifier":
        drop = prefixes["classifier"]
        return [k for k in keys if k.split(".")[0] not in drop]
    return [k for k in keys if k.split(".")[0] in prefixes[part]]


def get_arrays(model: nn.Module, part: str = "all") -> list[np.ndarray]:
    """Copies of the part's tensors as numpy arrays, in ``state_dict`` order."""
    state = model.state_dict()
    return [state[k].detach().cpu().numpy().copy() for k in part_keys(model, part)]


def set_arrays(model: nn.Module, part: str, arrays: list[np.ndarray]) -> None:
    """Copy ``arrays`` (as from :func:`get_arrays` for the same part) into the model's own parameters/buffers.

    Goes through ``load_state_dict(strict=False)``, which copies in place into the live tensors (rebinding
    ``.data`` on a ``state_dict()`` copy would change nothing). A wrong count, shape or non-finite value is a
    ConfigError naming the key.
    """
    keys = part_keys(model, part)
    arrays = list(arrays)
    if len(arrays) != len(keys):
        raise ConfigError(
            f"part {part!r} of {type(model).__name__} has {len(keys)} arrays ({', '.join(keys)}), got {len(arrays)}"
        )
    state = model.state_dict()
    new = {}
    for key, arr in zip(keys, arrays):
        arr = np.asarray(arr)
        ref = state[key]
        if tuple(arr.shape) != tuple(ref.shape):
            raise ConfigError(f"array for {key!r} has shape {tuple(arr.shape)}, expected {tuple(ref.shape)}")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise ConfigError(f"array for {key!r} contains NaN or infinite values")
        new[key] = torch.from_numpy(np.ascontiguousarray(arr)).to(ref.dtype)
    result = model.load_state_dict(new, strict=False)
    if result.unexpected_keys:  # cannot happen for keys taken from the model itself
        raise ConfigError(f"unexpected keys {result.unexpected_keys}")
