"""Mini-batch training and evaluation for graph classification (Flower-free), as in FedStar's code.

* Loss: mean negative log-likelihood of the batch (the models output log-probabilities); optimiser Adam,
  lr 1e-3, weight decay 5e-4 (L2 added to the gradient, ``torch.optim.Adam``'s ``weight_decay``), batch 128,
  ``local_epochs`` passes over the training graphs per call (paper Sec. 5.1).
* FedProx (``mu > 0``, App. A.2 uses mu = 0.01 = ``FEDPROX_MU``): the objective of every batch gets
  ``mu/2 * sum_k ||w_k - w_k^0||^2`` over the parameters of ``prox_part`` (the part the method shares), with
  ``w^0`` the values at the start of the call (the global model just received), as the authors' ``_prox_term``.
* The reported training loss is the graph-weighted mean of the minimised objective over all batches of the call
  (CE, plus the proximal term under FedProx), as the authors' ``train_gc``/``train_gc_prox`` report it.
* Reproducibility: batch order comes from a ``torch.Generator`` and dropout from the global generator forked and
  seeded for the call, both derived from (seed, round, client); the caller's RNG state is left untouched.
* The optimiser persists across rounds (the authors' clients create Adam once):
  :func:`flowergraph.tasks.torch_state.optimizer_state` turns its state into numpy arrays + JSON values (no
  pickle) and :func:`~flowergraph.tasks.torch_state.load_optimizer_state` loads them into a fresh optimiser over
  a fresh model (``ClientState.save_optimizer`` / ``load_optimizer`` keep them in ``context.state``); the next
  step is then bit-identical to an uninterrupted one.
* Evaluation per split: loss (mean NLL), accuracy and count; NaN loss/accuracy for an empty split.
* :func:`train_local` is the Local baseline (no communication): all clients start from the same seed (so every
  dataset-independent layer starts identical, as the authors' clients do after copying the server's layers)
  and report the final model's metrics, as the authors' ``selftrain`` (200 epochs) does.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError
from ..compute import seed_torch
from .models import build_graph_model, part_keys

FEDPROX_MU = 0.01


@dataclass(frozen=True)
class GraphTrainConfig:
    local_epochs: int = 1
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 5e-4
    mu: float = 0.0

    def validate(self) -> None:
        for key in ("local_epochs", "batch_size"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"{key} must be an integer >= 1, got {value!r}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if not self.weight_decay >= 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not self.mu >= 0:
            raise ConfigError(f"mu must be >= 0, got {self.mu}")


def derive_seed(*parts: int) -> int:
    """A 63-bit seed that is a pure function of the integers ``parts``."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, dtype=np.uint64)[0] >> 1)


def make_optimizer(model: nn.Module, cfg: GraphTrainConfig = GraphTrainConfig()) -> torch.optim.Adam:
    """Adam over all the model's parameters; create it once per client and keep it (see the module docstring)."""
    cfg.validate()
    return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def _prox_anchor(model: nn.Module, prox_part: str | list[str] | None, mu: float) -> dict | None:
    if mu <= 0:
        return None
    if prox_part is None:
        raise ConfigError(
            "mu > 0 (FedProx) needs prox_part, the shared part the proximal term applies to; "
            "valid choices: structure, feature, classifier, convs, all-but-classifier, all, or a "
            "list of state_dict keys"
        )
    keys = set(part_keys(model, prox_part) if isinstance(prox_part, str) else prox_part)
    return {name: p.detach().clone() for name, p in model.named_parameters() if name in keys}


def train_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    graphs,
    cfg: GraphTrainConfig = GraphTrainConfig(),
    *,
    seed: int = 0,
    round: int = 0,
    client: int = 0,
    prox_part: str | list[str] | None = None,
) -> float:
    """``cfg.local_epochs`` shuffled mini-batch passes over ``graphs``; returns the mean training loss
    (NaN and no update when there is no graph). See the module docstring."""
    from torch_geometric.loader import DataLoader

    cfg.validate()
    graphs = list(graphs)
    if not graphs:
        return math.nan
    anchor = _prox_anchor(model, prox_part, cfg.mu)
    params = dict(model.named_parameters())
    generator = torch.Generator().manual_seed(derive_seed(seed, round, client, 0))
    loader = DataLoader(graphs, batch_size=cfg.batch_size, shuffle=True, generator=generator)
    total, count = 0.0, 0
    model.train()
    with torch.random.fork_rng(devices=[]):
        seed_torch(derive_seed(seed, round, client, 1))
        for _ in range(cfg.local_epochs):
            for batch in loader:
                optimizer.zero_grad()
                loss = F.nll_loss(model(batch), batch.y)
                if anchor:
                    loss = loss + cfg.mu / 2 * sum(((params[k] - w0) ** 2).sum() for k, w0 in anchor.items())
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * batch.num_graphs
                count += batch.num_graphs
    return total / count


