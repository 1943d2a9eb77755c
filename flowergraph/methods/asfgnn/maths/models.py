"""ASFGNN's two networks: the private SGNN (GraphSAGE message passing) and the federated FGNN (discriminator).

SGNN, client i (paper Algorithm 1; Eq. 1)::

    h_v,0 = x_v W_0                                                   (line 2: a projection, no bias)
    h_N(v),k = mean({h_u,k-1 : u in N(v)})                           (line 8: the mean aggregator)
    h_v,k = sigma(W_k . CONCAT(h_v,k-1, h_N(v),k))      k = 1..K      (line 10)
    H_v = h_v,K / ||h_v,K||_2                                         (line 12)

``W_k . CONCAT(a, b)`` is PyG's ``SAGEConv(aggr="mean", root_weight=True)``: ``lin_r(a) + lin_l(b)`` (lin_l
carries the layer's bias). sigma is tanh (section 5.1.4). Dropout (rate d) acts on the input features and on the
input of every SAGE layer while training.

FGNN, the discriminator (Algorithm 2, line 8; L = 2 fully connected layers, tanh, section 5.1.4)::

    y_hat = softmax(W2 . dropout(tanh(W1 H_v + b1)) + b2)

Its input and hidden widths are the hidden size l, shared by all clients (the embeddings must align, section
5.1.4); its output width is the number of classes J of the whole dataset, the same for every client.

Both sit in one :class:`SFGNN` module: state-dict keys starting with ``sgnn.`` are private (they never leave the
client), keys starting with ``fgnn.`` are the discriminator's, the only arrays a client shares in SFGNN
(:func:`fgnn_arrays`, :func:`load_fgnn_arrays`). FL (FedAvg of the whole network) shares all of them.

Regulariser (Eq. 4, :func:`l2_penalty`): ``l2 * (sum_k ||W_k||^2 / 2 + sum_l ||W_l||^2 / 2)`` over the weight
matrices of both networks (not the biases). The paper writes ``||W||_2``; we read it as TensorFlow's
``l2_loss`` (half the squared Frobenius norm), the weight decay of the GCN code the paper follows [35], since a
plain norm is not differentiable at 0 and is not what "L2 regularisation" means in that code.

The input features may be dense or sparse CSR (:attr:`~.data.ClientData.x_input`: Cora's and CiteSeer's
bag-of-words rows are ~1 % non-zero, and the projection ``x W_0`` dominates a dense step); with CSR input the
input dropout draws over the stored entries only (same distribution, other random numbers than the dense path).

Dropout takes an optional ``torch.Generator`` so a training step is a pure function of (weights, data,
generator state): the reference loops and the Flower clients derive one generator per (seed, client, round) and
get the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError
from ....tasks.torch_state import load_module_arrays, module_arrays

DEPTHS = (1, 2, 3, 4, 5)
HIDDEN_SIZES = (64, 128, 256, 512)
ACTIVATIONS = ("tanh", "relu")
SGNN_PREFIX = "sgnn."
FGNN_PREFIX = "fgnn."


def _activation(name: str):
    if name == "tanh":
        return torch.tanh
    if name == "relu":
        return F.relu
    raise ConfigError(f"activation {name!r} is not supported; valid choices: {', '.join(ACTIVATIONS)}")


def dropout(x: torch.Tensor, p: float, training: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """Inverted dropout whose mask is drawn from ``generator`` (the global generator when None)."""
    if not training or p <= 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    keep = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device) >= p
    return x * keep / (1.0 - p)


def sparse_csr(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a sparse CSR tensor (torch flags CSR as beta; the warning is silenced here)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return x.to_sparse_csr()


def _project(
    x: torch.Tensor, weight: torch.Tensor, p: float, training: bool, generator: torch.Generator | None
) -> torch.Tensor:
    """``dropout(x) @ weight.T`` for dense or sparse-CSR ``x``. For CSR, dropout draws only over the stored
    entries (dropping a zero changes nothing), which is the same distribution at ~1/80 of the cost on Cora."""
    if x.layout != torch.sparse_csr:
        return dropout(x, p, training, generator) @ weight.t()
    if training and p > 0.0:
        values = dropout(x.values(), p, training, generator)
        x = torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), values, x.shape, check_invariants=False)
    return x @ weight.t()


def check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or int(depth) not in DEPTHS:
        raise ConfigError(f"depth K {depth!r} is invalid; valid choices: {', '.join(map(str, DEPTHS))}")
    return int(depth)


def check_hidden(hidden: int, allowed: tuple[int, ...] | None = None) -> int:
    if isinstance(hidden, bool) or not isinstance(hidden, (int, np.integer)) or int(hidden) < 1:
        raise ConfigError(
            f"hidden size {hidden!r} is invalid; it must be a positive integer"
            + (f" in {', '.join(map(str, allowed))}" if allowed else "")
        )
    if allowed is not None and int(hidden) not in allowed:
        raise ConfigError(f"hidden size {hidden!r} is invalid; valid choices: {', '.join(map(str, allowed))}")
    return int(hidden)


def check_dropout(p: float) -> float:
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"dropout {p!r} is outside the valid range [0, 1)")
    return p


class SGNN(nn.Module):
    """The private part: ``x -> W_0 -> K x (SAGE mean layer, tanh) -> L2 normalisation`` (Algorithm 1)."""

    def __init__(self, in_dim: int, hidden: int, depth: int, dropout: float = 0.0, activation: str = "tanh"):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        if int(in_dim) < 1:
            raise ConfigError(f"input dimension {in_dim!r} must be >= 1")
        self.depth = check_depth(depth)
        self.hidden = check_hidden(hidden)
        self.dropout = check_dropout(dropout)
        self.activation = activation
        self._act = _activation(activation)
        self.input = nn.Linear(int(in_dim), self.hidden, bias=False)  # W_0
        self.convs = nn.ModuleList(
            SAGEConv(self.hidden, self.hidden, aggr="mean", root_weight=True, normalize=False)
            for _ in range(self.depth)
        )

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Embeddings of every node; ``x`` dense or sparse CSR (:func:`sparse_csr`, much faster for
        bag-of-words features)."""
        h = _project(x, self.input.weight, self.dropout, self.training, generator)
        for conv in self.convs:
            h = self._act(conv(dropout(h, self.dropout, self.training, generator), edge_index))
        return F.normalize(h, p=2.0, dim=-1)


