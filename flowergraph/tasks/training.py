"""Local full-batch training and evaluation loops for node classification (Flower-free).

Full batch means one optimisation step uses every training node of the client's graph, so one local
step is one local epoch: ``local-steps`` counts both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class TrainConfig:
    local_steps: int = 3
    optimizer: str = "sgd"
    lr: float = 0.5
    weight_decay: float = 5e-4
    momentum: float = 0.0

    def validate(self) -> None:
        if self.local_steps < 1:
            raise ConfigError(f"local-steps must be >= 1, got {self.local_steps}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; valid choices: {', '.join(OPTIMIZERS)}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise ConfigError(f"weight-decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must be in [0, 1), got {self.momentum}")


def make_optimizer(params, cfg: TrainConfig) -> torch.optim.Optimizer:
    """A fresh optimizer. Created anew for every round: SGD without momentum keeps no state, so this is
    exact for it; Adam's moment estimates (and SGD momentum) restart each round."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    raise ConfigError(f"unknown optimizer {cfg.optimizer!r}; valid choices: {', '.join(OPTIMIZERS)}")


def train_steps(
    model: nn.Module,
    forward,
    y: torch.Tensor,
    train_mask: torch.Tensor,
    cfg: TrainConfig,
    *,
    prox_mu: float = 0.0,
    prox_anchor: dict[str, torch.Tensor] | None = None,
) -> float:
    """Run ``cfg.local_steps`` full-batch steps; ``forward()`` returns log-probabilities for all nodes.

    ``prox_mu`` > 0 adds FedProx's proximal term ``mu/2 sum ||w - w_0||^2`` over the named parameters of
    ``prox_anchor`` (their values when the round started) to every step's loss; the reported loss includes it.
    Returns the mean training loss over the steps, or NaN (and no update) when there is no training node.
    """
    if int(train_mask.sum()) == 0:
        return math.nan
    model.train()
    optimizer = make_optimizer(model.parameters(), cfg)
    params = dict(model.named_parameters())
    anchor = {k: v.detach().clone() for k, v in (prox_anchor or {}).items()} if prox_mu > 0 else {}
    total = 0.0
    for _ in range(cfg.local_steps):
        optimizer.zero_grad()
        loss = F.nll_loss(forward()[train_mask], y[train_mask])
        if anchor:
            loss = loss + prox_mu / 2 * sum(((params[k] - w0) ** 2).sum() for k, w0 in anchor.items())
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return total / cfg.local_steps


@torch.no_grad()
def evaluate_masks(model: nn.Module, forward, y: torch.Tensor, masks: dict[str, torch.Tensor]) -> dict:
    """Loss, accuracy and count for each named mask from one eval-mode forward pass.

    Keys: ``<name>_loss``, ``<name>_accuracy``, ``num_<name>``; loss/accuracy are NaN for an empty mask.
    """
    model.eval()
    return mask_metrics(forward(), y, masks)


def mask_metrics(
    out: torch.Tensor,
    y: torch.Tensor,
    masks: Mapping[str, torch.Tensor],
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.nll_loss,
    accuracy_dtype: torch.dtype = torch.float32,
) -> dict[str, float | int]:
    """``<name>_loss`` (``loss`` of the masked outputs: ``F.nll_loss`` for log-probabilities,
    ``F.cross_entropy`` for logits), ``<name>_accuracy`` (mean computed in ``accuracy_dtype``) and ``num_<name>``
    for each named mask of one output; loss/accuracy are NaN for an empty mask."""
    pred = out.argmax(dim=-1)
    result: dict[str, float | int] = {}
    for name, mask in masks.items():
        n = int(mask.sum())
        result[f"num_{name}"] = n
        if n == 0:
            result[f"{name}_loss"] = math.nan
            result[f"{name}_accuracy"] = math.nan
        else:
            result[f"{name}_loss"] = float(loss(out[mask], y[mask]))
            result[f"{name}_accuracy"] = float((pred[mask] == y[mask]).to(accuracy_dtype).mean())
    return result