# A process's evaluation batches, per client data object (by id; dropped with the object), split and batch size:
# evaluation batches are in the split's order, so they are the same every round, and collating them again
# (``Batch.from_data_list``) was ~7 % of a 100-client FedStar train message (fused evaluation) on NCI1.
_EVAL_BATCHES: dict[int, dict[tuple[str, int], tuple[tuple, list]]] = {}
_EVAL_LOCK = threading.Lock()


def eval_batches(data, which: str, batch_size: int) -> list:
    """The batches ``DataLoader(data.split(which), batch_size, shuffle=False)`` gives, collated once per process,
    data object, split and batch size (rebuilt if the split is no longer the same tuple). Shared between calls:
    read them, never change them."""
    from torch_geometric.loader import DataLoader

    graphs = data.split(which)
    key = (which, int(batch_size))
    with _EVAL_LOCK:
        cached = _EVAL_BATCHES.get(id(data), {}).get(key)
    if cached is not None and cached[0] is graphs:
        return cached[1]
    batches = list(DataLoader(list(graphs), batch_size=batch_size, shuffle=False))
    try:
        with _EVAL_LOCK:
            if id(data) not in _EVAL_BATCHES:
                weakref.finalize(data, _EVAL_BATCHES.pop, id(data), None)
                _EVAL_BATCHES[id(data)] = {}
            _EVAL_BATCHES[id(data)][key] = (graphs, batches)
    except TypeError:  # an object that cannot be weakly referenced is not cached
        pass
    return batches


@torch.no_grad()
def evaluate(model: nn.Module, data, splits=("val", "test", "train"), batch_size: int = 128) -> dict:
    """``<split>_loss``, ``<split>_accuracy`` and ``num_<split>`` for each split of a ClientGraphData (its batches
    collated once per process: :func:`eval_batches`)."""
    model.eval()
    result: dict[str, float | int] = {}
    for which in splits:
        graphs = data.split(which)
        result[f"num_{which}"] = len(graphs)
        loss, correct = 0.0, 0
        for batch in eval_batches(data, which, batch_size):
            out = model(batch)
            loss += float(F.nll_loss(out, batch.y, reduction="sum"))
            correct += int((out.argmax(dim=-1) == batch.y).sum())
        result[f"{which}_loss"] = loss / len(graphs) if graphs else math.nan
        result[f"{which}_accuracy"] = correct / len(graphs) if graphs else math.nan
    return result


def train_local(
    spec,
    kind: str = "decoupled",
    *,
    rounds: int = 200,
    cfg: GraphTrainConfig = GraphTrainConfig(),
    seed: int = 0,
    hidden: int = 64,
    dropout: float = 0.5,
    clients=None,
    log=None,
) -> list[dict]:
    """The Local baseline: every client trains its own model for ``rounds`` x ``cfg.local_epochs`` epochs with
    one persistent optimiser and never communicates. Returns, per client, the final model's metrics
    (``evaluate``) plus ``name``, ``epochs`` and ``epoch_time_s`` (mean wall time of one training epoch)."""
    from .data import client_graph_data

    if not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ConfigError(f"rounds must be an integer >= 1, got {rounds!r}")
    results = []
    for cid in range(spec.client_count) if clients is None else clients:
        data = client_graph_data(spec, cid)
        model = build_graph_model(
            kind, data.num_features, data.num_classes, data.structure_dim, hidden=hidden, dropout=dropout, seed=seed
        )
        optimizer = make_optimizer(model, cfg)
        start = time.perf_counter()
        for r in range(rounds):
            loss = train_epochs(model, optimizer, data.train, cfg, seed=seed, round=r, client=cid)
        elapsed = time.perf_counter() - start
        row = {
            "client": cid,
            "name": data.name,
            "epochs": rounds * cfg.local_epochs,
            "final_train_loss": loss,
            "epoch_time_s": elapsed / (rounds * cfg.local_epochs),
            **evaluate(model, data),
        }
        if log is not None:
            log(row)
        results.append(row)
    return results
