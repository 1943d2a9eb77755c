"""FedGraph's GCN with cross-client graph convolution (paper eq. 2-4), on a layered sample (Flower-free).

The model is the project's ``NodeClassifier("gcn")`` (same parameters, same state-dict names, so the global
model travels like every other method's): K graph convolutions (K = L - 1; the paper's "3-layer GCN, an input
layer and two convolutional layers" is K = 2), ReLU and dropout after every hidden convolution, log-softmax out.
Convolution k of client i computes, for v in layer k+1 of its sample,

    z^(k+1)(v) = sum_{u own}    Q~^(k)(v, u) h^(k)(u) W^(k)
               + sum_{u remote} Q~^(k)(v, u) [h^(k)_j(u) W^(k)_j]   (sharing convolutions only, eq. 3)
               + b^(k)
    h^(k+1)(v) = dropout(relu(z^(k+1)(v)))                       (eq. 4; the last one: log_softmax(z))

where the bracket is a row received from u's owner j (:func:`owner_rows`), a constant for client i (no gradient
flows back to j). ``h^(0) = x``. The non-sharing convolutions use the cut adjacency (eq. 2).

Owner side: :func:`owner_rows` computes ``h^(k)(u) W^(k)`` for its boundary nodes with its current model,
exactly (every neighbour, no dropout), from the received rows of the sharing convolutions below k.
:func:`exchange_in_process` runs the whole same-round exchange for a list of clients (what the server relays),
for tests and centralised checks.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError
from ....tasks.models import build_node_model
from ....tasks.training import evaluate_masks
from .graph import ClientView, Rows, boundary_nodes, exchange_convs, export_plan, relay, shared_convs, split_rows
from .sampling import LayeredSample, exact_sample

Tables = Mapping[int, torch.Tensor]  # convolution index -> received rows aligned with view.remote_ids


def build_model(
    in_dim: int, num_classes: int, hidden: int = 16, num_convs: int = 2, dropout: float = 0.5, seed: int | None = None
) -> nn.Module:
    """The paper's GCN (16 hidden units, dropout 0.5, K = 2 convolutions by default)."""
    return build_node_model("gcn", in_dim, num_classes, hidden=hidden, layers=num_convs, dropout=dropout, seed=seed)


def check_model(model: nn.Module) -> int:
    """The number of convolutions of a GCN ``NodeClassifier``; ConfigError otherwise."""
    convs = getattr(model, "convs", None)
    if getattr(model, "kind", None) != "gcn" or convs is None or len(convs) < 1:
        raise ConfigError(
            f"FedGraph trains a GCN NodeClassifier (model=gcn); got model kind "
            f"{getattr(model, 'kind', type(model).__name__)!r}"
        )
    return len(convs)


def _propagate(
    model: nn.Module, view: ClientView, sample: LayeredSample, tables: Tables | None, upto: int, training: bool
) -> torch.Tensor:
    """Run convolutions 0..upto-1 of ``sample``; returns h^(upto) for ``sample.nodes[upto]`` (post-activation)
    or, when ``upto`` is the last convolution count, the logits z^(K)."""
    convs: Any = model.convs
    dropout = float(getattr(model, "dropout_p", 0.0))  # the node models expose p (tasks/models.py)
    input_dropout = float(getattr(model, "input_dropout", 0.0))
    h = view.graph.x[sample.nodes[0]]
    if input_dropout > 0:
        h = F.dropout(h, input_dropout, training)
    for k in range(upto):
        conv = convs[k]
        hw = conv.lin(h)
        if sample.remote[k].numel():
            table = None if tables is None else tables.get(k)
            if table is None:
                raise KeyError(
                    f"convolution {k} aggregates {sample.remote[k].numel()} remote neighbours but no "
                    f"received rows were given for it (tables has {sorted(tables or {})})"
                )
            if table.size(1) != hw.size(1):
                raise ValueError(
                    f"received rows for convolution {k} have width {table.size(1)}, the model's "
                    f"h W there has {hw.size(1)}"
                )
            hw = torch.cat([hw, table[sample.remote[k]].to(hw.dtype)])
        edges = sample.convs[k]
        z = torch.zeros((sample.nodes[k + 1].numel(), hw.size(1)), dtype=hw.dtype)
        z = z.index_add(0, edges.dst, hw[edges.src] * edges.weight[:, None])
        if conv.bias is not None:
            z = z + conv.bias
        if k < len(convs) - 1:
            h = F.dropout(F.relu(z), dropout, training)
        else:
            h = z
    return h


