"""Node classifiers (GCN, GraphSAGE, GAT) and the model <-> list-of-arrays conversion used on the wire."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError

MODELS = ("gcn", "sage", "gat")


class NodeClassifier(nn.Module):
    """``layers`` graph convolutions with ReLU and dropout between them; log-softmax output.

    Dropout is applied after every hidden layer. ``input_dropout`` (default 0, as in the FedGCN reference
    code) also drops input features, as Kipf & Welling (2017) do; on CPU it is the most expensive part of a
    step on bag-of-words features (Cora: 50 of 60 ms), so it is opt-in.
    GAT uses ``heads`` attention heads (concatenated) in hidden layers and one head in the output layer.
    ``cached`` (GCN) keeps the normalised adjacency of the first graph seen: only for a model bound to one graph.
    """

    def __init__(self, kind: str, in_dim: int, hidden: int, out_dim: int, layers: int = 2,
                 dropout: float = 0.5, heads: int = 8, input_dropout: float = 0.0, cached: bool = False):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv, SAGEConv

        if kind not in MODELS:
            raise ConfigError(f"unknown model {kind!r}; valid choices: {', '.join(MODELS)}")
        if layers < 1:
            raise ConfigError(f"layers must be >= 1, got {layers}")
        if hidden < 1:
            raise ConfigError(f"hidden must be >= 1, got {hidden}")
        for key, value in (("dropout", dropout), ("input-dropout", input_dropout)):
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{key} must be in [0, 1), got {value}")
        self.kind, self.dropout, self.input_dropout = kind, dropout, input_dropout
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList()
        for i in range(layers):
            last = i == layers - 1
            if kind == "gcn":
                conv = GCNConv(dims[i], dims[i + 1], cached=cached)
            elif kind == "sage":
                conv = SAGEConv(dims[i], dims[i + 1], aggr="mean")
            else:
                d_in = dims[i] if i == 0 else dims[i] * heads
                conv = GATConv(d_in, dims[i + 1], heads=1 if last else heads, concat=not last,
                               dropout=dropout)
            self.convs.append(conv)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.input_dropout > 0:
            x = F.dropout(x, self.input_dropout, self.training)
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.elu(x) if self.kind == "gat" else F.relu(x)
                x = F.dropout(x, self.dropout, self.training)
        return F.log_softmax(x, dim=-1)


def build_node_model(kind: str, in_dim: int, num_classes: int, hidden: int = 16, layers: int = 2,
                     dropout: float = 0.5, heads: int = 8, input_dropout: float = 0.0,
                     seed: int | None = None, cached: bool = False) -> NodeClassifier:
    """Build a node classifier; with ``seed`` its initial weights are a pure function of the seed."""
    args = (kind, in_dim, hidden, num_classes, layers, dropout, heads, input_dropout, cached)
    if seed is None:
        return NodeClassifier(*args)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return NodeClassifier(*args)


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
