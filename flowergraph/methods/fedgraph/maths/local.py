"""One round of a FedGraph client's local training (paper Algorithm 1, lines 4-17), Flower-free.

Each of ``cfg.local_steps`` iterations builds a fresh layered sample with the round's scheme (FedGraph's
policy P_i, or a baseline), runs the forward pass of eq. 2-4 with the remote rows received this round, takes
the mean negative log-likelihood over the mini-batch (eq. 5) and one Adam step (eq. 6 with Adam, lr 0.01, as in
the paper's experiments). The number the server weights this client by in eq. 8 is the mini-batch size kappa_i
(``RoundResult.num_samples``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ....tasks.training import TrainConfig, make_optimizer
from .graph import ClientView, shared_convs
from .model import Tables, check_model, forward, forward_macs, train_macs
from .sampling import FullBatch, LayeredSample, Scheme

# The paper's local optimiser: Adam, lr 0.01 (weight decay 5e-4 and 3 iterations per round are our choices).
PAPER_TRAIN = TrainConfig(local_steps=3, optimizer="adam", lr=0.01, weight_decay=5e-4)


@dataclass
class RoundResult:
    loss: float  # mean mini-batch loss over the iterations (NaN without labelled nodes)
    num_samples: int  # mini-batch size kappa_i: the client's weight in eq. 8 (0 without labelled nodes)
    iterations: int
    seconds: float  # wall time of the iterations (sampling, forward, backward, step)
    sample_seconds: float  # part of ``seconds`` spent building samples
    nodes_per_iteration: float  # mean over iterations of the nodes in all layers (remote rows included)
    edges_per_iteration: float
    forward_macs: int = 0  # multiply-adds of the iterations' forward passes (:func:`~.model.forward_macs`)
    train_macs: int = 0  # forward + backward multiply-adds (:func:`~.model.train_macs`): the parallel clock's work


def train_step(
    model: nn.Module, view: ClientView, sample: LayeredSample, tables: Tables | None, optimizer: torch.optim.Optimizer
) -> float:
    """One local iteration on ``sample`` (eq. 2-6: forward with the received rows, the mini-batch's mean negative
    log-likelihood, one optimizer step); returns the loss. :func:`train_round` runs ``local_steps`` of them; the
    per-iteration exchange (``fedgraph.exchange=iteration``) runs one per message, with the rows received for
    exactly this sample."""
    optimizer.zero_grad()
    loss = F.nll_loss(forward(model, view, sample, tables), view.graph.y[sample.batch])
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def train_round(
    model: nn.Module,
    view: ClientView,
    scheme: Scheme,
    sharing: str,
    tables: Tables | None = None,
    cfg: TrainConfig = PAPER_TRAIN,
    generator: torch.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> RoundResult:
    """Run one round's local iterations on ``model`` in place.

    ``tables``: the rows received for the sharing convolutions (:func:`~.model.exchange_in_process` or the
    Flower relay). ``generator`` drives the sampling (dropout uses torch's global generator). ``optimizer``:
    one kept across rounds, or None for a fresh one from ``cfg`` (Adam's moments restart every round).
    """
    cfg.validate()
    num_convs = check_model(model)
    scheme.check(num_convs)
    shared = shared_convs(sharing, num_convs)
    g = view.graph
    train_idx = torch.nonzero(g.train_mask, as_tuple=True)[0]
    if train_idx.numel() == 0:
        return RoundResult(math.nan, 0, 0, 0.0, 0.0, 0.0, 0.0)
    model.train()
    optimizer = optimizer if optimizer is not None else make_optimizer(model.parameters(), cfg)
    total = 0.0
    nodes = edges = macs = work = 0
    sample_seconds = 0.0
    fixed = None
    start = time.perf_counter()
    for _ in range(cfg.local_steps):
        t0 = time.perf_counter()
        if isinstance(scheme, FullBatch):  # deterministic: built once per round
            fixed = fixed if fixed is not None else scheme.sample(view, train_idx, shared, generator)
            sample = fixed
        else:
            sample = scheme.sample(view, train_idx, shared, generator)
        sample_seconds += time.perf_counter() - t0
        total += train_step(model, view, sample, tables, optimizer)
        nodes += sum(sample.layer_sizes())
        edges += sample.num_edges()
        macs += forward_macs(model, sample)
        work += train_macs(model, sample)
    seconds = time.perf_counter() - start
    steps = cfg.local_steps
    return RoundResult(
        loss=total / steps,
        num_samples=scheme.batch_for(int(train_idx.numel())),
        iterations=steps,
        seconds=seconds,
        sample_seconds=sample_seconds,
        nodes_per_iteration=nodes / steps,
        edges_per_iteration=edges / steps,
        forward_macs=macs,
        train_macs=work,
    )