class FGNN(nn.Module):
    """The federated discriminator: ``Linear(l, l) -> tanh -> dropout -> Linear(l, J)`` (L = 2); returns logits."""

    def __init__(self, hidden: int, num_classes: int, dropout: float = 0.0, activation: str = "tanh"):
        super().__init__()
        if int(num_classes) < 2:
            raise ConfigError(f"num_classes {num_classes!r} must be >= 2")
        self.dropout = check_dropout(dropout)
        self._act = _activation(activation)
        self.lin1 = nn.Linear(check_hidden(hidden), int(hidden))
        self.lin2 = nn.Linear(int(hidden), int(num_classes))

    def forward(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        z = self._act(self.lin1(h))
        return self.lin2(dropout(z, self.dropout, self.training, generator))


class SFGNN(nn.Module):
    """SGNN + FGNN of one client. ``forward`` returns class logits for every node of the client's graph."""

    def __init__(
        self, in_dim: int, num_classes: int, hidden: int, depth: int, dropout: float = 0.0, activation: str = "tanh"
    ):
        super().__init__()
        self.sgnn = SGNN(in_dim, hidden, depth, dropout, activation)
        self.fgnn = FGNN(hidden, num_classes, dropout, activation)

    def embed(
        self, x: torch.Tensor, edge_index: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return self.sgnn(x, edge_index, generator)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return self.fgnn(self.sgnn(x, edge_index, generator), generator)

    def set_dropout(self, p: float) -> None:
        """Change the dropout rate of both parts (a new trial's hyper-parameter)."""
        self.sgnn.dropout = self.fgnn.dropout = check_dropout(p)


def build_model(
    in_dim: int,
    num_classes: int,
    hidden: int,
    depth: int,
    dropout: float = 0.0,
    seed: int = 0,
    activation: str = "tanh",
) -> SFGNN:
    """A freshly initialised :class:`SFGNN`, its weights a pure function of ``seed`` (the global torch
    generator is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return SFGNN(in_dim, num_classes, hidden, depth, dropout, activation)


def weight_matrices(model: nn.Module) -> list[torch.Tensor]:
    """The parameters the L2 term of Eq. 4 covers: every weight matrix (2-d parameter), no bias."""
    return [p for p in model.parameters() if p.dim() >= 2]


def l2_penalty(model: nn.Module, l2: float) -> torch.Tensor:
    """``l2 * sum_W ||W||_F^2 / 2`` over :func:`weight_matrices` (Eq. 4, read as TensorFlow's ``l2_loss``)."""
    total = sum((w.pow(2).sum() for w in weight_matrices(model)), torch.zeros(()))
    return float(l2) * 0.5 * total


def sgnn_keys(model: SFGNN) -> list[str]:
    """State-dict keys of the private SGNN (all start with ``sgnn.``)."""
    return [k for k in model.state_dict() if k.startswith(SGNN_PREFIX)]


def fgnn_keys(model: SFGNN) -> list[str]:
    """State-dict keys of the discriminator (all start with ``fgnn.``)."""
    return [k for k in model.state_dict() if k.startswith(FGNN_PREFIX)]


def fgnn_arrays(model: SFGNN) -> dict[str, np.ndarray]:
    """The discriminator's weights as named numpy copies: what an SFGNN client uploads (never an SGNN array)."""
    return module_arrays(model, fgnn_keys(model))


def sgnn_arrays(model: SFGNN) -> dict[str, np.ndarray]:
    """The private SGNN's weights as named numpy copies (for the client's own state, never for the server)."""
    return module_arrays(model, sgnn_keys(model))


def all_arrays(model: SFGNN) -> dict[str, np.ndarray]:
    """Every weight of the model (what an FL client shares)."""
    return module_arrays(model)


def load_fgnn_arrays(model: SFGNN, arrays: Mapping[str, np.ndarray]) -> None:
    """Copy a discriminator's arrays into ``model`` in place (optimizers over the model keep working).

    ``arrays`` must hold exactly the model's FGNN keys: ConfigError names an SGNN key (those never come from
    the server), a missing key or an unknown one; ValueError a shape that does not fit.
    """
    expected = fgnn_keys(model)
    private = sorted(k for k in arrays if k.startswith(SGNN_PREFIX))
    if private:
        raise ConfigError(
            f"arrays {private} belong to the private SGNN and cannot be loaded as the "
            f"discriminator; valid names: {', '.join(expected)}"
        )
    missing = sorted(set(expected) - set(arrays))
    unknown = sorted(set(arrays) - set(expected))
    if missing or unknown:
        raise ConfigError(
            f"discriminator arrays do not fit: missing {missing}, unknown {unknown}; valid names: {', '.join(expected)}"
        )
    load_module_arrays(model, arrays)


def load_all_arrays(model: SFGNN, arrays: Mapping[str, np.ndarray]) -> None:
    """Copy a whole model's arrays in place (FL); every key of the model must be present."""
    expected = list(model.state_dict())
    missing = sorted(set(expected) - set(arrays))
    unknown = sorted(set(arrays) - set(expected))
    if missing or unknown:
        raise ConfigError(f"model arrays do not fit: missing {missing}, unknown {unknown}")
    load_module_arrays(model, arrays)
