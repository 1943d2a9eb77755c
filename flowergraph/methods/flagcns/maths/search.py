"""FL-AGCNS's search (paper Algorithm 2) run in one process over the clients' graphs: the reference that a
federated implementation must reproduce, and the tool for measuring costs. No Flower, no messages: the
"clients" are graphs, and since every client's SuperNet copy receives the same combined gradient, one SuperNet
stands for all copies.

Epoch t = 1..E (``SearchSchedule``):

1. **SuperNet weights** (lines 6-13): ``steps_per_epoch`` times: draw ``sample_size`` codes of the training
   population (uniformly, without replacement); every client computes its loss and gradients on them
   (:func:`.training.client_loss_and_gradients`), the server combines them (``combine``: ``weighted`` by
   training-set size, the paper, or ``sum``) and takes one Adam step. The training population is P; during the
   first ``warmup_epochs`` epochs it is a fresh random population every epoch (the reference code's intended
   warm-up) and no FEO runs.
2. **FEO** (line 16, Algorithm 1) with ``gamma = schedule.gamma(t)``: the controller's EA evolves P on
   ``-FLL`` (clients evaluate its pool) into P_FL; client i's EA evolves ``P_{G_i} u P_FL`` on its own validation
   loss into a new ranked ``P_{G_i}``; P is assembled from the top of P_FL and of each P_{G_i}
   (:func:`.evolution.assemble_population`, client weights = training-set sizes). ``fitness="accuracy"`` uses
   validation accuracies instead of losses (the reference code).

Evaluations within one FEO are cached per (client, network): the weights do not change during it.
:meth:`InProcessSearch.final` is lines 19-22 (FLL of every member of P, the argmin; ``final_pick="accuracy"``:
the highest federated validation accuracy, as the authors' 2021 code picks). ``adam_scope="once-touched"`` steps
the SuperNet as the 2021 code did under torch 1.x (:class:`.training.SuperNetOptimizer`). :meth:`state` /
:meth:`load_state` hold everything (SuperNet, Adam, the EAs, P, the random generators), so a resumed search is
identical to an uninterrupted one.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ....errors import ConfigError
from ....tasks.torch_state import rng_state, set_rng_state
from .evolution import (
    FINAL_PICKS,
    PAPER_SCHEDULE,
    EvolutionaryOptimizer,
    SearchSchedule,
    assemble_population,
    final_candidates,
    new_rng,
    rng_from_json,
    rng_state_json,
    sample_members,
)
from .space import Code, SearchSpace
from .supernet import SuperNet
from .training import (
    COMBINE_MODES,
    LR,
    WEIGHT_DECAY,
    SuperNetOptimizer,
    client_loss_and_gradients,
    combine_gradients,
    evaluate_codes,
    federated_mean,
)

FITNESS = ("loss", "accuracy")


class InProcessSearch:
    """Algorithm 2 over ``graphs`` (module docstring). ``run()`` runs the remaining epochs; ``final()`` picks the
    architecture."""

    def __init__(
        self,
        space: SearchSpace,
        graphs: Sequence,
        schedule: SearchSchedule = PAPER_SCHEDULE,
        seed: int = 0,
        fitness: str = "loss",
        combine: str = "weighted",
        lr: float = LR,
        weight_decay: float = WEIGHT_DECAY,
        final_pick: str = "fll",
        adam_scope: str = "this-step",
    ):
        if fitness not in FITNESS:
            raise ConfigError(f"unknown fitness {fitness!r}; valid choices: {', '.join(FITNESS)}")
        if final_pick not in FINAL_PICKS:
            raise ConfigError(f"unknown final pick {final_pick!r}; valid choices: {', '.join(FINAL_PICKS)}")
        if combine not in COMBINE_MODES:
            raise ConfigError(f"unknown gradient combination {combine!r}; valid choices: {', '.join(COMBINE_MODES)}")
        if not graphs:
            raise ConfigError("InProcessSearch needs at least one client graph")
        self.space, self.graphs, self.schedule = space, list(graphs), schedule
        self.fitness, self.combine, self.final_pick = fitness, combine, final_pick
        in_dim = int(graphs[0].x.size(1))
        num_classes = int(
            max(int(getattr(g, "num_classes", 0) or 0) for g in graphs) or max(int(g.y.max()) + 1 for g in graphs)
        )
        self.supernet = SuperNet(space, in_dim, num_classes, seed=seed)
        self.optimizer = SuperNetOptimizer(self.supernet, lr=lr, weight_decay=weight_decay, scope=adam_scope)
        self.train_sizes = [int(g.train_mask.sum()) for g in graphs]
        self.val_sizes = [int(g.val_mask.sum()) for g in graphs]
        self.rng = new_rng(seed, 0x5EA)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.torch_rng = rng_state()
        self.population: list[Code] = space.random_population(schedule.population_size, self.rng)
        self.controller = EvolutionaryOptimizer(space, schedule.controller_config(), seed, salt=0)
        self.clients = [
            EvolutionaryOptimizer(space, schedule.client_config(), seed, salt=i + 1, population=self.population)
            for i in range(len(graphs))
        ]
        self.epoch = 0
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------------------------------ pieces
    def supernet_step(self, codes: Sequence[Code]) -> float:
        """One federated SuperNet step on ``codes``; returns the train-size weighted training loss."""
        with torch.random.fork_rng(devices=[]):
            set_rng_state(self.torch_rng)
            results = [client_loss_and_gradients(self.supernet, g, codes) for g in self.graphs]
            self.torch_rng = rng_state()
        grads = [g for _, g in results]
        self.optimizer.step(combine_gradients(grads, self.train_sizes, self.combine))
        return federated_mean([loss for loss, _ in results], self.train_sizes)

    def _scores(self, cache: list[dict], client: int, codes: Sequence[Code]) -> list[dict[str, float]]:
        missing = [c for c in codes if self.space.canonical(c) not in cache[client]]
        missing = list({self.space.canonical(c): c for c in missing}.values())
        if missing:
            for code, row in zip(missing, evaluate_codes(self.supernet, self.graphs[client], missing)):
                cache[client][self.space.canonical(code)] = row
        return [cache[client][self.space.canonical(c)] for c in codes]

    def federated_scores(self, codes: Sequence[Code], cache: list[dict] | None = None) -> list[tuple[float, float]]:
        """``(FLL, federated validation accuracy)`` of each code (val-size weighted, Eq. 1)."""
        cache = cache if cache is not None else [{} for _ in self.graphs]
        rows = [self._scores(cache, i, codes) for i in range(len(self.graphs))]
        out = []
        for j in range(len(codes)):
            out.append(
                (
                    federated_mean([rows[i][j]["val_loss"] for i in range(len(rows))], self.val_sizes),
                    federated_mean([rows[i][j]["val_accuracy"] for i in range(len(rows))], self.val_sizes),
                )
            )
        return out

    def _fit(self, loss: float, accuracy: float) -> float:
        return -loss if self.fitness == "loss" else accuracy

    # ------------------------------------------------------------------------------------------ epochs
    def run_epoch(self) -> dict[str, Any]:
        """One epoch of Algorithm 2; returns (and appends to ``history``) what happened."""
        sch, space = self.schedule, self.space
        t = self.epoch + 1
        evolves = sch.evolves(t)
        start = time.perf_counter()
        training = self.population if evolves else space.random_population(sch.population_size, self.rng)
        losses = [
            self.supernet_step(sample_members(training, sch.sample_size, self.rng)) for _ in range(sch.steps_per_epoch)
        ]
        record: dict[str, Any] = {
            "epoch": t,
            "train_loss": float(np.mean(losses)),
            "evolved": evolves,
            "train_seconds": time.perf_counter() - start,
        }
        if evolves:
            start = time.perf_counter()
            gamma = sch.gamma(t)
            cache: list[dict] = [{} for _ in self.graphs]
            self.controller.set_population(self.population)
            pool = self.controller.propose()
            scores = self.federated_scores(pool, cache)
            p_fl = self.controller.select([self._fit(loss, acc) for loss, acc in scores])
            ranked = []
            for i, ea in enumerate(self.clients):
                pool_i = ea.propose(extra=p_fl)
                rows = self._scores(cache, i, pool_i)
                ea.select([self._fit(r["val_loss"], r["val_accuracy"]) for r in rows])
                ranked.append(ea.ranked())
            assembled = assemble_population(space, p_fl, ranked, gamma, self.train_sizes, sch.population_size)
            self.population = assembled.population
            best = scores[[space.canonical(c) for c in pool].index(space.canonical(p_fl[0]))]
            n_fl, n_clients = assembled.counts()
            record.update(
                {
                    "gamma": gamma,
                    "best_code": list(p_fl[0]),
                    "best_fll": best[0],
                    "best_val_accuracy": best[1],
                    "from_controller": n_fl,
                    "from_clients": n_clients,
                    "evaluations": sum(len(c) for c in cache),
                    "feo_seconds": time.perf_counter() - start,
                }
            )
        self.epoch = t
        self.history.append(record)
        return record

    def run(self, epochs: int | None = None) -> list[dict[str, Any]]:
        """Run ``epochs`` more epochs (default: up to the schedule's end)."""
        n = self.schedule.epochs - self.epoch if epochs is None else epochs
        return [self.run_epoch() for _ in range(max(0, n))]

    def final(self) -> tuple[Code, float, float]:
        """Algorithm 2 lines 19-22: ``(argmin_a FLL_a over P, its FLL, its federated validation accuracy)``; with
        ``final_pick="accuracy"`` the member with the highest federated validation accuracy (the 2021 code's
        ``get_best_supermask``). Ties: the first in P."""
        return self.finalists(1)[0]

    def finalists(self, k: int) -> list[tuple[Code, float, float]]:
        """The ``k`` best distinct networks of P by the final pick (``flagcns.finalists``, not the paper's rule):
        ``[(code, FLL, federated validation accuracy)]`` best first; ``finalists(1)[0] == final()``."""
        scores = self.federated_scores(self.population)
        return [
            (code, fll, acc)
            for code, fll, acc, _ in final_candidates(self.space, self.population, scores, k, self.final_pick)
        ]

    # ------------------------------------------------------------------------------------------ state
    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, values)``: SuperNet weights (``supernet.<key>``), Adam state (``optimizer.<key>``), the
        torch generator (``torch_rng``); JSON values for the rest."""
        opt_arrays, opt_values = self.optimizer.state()
        arrays = {f"supernet.{k}": v for k, v in self.supernet.arrays().items()}
        arrays.update({f"optimizer.{k}": v for k, v in opt_arrays.items()})
        arrays["torch_rng"] = self.torch_rng.copy()
        values = {
            "epoch": self.epoch,
            "population": [list(c) for c in self.population],
            "rng": rng_state_json(self.rng),
            "controller": self.controller.state(),
            "clients": [ea.state() for ea in self.clients],
            "optimizer": opt_values,
            "history": self.history,
        }
        return arrays, values

    def load_state(self, arrays: Mapping[str, np.ndarray], values: Mapping[str, Any]) -> None:
        if len(values["clients"]) != len(self.graphs):
            raise ConfigError(f"saved search has {len(values['clients'])} clients, this one {len(self.graphs)}")
        self.supernet.load_arrays({k[len("supernet.") :]: v for k, v in arrays.items() if k.startswith("supernet.")})
        self.optimizer.load_state(
            {k[len("optimizer.") :]: v for k, v in arrays.items() if k.startswith("optimizer.")}, values["optimizer"]
        )
        self.torch_rng = np.array(arrays["torch_rng"], dtype=np.uint8)
        self.epoch = int(values["epoch"])
        self.population = [self.space.check(c) for c in values["population"]]
        self.rng = rng_from_json(values["rng"])
        self.controller = EvolutionaryOptimizer.from_state(self.space, values["controller"])
        self.clients = [EvolutionaryOptimizer.from_state(self.space, s) for s in values["clients"]]
        self.history = [dict(r) for r in values["history"]]


def best_fitness_curve(history: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """``(epoch, best FLL of P_FL)`` for every FEO epoch of a search history (for the paper's fitness plot)."""
    return [
        (int(r["epoch"]), float(r["best_fll"]))
        for r in history
        if r.get("evolved") and r.get("best_fll") is not None and math.isfinite(r["best_fll"])
    ]