def forward(model: nn.Module, view: ClientView, sample: LayeredSample, tables: Tables | None = None) -> torch.Tensor:
    """Log-probabilities for ``sample.batch`` (dropout when ``model.training``)."""
    num_convs = check_model(model)
    if sample.num_convs != num_convs:
        raise ConfigError(f"the sample has {sample.num_convs} convolutions, the model {num_convs}")
    return F.log_softmax(_propagate(model, view, sample, tables, num_convs, model.training), dim=-1)


def forward_macs(model: nn.Module, sample: LayeredSample) -> int:
    """Multiply-adds of one :func:`forward` of ``sample`` (the work a round's compute grows with; deterministic):
    per convolution k, the own nodes of layer k times ``in_k x out_k`` (``h W``; received remote rows cost
    nothing) plus one ``out_k``-wide multiply-add per sampled edge (the aggregation). Bias, activations, dropout
    and the backward pass (about twice the forward) are left out: they scale with the same counts."""
    convs: Any = model.convs
    if sample.num_convs != len(convs):
        raise ConfigError(f"the sample has {sample.num_convs} convolutions, the model {len(convs)}")
    total = 0
    for k, conv in enumerate(convs):
        fan_in, fan_out = int(conv.lin.in_channels), int(conv.lin.out_channels)
        total += int(sample.nodes[k].numel()) * fan_in * fan_out + sample.convs[k].num_edges * fan_out
    return total


def backward_macs(model: nn.Module, sample: LayeredSample) -> int:
    """Multiply-adds of the backward pass of one :func:`forward` of ``sample``, counted as :func:`forward_macs`
    counts: per convolution k the weight gradient ``h^T dZ`` (``in_k x out_k`` per own node of layer k), the input
    gradient ``dZ W^T`` for k >= 1 (the first convolution's input is the features, which need none), and one
    ``out_k``-wide multiply-add per sampled edge (the aggregation's gradient; received remote rows are constants
    and get none). Elementwise work (ReLU, dropout, the loss) is left out, as in the forward count."""
    convs: Any = model.convs
    if sample.num_convs != len(convs):
        raise ConfigError(f"the sample has {sample.num_convs} convolutions, the model {len(convs)}")
    total = 0
    for k, conv in enumerate(convs):
        fan_in, fan_out = int(conv.lin.in_channels), int(conv.lin.out_channels)
        dense = int(sample.nodes[k].numel()) * fan_in * fan_out
        total += dense * (1 if k == 0 else 2) + sample.convs[k].num_edges * fan_out
    return total


def train_macs(model: nn.Module, sample: LayeredSample) -> int:
    """Multiply-adds of one training iteration on ``sample``: :func:`forward_macs` + :func:`backward_macs` (the
    work the parallel clock charges a client for its local training)."""
    return forward_macs(model, sample) + backward_macs(model, sample)


def full_forward(model: nn.Module, view: ClientView, sharing: str, tables: Tables | None = None) -> torch.Tensor:
    """Log-probabilities for every own node, every neighbour (Q~ = Q)."""
    shared = shared_convs(sharing, check_model(model))
    return forward(model, view, exact_sample(view, torch.arange(view.num_own), shared), tables)


@torch.no_grad()
def owner_rows(
    model: nn.Module,
    view: ClientView,
    sharing: str,
    conv: int,
    tables: Tables | None = None,
    ids: np.ndarray | None = None,
) -> Rows:
    """Owner side: ``h^(conv)(u) W^(conv)`` (float32, no bias) for every boundary node u (or for the boundary
    nodes of global ids ``ids`` only: what requesters asked for in one iteration), ids sorted.

    Computed exactly with the current model and without dropout; ``tables`` must hold the received rows of the
    sharing convolutions below ``conv``. Split per requester with :func:`~.graph.split_rows` and
    :func:`~.graph.export_plan`. ``conv`` must be a sharing convolution (ConfigError names the valid ones): for
    sharing ``fedgraph`` never 0, so raw features and layer-1 inputs never leave the client.
    """
    return owner_rows_and_macs(model, view, sharing, conv, tables, ids)[0]


