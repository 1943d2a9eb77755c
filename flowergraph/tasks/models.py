"""Node classifiers (PyG's GCN and GraphSAGE models, the original GAT) and the model <-> list-of-arrays conversion
used on the wire."""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .compute import seed_torch


MODELS = ("gcn", "sage", "gat")


class _Classifier:
    """What every node classifier adds to PyG's model: dropout on the input features (``input_dropout``, 0 by
    default as in the FedGCN reference code; Kipf & Welling use 0.5) and a log-softmax output. On CPU input dropout
    is the most expensive part of a step on bag-of-words features (Cora: 50 of 60 ms), so it is opt-in."""

    kind: str
    input_dropout: float

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.input_dropout > 0:
            x = F.dropout(x, self.input_dropout, self.training)
        return F.log_softmax(super().forward(x, edge_index), dim=-1)  # type: ignore[misc]

    @property
    def dropout_p(self) -> float:
        """The hidden layers' dropout probability."""
        return float(self.dropout.p)  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=None)
def _classifier(base: str, kind: str) -> type:
    """``base`` (a PyG model class name) with :class:`_Classifier` mixed in (one class per kind, made once)."""
    from torch_geometric.nn import models as pyg_models

    cls = type(f"{base}Classifier", (_Classifier, getattr(pyg_models, base)), {"kind": kind})
    cls.__doc__ = (
        f"PyG's ``{base}`` (``convs.*``: graph convolutions, ReLU and dropout between them) + "
        f"input dropout and a log-softmax output (:class:`_Classifier`)."
    )
    return cls


class GATClassifier(_Classifier, nn.Module):
    """GAT as Velickovic et al. (2018) define it: ``heads`` attention heads concatenated in hidden layers, ELU, one
    head in the output layer (PyG's ``GAT`` model averages ``heads`` heads there, so it is not used), dropout on
    the attention weights too."""

    kind = "gat"

    def __init__(
        self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float, heads: int, input_dropout: float
    ) -> None:
        super().__init__()
        from torch_geometric.nn import GATConv

        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            d_in = dims[i] if i == 0 else dims[i] * heads
            self.convs.append(GATConv(d_in, dims[i + 1], heads=1 if last else heads, concat=not last, dropout=dropout))
        self.dropout = nn.Dropout(dropout)
        self.input_dropout = input_dropout

    def _layers(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = self.dropout(F.elu(x))
        return x

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.input_dropout > 0:
            x = F.dropout(x, self.input_dropout, self.training)
        return F.log_softmax(self._layers(x, edge_index), dim=-1)


def check_model_args(
    kind: str, kinds: tuple[str, ...], *, hidden: int, layers: int, dropout: float, input_dropout: float = 0.0
) -> None:
    """The model keys every task shares (``kind`` among ``kinds``, ``hidden``, ``layers``, ``dropout``,
    ``input-dropout``); ValueError names a bad one and its valid range."""
    if kind not in kinds:
        raise ValueError(f"unknown model {kind!r}; valid choices: {', '.join(kinds)}")
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    if hidden < 1:
        raise ValueError(f"hidden must be >= 1, got {hidden}")
    for key, value in (("dropout", dropout), ("input-dropout", input_dropout)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{key} must be in [0, 1), got {value}")


def pyg_model(kind: str, cached: bool = False) -> tuple[str, dict]:
    """The PyG model class name (``torch_geometric.nn.models``) and its extra arguments for ``gcn`` (``GCN``,
    ``cached``) and ``sage`` (``GraphSAGE``, mean aggregation)."""
    return ("GCN", {"cached": cached}) if kind == "gcn" else ("GraphSAGE", {"aggr": "mean"})


def build_node_model(
    kind: str,
    in_dim: int,
    num_classes: int,
    hidden: int = 16,
    layers: int = 2,
    dropout: float = 0.5,
    heads: int = 8,
    input_dropout: float = 0.0,
    seed: int | None = None,
    cached: bool = False,
) -> nn.Module:
    """A node classifier (``kind`` in :data:`MODELS`): PyG's ``GCN`` or ``GraphSAGE`` (mean aggregation) model, or
    :class:`GATClassifier`, with ``layers`` graph convolutions and ``hidden`` units, ReLU (GAT: ELU) and dropout
    between them, input dropout and a log-softmax output. ``cached`` (GCN) keeps the normalised adjacency of the
    first graph seen: only for a model bound to one graph. With ``seed`` the initial weights are a pure function
    of the seed. ValueError names a bad argument."""
    check_model_args(kind, MODELS, hidden=hidden, layers=layers, dropout=dropout, input_dropout=input_dropout)

    def build() -> nn.Module:
        if kind == "gat":
            return GATClassifier(in_dim, hidden, num_classes, layers, dropout, heads, input_dropout)
        base, extra = pyg_model(kind, cached)
        model = _classifier(base, kind)(
            in_channels=in_dim,
            hidden_channels=hidden,
            num_layers=layers,
            out_channels=num_classes,
            dropout=dropout,
            **extra,
        )
        model.input_dropout = input_dropout
        return model

    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        seed_torch(seed)
        return build()


def get_weights(model: nn.Module) -> list[np.ndarray]:
    """The model's state as a list of arrays, in ``state_dict`` order (the wire format of model updates)."""
    return [t.detach().cpu().numpy().copy() for t in model.state_dict().values()]


def set_weights(model: nn.Module, arrays: list[np.ndarray]) -> None:
    """Load arrays produced by :func:`get_weights`; a wrong count or shape raises ValueError naming it."""
    state = model.state_dict()
    if len(arrays) != len(state):
        raise ValueError(f"expected {len(state)} arrays for the model ({', '.join(state)}), got {len(arrays)}")
    new_state = {}
    for (name, ref), arr in zip(state.items(), arrays):
        arr = np.asarray(arr)
        if tuple(arr.shape) != tuple(ref.shape):
            raise ValueError(f"array for {name!r} has shape {tuple(arr.shape)}, expected {tuple(ref.shape)}")
        new_state[name] = torch.from_numpy(np.ascontiguousarray(arr)).to(ref.dtype)
    model.load_state_dict(new_state, strict=True)
