"""One client's local work in one round: hyper-parameters, the loss of Eq. 4, training steps and evaluation.

A round (Algorithm 2, lines 7-11 for one client) with full-batch training::

    metrics  = evaluate(model)            # accuracy of the model as it enters the round (line 9's M_t^i)
    for e in 1..epochs:                   # the paper: one forward/backward pass per round (epochs = 1)
        logits = FGNN(SGNN(x, edges))     # all nodes; the loss uses the training nodes
        L = CE(logits[train], y[train]) + l2 * (sum_k ||W_k||^2/2 + sum_l ||W_l||^2/2)      (Eq. 4)
        W <- Adam step on L with learning rate lr      (SGNN and FGNN weights together, lines 10-11)

The paper writes the update as plain gradient descent (lines 10-11) but tunes lr in [5e-4, 1e-2], the range of
Adam in the GCN/GeniePath code it follows; we use Adam (no decoupled weight decay: the L2 term is in the loss).
The paper does not state the number of rounds T; :data:`DEFAULT_ROUNDS` = 200 is the epoch count of the GCN
paper [35] whose split it uses.

Metrics are accuracies on the client's training, validation and test nodes. The validation accuracy is the
client's metric ``M_i`` (the paper tunes on the validation set and reports test accuracy).

Determinism: dropout draws from a ``torch.Generator``; :func:`round_generator` derives one from
``(seed, client, round)``, so a round's numbers depend only on the weights entering it, the optimizer state and
those three integers (with one torch thread; set ``torch.set_num_threads(1)``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ....errors import ConfigError
from .data import ClientData
from .models import SFGNN, build_model, check_depth, check_dropout, check_hidden, l2_penalty

DEFAULT_ROUNDS = 200
DEFAULT_LOCAL_EPOCHS = 1
HYPERPARAMETER_NAMES = ("hidden", "depth", "dropout", "l2", "lr")


@dataclass(frozen=True)
class HyperParams:
    """One client's hyper-parameters (the hidden size must be the same for all clients of a federation)."""

    hidden: int = 256
    depth: int = 2
    dropout: float = 0.5
    l2: float = 5e-3
    lr: float = 0.01

    def __post_init__(self) -> None:
        check_hidden(self.hidden)
        check_depth(self.depth)
        check_dropout(self.dropout)
        for name in ("l2", "lr"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float, np.floating, np.integer))
                or not math.isfinite(float(value))
            ):
                raise ConfigError(f"{name} {value!r} is not a finite number")
        if float(self.l2) < 0:
            raise ConfigError(f"l2 {self.l2!r} is invalid; it must be >= 0")
        if float(self.lr) <= 0:
            raise ConfigError(f"lr {self.lr!r} is invalid; it must be > 0")

    def to_dict(self) -> dict[str, Any]:
        return {
            "hidden": int(self.hidden),
            "depth": int(self.depth),
            "dropout": float(self.dropout),
            "l2": float(self.l2),
            "lr": float(self.lr),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> HyperParams:
        unknown = sorted(set(values) - set(HYPERPARAMETER_NAMES))
        if unknown:
            raise ConfigError(f"unknown hyper-parameters {unknown}; valid names: {', '.join(HYPERPARAMETER_NAMES)}")
        return cls(**dict(values))


@dataclass(frozen=True)
class Metrics:
    train_acc: float
    val_acc: float
    test_acc: float


@dataclass(frozen=True)
class RoundResult:
    """What one client's round produced: the mean training loss of its steps and the entry metrics."""

    train_loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    num_train: int
    num_val: int
    num_test: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across processes and platforms)."""
    words = [int(p) % (1 << 32) for p in parts]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0]) >> 1


def round_generator(seed: int, client: int, round_: int) -> torch.Generator:
    """The dropout generator of ``client`` in round ``round_`` of a run seeded ``seed``."""
    return torch.Generator().manual_seed(derive_seed(seed, 0xD409, client, round_))


def make_model(data: ClientData, hp: HyperParams, seed: int) -> SFGNN:
    """An initialised SGNN + FGNN for ``data`` (input width, J classes) with ``hp``'s sizes and dropout."""
    return build_model(data.num_features, data.num_classes, hp.hidden, hp.depth, hp.dropout, seed=seed)


def make_optimizer(model: SFGNN, hp: HyperParams) -> torch.optim.Adam:
    """Adam over both networks with the client's learning rate (the L2 term is in the loss, not here)."""
    return torch.optim.Adam(model.parameters(), lr=float(hp.lr))


def loss_fn(model: SFGNN, data: ClientData, hp: HyperParams, generator: torch.Generator | None = None) -> torch.Tensor:
    """Eq. 4: mean cross-entropy over the training nodes plus the L2 term over all weight matrices."""
    if data.num_train == 0:
        raise ConfigError(f"client {data.client} has no training nodes: it cannot train")
    logits = model(data.x_input, data.edge_index, generator)
    return F.cross_entropy(logits[data.train_mask], data.y[data.train_mask]) + l2_penalty(model, hp.l2)


def train_steps(
    model: SFGNN,
    optimizer: torch.optim.Optimizer,
    data: ClientData,
    hp: HyperParams,
    steps: int = DEFAULT_LOCAL_EPOCHS,
    generator: torch.Generator | None = None,
) -> float:
    """``steps`` full-batch Adam steps on Eq. 4; returns the mean loss (each measured before its step)."""
    if int(steps) < 1:
        raise ConfigError(f"local epochs {steps!r} must be >= 1")
    model.train()
    model.set_dropout(hp.dropout)
    total = 0.0
    for _ in range(int(steps)):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, data, hp, generator)
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return total / int(steps)


def _accuracy(pred: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    n = int(mask.sum())
    return float((pred[mask] == y[mask]).sum()) / n if n else float("nan")


@torch.no_grad()
def predict(model: SFGNN, data: ClientData) -> torch.Tensor:
    """Predicted class of every node (no dropout)."""
    model.eval()
    return model(data.x_input, data.edge_index).argmax(dim=-1)


@torch.no_grad()
def evaluate(model: SFGNN, data: ClientData) -> Metrics:
    """Accuracy on the training, validation and test nodes (NaN for an empty set)."""
    pred = predict(model, data)
    return Metrics(
        _accuracy(pred, data.y, data.train_mask),
        _accuracy(pred, data.y, data.val_mask),
        _accuracy(pred, data.y, data.test_mask),
    )


def local_round(
    model: SFGNN,
    optimizer: torch.optim.Optimizer,
    data: ClientData,
    hp: HyperParams,
    *,
    epochs: int = DEFAULT_LOCAL_EPOCHS,
    generator: torch.Generator | None = None,
) -> RoundResult:
    """One client's round: evaluate the model as it enters (Algorithm 2, line 9), then ``epochs`` training
    steps (lines 10-11). The caller uploads what it must afterwards (FGNN arrays, label counts, ``val_acc``)."""
    metrics = evaluate(model, data)
    loss = train_steps(model, optimizer, data, hp, epochs, generator)
    return RoundResult(
        train_loss=loss,
        train_acc=metrics.train_acc,
        val_acc=metrics.val_acc,
        test_acc=metrics.test_acc,
        num_train=data.num_train,
        num_val=data.num_val,
        num_test=data.num_test,
    )