@torch.no_grad()
def owner_rows_and_macs(
    model: nn.Module,
    view: ClientView,
    sharing: str,
    conv: int,
    tables: Tables | None = None,
    ids: np.ndarray | None = None,
) -> tuple[Rows, int]:
    """:func:`owner_rows` and the multiply-adds it took (the forward of convolutions below ``conv`` over the
    nodes' exact neighbourhoods, counted as :func:`forward_macs` counts, plus ``h W^(conv)`` of the nodes)."""
    num_convs = check_model(model)
    valid = exchange_convs(sharing, num_convs)
    if conv not in valid:
        raise ConfigError(
            f"conv={conv!r}: with sharing {sharing!r} and {num_convs} convolutions owners send rows "
            f"for convolutions {list(valid)} only"
        )
    boundary = boundary_nodes(view.graph)
    if ids is not None:
        ids = np.asarray(ids, dtype=np.int64)
        known = view.graph.global_ids[boundary].numpy()
        pos = np.searchsorted(known, ids)
        found = pos < len(known)
        found[found] = known[pos[found]] == ids[found]
        if not found.all() or (len(ids) and not np.all(np.diff(ids) > 0)):
            raise KeyError(
                f"client {view.graph.client_id}: rows asked for ids that are not its boundary nodes or not "
                f"sorted and unique (e.g. {ids[~found][:5].tolist()})"
            )
        boundary = boundary[torch.from_numpy(pos)]
    convs: Any = model.convs
    if boundary.numel() == 0:
        width = int(convs[conv].lin.out_channels)
        return Rows(ids=np.zeros(0, np.int64), values=np.zeros((0, width), np.float32)), 0
    macs = 0
    if conv == 0:
        h = view.graph.x[boundary]
    else:
        shared = shared_convs(sharing, num_convs)[:conv]
        sample = exact_sample(view, boundary, shared)
        h = _propagate(model, view, sample, tables, conv, training=False)
        # exact_sample sorts its targets by local index; boundary is in global-id order.
        h = h[torch.searchsorted(sample.batch, boundary)]
        for k in range(conv):
            lin = convs[k].lin
            macs += int(sample.nodes[k].numel()) * int(lin.in_channels) * int(lin.out_channels)
            macs += sample.convs[k].num_edges * int(lin.out_channels)
    values = convs[conv].lin(h)
    macs += int(boundary.numel()) * int(convs[conv].lin.in_channels) * int(convs[conv].lin.out_channels)
    rows = Rows(
        ids=view.graph.global_ids[boundary].numpy().astype(np.int64), values=values.detach().to(torch.float32).numpy()
    )
    return rows, macs


def exchange_in_process(
    models: Sequence[nn.Module], views: Sequence[ClientView], sharing: str, allow_missing: bool = False
) -> list[dict[int, torch.Tensor]]:
    """The same-round exchange for every client, done in one process: for each sharing convolution in order,
    every owner computes its rows with its own model (:func:`owner_rows`), splits them per requester, the
    server relays them, every receiver aligns what it got. Returns each client's tables."""
    if len(models) != len(views):
        raise ValueError(f"{len(models)} models for {len(views)} views")
    num_convs = check_model(models[0])
    tables: list[dict[int, torch.Tensor]] = [{} for _ in views]
    for conv in exchange_convs(sharing, num_convs):
        uploads = {
            v.graph.client_id: split_rows(owner_rows(m, v, sharing, conv, t), export_plan(v.graph))
            for m, v, t in zip(models, views, tables)
        }
        inbox = relay(uploads)
        convs: Any = models[0].convs
        width = int(convs[conv].lin.out_channels)
        for view, table in zip(views, tables):
            got = inbox.get(view.graph.client_id, Rows(np.zeros(0, np.int64), np.zeros((0, width), np.float32)))
            table[conv] = view.remote_table(got, allow_missing=allow_missing, width=width)
    return tables


@torch.no_grad()
def evaluate(
    model: nn.Module,
    view: ClientView,
    sharing: str,
    tables: Tables | None = None,
    masks: Mapping[str, torch.Tensor] | None = None,
) -> dict:
    """Loss/accuracy/count per mask (default train/val/test) from one exact eval-mode forward pass."""
    g = view.graph
    masks = masks if masks is not None else {"train": g.train_mask, "val": g.val_mask, "test": g.test_mask}
    was_training = model.training
    try:
        return evaluate_masks(model, lambda: full_forward(model, view, sharing, tables), g.y, dict(masks))
    finally:
        model.train(was_training)
