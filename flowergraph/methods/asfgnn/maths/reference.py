"""In-process reference runs of SFGNN and the paper's baselines (no Flower, no communication).

These loops are the specification the Flower strategy/clients must reproduce number for number (same seeds,
same order of operations), and what the sanity benchmark and the search objective use. One run is T rounds
(Algorithm 2 / 4); in round t (1-based), with ``g = round_generator(seed, i, t)`` for client i:

``sfgnn`` (``use_js=True``) and ``sfgnn-nojs`` (``use_js=False``)
    every client: ``r_i = local_round(model_i, ..., g)`` (entry metrics, then local training);
    server: ``W_s = mean_i W_i`` over the discriminators (unweighted, Algorithm 2 line 17),
    ``N_s = sum_i N_i``, ``Q_s = N_s / sum N_s``, ``M_t = mean_i r_i.val_acc``;
    every client: ``W_i <- js_i W_i + (1 - js_i) W_s`` with ``js_i = JS(Q_i || Q_s)`` (or ``W_i <- W_s``).
    Each client's SGNN is initialised with its own seed; the discriminators start from one common random
    initialisation (``fgnn_init="shared"``; ``"client"`` gives each its own, see :func:`run_clients`).
``fl`` (FedAvg of the whole GraphSAGE + discriminator)
    as above but the whole model is averaged, weighted by the clients' training-node counts (FedAvg;
    ``fl_weighted=False`` gives the plain mean) and every client takes the average. All clients start from the
    same initial model and must share hidden size and depth.
``sp`` (separated: each client alone)
    ``local_round`` only.
``cm`` (centralized, :func:`run_centralized`)
    one model on the union of the clients' graphs (the union's induced subgraph, edges between clients kept).

After the T rounds every model is evaluated once more (the model after round T's aggregation), recorded as
round T + 1 with no training. ``M(theta) = max_t M_t`` over the T + 1 evaluations is the objective (Algorithm
4, line 11); :attr:`RunResult.test_at_best` is the mean client test accuracy at that evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError
from .data import ClientData
from .divergence import average_arrays, js_divergence, label_distribution, mix_arrays, sum_counts
from .models import all_arrays, fgnn_arrays, load_all_arrays, load_fgnn_arrays
from .training import (
    DEFAULT_LOCAL_EPOCHS,
    DEFAULT_ROUNDS,
    HyperParams,
    derive_seed,
    evaluate,
    local_round,
    make_model,
    make_optimizer,
    predict,
    round_generator,
    train_steps,
)

METHODS = ("sfgnn", "sfgnn-nojs", "fl", "sp")
FGNN_INITS = ("client", "shared")


@dataclass
class RunResult:
    """Per-round history and the objective of one run."""

    method: str
    rounds: int
    history: list[dict[str, Any]] = field(default_factory=list)  # one entry per evaluation (rounds + 1)
    best_round: int = 0
    best_val: float = float("nan")  # M(theta) = max_t mean_i val_acc
    test_at_best: float = float("nan")  # mean_i test_acc at best_round
    final_val: float = float("nan")
    final_test: float = float("nan")
    js: list[float] = field(default_factory=list)  # JS(Q_i || Q_s) per client (SFGNN; constant over rounds)

    @property
    def cost(self) -> float:
        """The search cost of this run: ``1 - M(theta)`` (SMAC minimises)."""
        return 1.0 - self.best_val

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "rounds": self.rounds,
            "best_round": self.best_round,
            "best_val": self.best_val,
            "test_at_best": self.test_at_best,
            "final_val": self.final_val,
            "final_test": self.final_test,
            "js": list(self.js),
            "history": self.history,
        }


def _mean(values: Sequence[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return float(np.mean(vals)) if vals else float("nan")


def _finish(result: RunResult) -> RunResult:
    best = max(result.history, key=lambda h: (h["mean_val"], -h["round"]))  # first round reaching the max
    result.best_round = int(best["round"])
    result.best_val = float(best["mean_val"])
    result.test_at_best = float(best["mean_test"])
    result.final_val = float(result.history[-1]["mean_val"])
    result.final_test = float(result.history[-1]["mean_test"])
    return result


def _check_hps(clients: Sequence[ClientData], hps: Sequence[HyperParams] | HyperParams) -> list[HyperParams]:
    if isinstance(hps, HyperParams):
        hps = [hps] * len(clients)
    hps = list(hps)
    if len(hps) != len(clients):
        raise ConfigError(f"{len(hps)} hyper-parameter sets for {len(clients)} clients")
    hidden = sorted({hp.hidden for hp in hps})
    if len(hidden) != 1:
        raise ConfigError(f"the clients' hidden sizes {hidden} differ; the discriminator needs one hidden size")
    classes = sorted({c.num_classes for c in clients})
    if len(classes) != 1:
        raise ConfigError(f"the clients' class counts {classes} differ; J must be the dataset's")
    return hps


def run_clients(
    clients: Sequence[ClientData],
    hps: Sequence[HyperParams] | HyperParams,
    *,
    method: str = "sfgnn",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = 0,
    local_epochs: int = DEFAULT_LOCAL_EPOCHS,
    fl_weighted: bool = True,
    fgnn_init: str = "shared",
) -> RunResult:
    """Run ``method`` (one of :data:`METHODS`) for ``rounds`` rounds over ``clients`` (see the module doc).

    ``fgnn_init``: ``"shared"`` (default) -- all clients start from one initial discriminator (client 0's, as
    a server broadcast would give; the SGNNs stay per client); ``"client"`` -- every client draws its own
    (Algorithm 2, line 2 read literally). Averaging independently initialised discriminators mixes unrelated
    hidden units: on Cora (alpha = 1, 150 rounds, hidden 128, Table 4's settings) SFGNN reached 0.73 / 0.80
    mean test accuracy with "client" against 0.89 / 0.89 with "shared" (seeds 0 / 1). FL always starts from
    one common model."""
    if method not in METHODS:
        raise ConfigError(
            f"method {method!r} is unknown; valid choices: {', '.join(METHODS)} "
            f"(the centralized baseline is run_centralized)"
        )
    if int(rounds) < 1:
        raise ConfigError(f"rounds {rounds!r} must be >= 1")
    if len(clients) == 0:
        raise ConfigError("no clients")
    hps = _check_hps(clients, hps)
    if method == "fl" and len({hp.depth for hp in hps}) != 1:
        raise ConfigError(f"FL averages the whole model: the clients' depths {[hp.depth for hp in hps]} must match")
    models = [
        make_model(c, hp, derive_seed(seed, 0x1417, 0 if method == "fl" else i))
        for i, (c, hp) in enumerate(zip(clients, hps))
    ]
    if fgnn_init not in FGNN_INITS:
        raise ConfigError(f"fgnn_init {fgnn_init!r} is unknown; valid choices: {', '.join(FGNN_INITS)}")
    if fgnn_init == "shared":
        for model in models[1:]:
            load_fgnn_arrays(model, fgnn_arrays(models[0]))
    optimizers = [make_optimizer(m, hp) for m, hp in zip(models, hps)]
    counts = [c.train_label_counts() for c in clients]
    q_server = label_distribution(sum_counts(counts))
    js = [js_divergence(label_distribution(n), q_server) for n in counts]
    result = RunResult(method=method, rounds=int(rounds), js=js if method.startswith("sfgnn") else [])
    for t in range(1, int(rounds) + 1):
        per_client = []
        for i, (c, hp, model, opt) in enumerate(zip(clients, hps, models, optimizers)):
            per_client.append(
                local_round(model, opt, c, hp, epochs=local_epochs, generator=round_generator(seed, i, t))
            )
        if method.startswith("sfgnn"):
            server = average_arrays([fgnn_arrays(m) for m in models])
            for i, model in enumerate(models):
                load_fgnn_arrays(model, mix_arrays(fgnn_arrays(model), server, js[i], use_js=method == "sfgnn"))
        elif method == "fl":
            weights = [c.num_train for c in clients] if fl_weighted else None
            server = average_arrays([all_arrays(m) for m in models], weights)
            for model in models:
                load_all_arrays(model, server)
        result.history.append(_entry(t, per_client))
    final = [evaluate(m, c) for m, c in zip(models, clients)]
    result.history.append(_entry(int(rounds) + 1, final))
    return _finish(result)


def _entry(t: int, per_client) -> dict[str, Any]:
    rows = [
        {
            "train_loss": getattr(r, "train_loss", None),
            "train_acc": r.train_acc,
            "val_acc": r.val_acc,
            "test_acc": r.test_acc,
        }
        for r in per_client
    ]
    return {
        "round": t,
        "clients": rows,
        "mean_val": _mean([r["val_acc"] for r in rows]),
        "mean_test": _mean([r["test_acc"] for r in rows]),
    }


def run_centralized(
    data: ClientData,
    hp: HyperParams,
    *,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = 0,
    local_epochs: int = DEFAULT_LOCAL_EPOCHS,
) -> RunResult:
    """CM: one SGNN + FGNN trained on the union graph (:func:`~.data.centralized_data`), same round structure
    (evaluate, then ``local_epochs`` steps; T + 1 evaluations).

    ``mean_val`` / ``mean_test`` are the accuracies over all the union's validation / test nodes; when
    ``data.owner`` is set each history entry also has ``client_val`` / ``client_test`` (accuracy on each
    client's nodes, as seen in the union graph) and ``client_mean_val`` / ``client_mean_test`` (their plain
    means, the paper's "average of metrics in all clients")."""
    if int(rounds) < 1:
        raise ConfigError(f"rounds {rounds!r} must be >= 1")
    model = make_model(data, hp, derive_seed(seed, 0x1417, 0))
    opt = make_optimizer(model, hp)
    result = RunResult(method="cm", rounds=int(rounds))
    for t in range(1, int(rounds) + 1):
        entry = _cm_entry(t, model, data)
        entry["train_loss"] = train_steps(model, opt, data, hp, local_epochs, round_generator(seed, -1, t))
        result.history.append(entry)
    result.history.append(_cm_entry(int(rounds) + 1, model, data))
    return _finish(result)


def _cm_entry(t: int, model, data: ClientData) -> dict[str, Any]:
    pred = predict(model, data)
    correct = (pred == data.y).numpy()
    val, test = data.val_mask.numpy(), data.test_mask.numpy()

    def acc(mask):
        return float(correct[mask].mean()) if mask.any() else float("nan")

    entry: dict[str, Any] = {"round": t, "train_loss": None, "mean_val": acc(val), "mean_test": acc(test)}
    if data.owner is not None:
        owner = data.owner.numpy()
        entry["client_val"] = [acc(val & (owner == i)) for i in range(data.num_clients)]
        entry["client_test"] = [acc(test & (owner == i)) for i in range(data.num_clients)]
        entry["client_mean_val"] = _mean(entry["client_val"])
        entry["client_mean_test"] = _mean(entry["client_test"])
    return entry


def run_config(
    clients: Sequence[ClientData],
    config: dict[str, Any],
    *,
    method: str = "sfgnn",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = 0,
    local_epochs: int = DEFAULT_LOCAL_EPOCHS,
) -> RunResult:
    """One search trial (Algorithm 4, lines 3-11): run ``method`` with a search configuration (see
    :mod:`.search`); the trial's cost is ``result.cost = 1 - M(theta)``."""
    from .search import client_hyperparams

    hps = client_hyperparams(config)
    if len(hps) != len(clients):
        raise ConfigError(f"the configuration has values for {len(hps)} clients, there are {len(clients)}")
    return run_clients(clients, hps, method=method, rounds=rounds, seed=seed, local_epochs=local_epochs)
