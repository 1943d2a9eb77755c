"""FL-AGCNS (Wang et al., *FL-AGCNS: Federated Learning Framework for Automatic Graph Convolutional Network
Search*): a federated search over GCN architectures with a weight-sharing SuperNet and federated evolutionary
optimisation (FEO), then the chosen architecture retrained from scratch, as a flowergraph strategy.

The run has two stages (:class:`~flowergraph.strategies.policy.Stage`): ``search`` (``epochs x steps-per-epoch``
rounds) and ``retrain`` (``retrain-epochs`` rounds); with a fixed architecture only ``retrain``. It computes what
the in-process reference :class:`~flowergraph.methods.flagcns.maths.InProcessSearch` computes (paper Algorithm 2, the
deviations listed in :mod:`flowergraph.methods.flagcns.maths`): same seed, same populations, SuperNet weights and chosen
architecture (tests compare them), because both call the same functions in the same order; only where they run
differs.

Search round r (epoch t = ceil(r / S), step k; S steps per epoch): the server draws ``sample-size`` codes from the
training population (P; during the ``warmup`` epochs a fresh random population drawn at each epoch's first step)
and sends every client, in ``fit``, the SuperNet parameters those codes train (named) with the codes; each client
returns its gradients of its training loss averaged over the codes; the server combines them (``weighted`` by
training-set size, the paper's Eq. 2, or ``sum``) and takes one Adam step (lr 0.02, weight decay 5e-6) on the
SuperNet it holds. After the epoch's last step, if t > warmup, one FEO generation (Algorithm 1), phase
``flagcns-feo``:

1. the controller's EA proposes a pool from P; every client scores it (phase message ``flagcns.evaluate``, with
   the sub-networks' weights): validation loss and accuracy per code, or only their CKKS encryption in secure
   mode, which the server sums without a key and one client decrypts (``flagcns-decrypt``); FLL (Eq. 1, the
   validation-size weighted loss) ranks the pool: P_FL;
2. every client evolves ``P_{G_i} u P_FL`` with its own EA on its own validation losses (``flagcns.evolve``, with
   the whole SuperNet) and returns its ranking P_{G_i}; its EA's state stays on the client (client checkpoints);
3. the server assembles the new P: the top ``(1 - gamma)|P|`` of P_FL and the top ``gamma |P| n_i / sum n_j`` of
   each P_{G_i} (gamma = 0.5 * 0.99^t, or fixed by ``flagcns.ablation``).

When ``retrain`` starts (Algorithm 2 lines 19-22, phase ``flagcns-final``) every client scores the final P; the
member with the lowest FLL is the architecture (``final_pick="accuracy"``: the one with the highest federated
validation accuracy, as the authors' 2021 code picks). With ``finalists`` = K > 1 (not the paper's rule) the K best
distinct networks by that pick are retrained one after the other, stages ``retrain-1`` ... ``retrain-K`` of
``retrain-epochs`` rounds each (each from the same seeded initial weights), and the one whose best epoch has the
highest federated validation accuracy is kept (its FLACC is the run's result;
:func:`~flowergraph.methods.flagcns.maths.choose_by_retraining` is the in-process reference). Retraining (the reference
code's): its network starts from fresh seeded weights; each round every client returns its full-batch training
gradient, the server combines them and takes one Adam step; clients evaluate every round (fused into the next fit);
the epoch with the best federated validation accuracy gives FLACC (test accuracy weighted by test-set sizes),
reported in the last round's record (``flagcns.result``) with the parameter count and the clients' inference time.

What the server learns: the sampled codes and population (it runs the controller), each client's gradients and
training loss per round (under ``secure-agg=ckks``: only their train-size weighted sum, no loss), each client's
validation loss and accuracy per scored code (secure: only the sums over clients: FLL itself), each client's
ranking of its own population and its training-set size, and in retraining each client's evaluation metrics (as
for every method). State: the SuperNet (the bank's global model), Adam's moments, the population, the
controller's EA, the random generator, the history and the retraining's best epoch join the checkpoint
(:meth:`state_dict`).
"""

from __future__ import annotations

import math
import time
from logging import INFO, WARNING
from typing import Any, Mapping, Sequence

import numpy as np
from flwr.common.logger import log

from ...strategies.nodes import Federation, Node, Scalar
from ... import wire
from ...wire import PhaseMessage
from . import wire as msg
from ...wire.secure import CKKS_SUM, CKKS_TOTAL_WEIGHT
from ...strategies.aggregation import Update
from ...strategies.bank import GLOBAL
from ...strategies.base import FederatedStrategy
from ...strategies.evaluation import ClientEvaluation
from ...strategies.phases import Phase
from ...strategies.secure import Upload
from ...strategies.policy import FederationPolicy, Stage

SEARCH, RETRAIN = "search", "retrain"
COMBINE = ("weighted", "sum")
FITNESS = ("loss", "accuracy")


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


class FLAGCNSStrategy(FederatedStrategy):
    """FL-AGCNS's server (module docstring).

    ``space`` (:class:`~flowergraph.methods.flagcns.maths.SearchSpace`) and ``schedule``
    (:class:`~flowergraph.methods.flagcns.maths.SearchSchedule`: population, sample size, epochs, warm-up, steps per
    epoch, gamma) define the search; ``combine``: ``weighted`` or ``sum``; ``fitness``: ``loss`` (the paper) or
    ``accuracy`` (the reference code); ``lr`` / ``weight_decay``: the server's Adam (search and retraining);
    ``architecture``: a code to retrain without searching; ``init_seed``: the retrained network's initial weights
    (default: the run's seed); ``finalists``: how many of the lowest-FLL networks are retrained to choose by
    validation accuracy (1: the paper's lowest FLL); ``final_pick``: ``fll`` (the paper) or ``accuracy`` (the
    2021 code) ranks the final population; ``adam_scope``: ``this-step`` or ``once-touched`` (the 2021 code under
    torch 1.x; :class:`~flowergraph.methods.flagcns.maths.SuperNetOptimizer`), for the search's Adam. The policy's
    ``num_rounds`` must be the search rounds plus the retraining rounds (``finalists x retrain_epochs``).
    Every other argument is :class:`~flowergraph.strategies.FederatedStrategy`'s.
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        space: Any,
        schedule: Any,
        combine: str = "weighted",
        fitness: str = "loss",
        lr: float | None = None,
        weight_decay: float | None = None,
        architecture: Sequence[int] | None = None,
        init_seed: int | None = None,
        finalists: int = 1,
        final_pick: str = "fll",
        adam_scope: str = "this-step",
        **kwargs: Any,
    ) -> None:
        from .maths import ADAM_SCOPES, FINAL_PICKS, LR, WEIGHT_DECAY, EvolutionaryOptimizer, new_rng

        if combine not in COMBINE:
            raise ValueError(f"unknown combine {combine!r}; valid choices: {', '.join(COMBINE)}")
        if fitness not in FITNESS:
            raise ValueError(f"unknown fitness {fitness!r}; valid choices: {', '.join(FITNESS)}")
        if final_pick not in FINAL_PICKS:
            raise ValueError(f"unknown final_pick {final_pick!r}; valid choices: {', '.join(FINAL_PICKS)}")
        if adam_scope not in ADAM_SCOPES:
            raise ValueError(f"unknown adam_scope {adam_scope!r}; valid choices: {', '.join(ADAM_SCOPES)}")
        if int(finalists) < 1:
            raise ValueError(f"finalists={finalists!r}: must be >= 1 (1: the paper's lowest FLL)")
        if architecture is not None and int(finalists) != 1:
            raise ValueError(
                f"finalists={finalists!r} chooses among searched networks; a fixed architecture has "
                f"none to choose from: use finalists=1"
            )
        self.space, self.budget = space, schedule
        self.num_finalists = int(finalists)
        self.search_rounds = 0 if architecture is not None else schedule.epochs * schedule.steps_per_epoch
        retrain = (
            (Stage(RETRAIN),)
            if self.num_finalists == 1
            else tuple(
                Stage(f"{RETRAIN}-{j}", schedule.retrain_epochs if j < self.num_finalists else None)
                for j in range(1, self.num_finalists + 1)
            )
        )
        stages = retrain if self.search_rounds == 0 else (Stage(SEARCH, self.search_rounds),) + retrain
        super().__init__(policy, update_kind="gradients", stages=stages, **kwargs)
        self.combine, self.fitness, self.final_pick, self.adam_scope = combine, fitness, final_pick, adam_scope
        self.lr = LR if lr is None else float(lr)
        self.weight_decay = WEIGHT_DECAY if weight_decay is None else float(weight_decay)
        self.init_seed = self.seed if init_seed is None else int(init_seed)
        self.secure = self.ckks is not None
        # Algorithm 2's server state, drawn in InProcessSearch's order: the generator, then the initial population
        self.rng = new_rng(self.seed, 0x5EA)
        self.population: list[tuple[int, ...]] = (
            [] if architecture is not None else space.random_population(schedule.population_size, self.rng)
        )
        self.controller = EvolutionaryOptimizer(space, schedule.controller_config(), self.seed, salt=0)
        self.training: list[tuple[int, ...]] = []  # the epoch's training population (warm-up: random)
        self.codes: list[tuple[int, ...]] = []  # this round's sampled codes
        self.epoch_losses: list[float | None] = []
        self.history: list[dict[str, Any]] = []  # one record per epoch (InProcessSearch.history's fields)
        self.chosen: tuple[int, ...] | None = None if architecture is None else space.check(architecture)
        self.selection: dict[str, Any] | None = None  # how the chosen architecture was selected
        self.best: dict[str, Any] | None = None  # retraining: the epoch with the best federated val accuracy
        self.finalists: list[dict[str, Any]] = []  # finalists > 1: the networks retrained to choose from
        self.finalist_best: list[dict[str, Any] | None] = []  # ... and the best epoch of each
        self.net: Any = None  # the server's torch module: the SuperNet, then the retrained network
        self.optimizer: Any = None  # its Adam (SuperNetOptimizer)
        self.keys: list[str] = []  # the arrays this round's clients are sent (and send back, as gradients)
        self._optimizer_state: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None
        self._federation: Federation | None = None

    def __repr__(self) -> str:
        return (
            f"FLAGCNSStrategy(num_clients={self.num_clients}, layers={self.space.num_layers}, "
            f"population={self.budget.population_size}, epochs={self.budget.epochs})"
        )

    # ------------------------------------------------------------------------------------------- helpers
    @property
    def searching(self) -> bool:
        return self.stage.name == SEARCH

    def position(self, server_round: int) -> tuple[int, int]:
        """``(epoch t, step k)`` of a search round (both 1-based)."""
        steps = self.budget.steps_per_epoch
        return (server_round - 1) // steps + 1, (server_round - 1) % steps + 1

    def _shape(self) -> tuple[int, int]:
        from .maths.supernet import io_dims

        model = self.bank.global_model or {}
        try:
            return io_dims(model)
        except KeyError:
            raise RuntimeError(
                f"the initial model is not an FL-AGCNS network (no input / output FC layer among "
                f"{list(model)[:4]}...): are the clients FL-AGCNS clients?"
            ) from None

    def _build_net(self) -> None:
        """The server's module and Adam for the current stage, from the bank's global model (and, after a resume,
        the checkpoint's Adam state)."""
        from .maths import ArchitectureNet, SuperNet, SuperNetOptimizer
        from ...tasks.torch_state import load_module_arrays

        in_dim, num_classes = self._shape()
        if self.searching:
            self.net = SuperNet(self.space, in_dim, num_classes)
            self.net.load_arrays(self.bank.global_model or {})
        else:
            assert self.chosen is not None
            self.net = ArchitectureNet(self.space, self.chosen, in_dim, num_classes)
            load_module_arrays(self.net, self.bank.global_model or {})
            self.keys = self.net.gradient_keys()
        self.optimizer = SuperNetOptimizer(
            self.net,
            lr=self.lr,
            weight_decay=self.weight_decay,
            scope=self.adam_scope if self.searching else "this-step",
        )
        if self._optimizer_state is not None:
            self.optimizer.load_state(*self._optimizer_state)
            self._optimizer_state = None

    def _fit_value(self, loss: float, accuracy: float) -> float:
        return -loss if self.fitness == "loss" else accuracy

    # --------------------------------------------------------------------------------------------- hooks
    def setup(self, federation: Federation) -> None:
        self._federation = federation
        self._build_net()

    def before_fit(self, server_round: int, clients: list[Node], federation: Federation) -> None:
        from .maths import sample_members

        self._federation = federation
        if not self.searching:
            return
        t, k = self.position(server_round)
        if k == 1:  # Algorithm 2: P, or during warm-up a fresh random population for the whole epoch
            self.training = (
                list(self.population)
                if self.budget.evolves(t)
                else self.space.random_population(self.budget.population_size, self.rng)
            )
            self.epoch_losses = []
        self.codes = sample_members(self.training, self.budget.sample_size, self.rng)
        self.keys = self.net.gradient_keys(self.codes)

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        config = super().fit_config(server_round)
        if self.searching:
            t, k = self.position(server_round)
            config.update(msg.SearchStep(tuple(self.codes), t, k).config())
        else:
            assert self.chosen is not None
            config.update(msg.Retrain(self.chosen).config())
        return config

    def client_model(self, proxy: Node) -> tuple[str, list[str] | None]:
        """Every client gets the same named arrays: the parameters this round trains (the sampled codes'
        sub-networks, or the retrained network's)."""
        return GLOBAL, list(self.keys)

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        config = super().evaluate_config(server_round)
        if self.chosen is not None and not self.searching:
            config.update(msg.Retrain(self.chosen).config())
        return config

    def configure_evaluate(self, server_round: int, arrays: Any, federation: Federation) -> list[tuple[Node, Any]]:
        if self.searching:  # the search is scored by its FEO phases, not by evaluate messages
            self.book.start(server_round)
            self.book.flush()
            return []
        return super().configure_evaluate(server_round, arrays, federation)

    def aggregate_updates(
        self, server_round: int, updates: list[Update], weights: list[float]
    ) -> Mapping[str, np.ndarray]:
        """Combine the clients' gradients and take one Adam step on the server's module (the weights are the
        clients' training-set sizes, whatever the aggregator says: Eq. 2)."""
        from .maths import combine_gradients

        if len(updates) == 1 and updates[0].client == CKKS_SUM:  # secure: the decrypted train-size weighted mean
            mean = updates[0].named(self.keys)
            if self.combine == "weighted":
                combined = mean
            else:  # uniform client weights: the sum is the mean times the number of clients
                total = float(updates[0].metrics[CKKS_TOTAL_WEIGHT])
                combined = {k: (np.asarray(v, np.float64) * total).astype(v.dtype) for k, v in mean.items()}
        else:
            combined = combine_gradients(
                [u.named(self.keys) for u in updates], [float(u.num_examples) for u in updates], self.combine
            )
        stepped = self.optimizer.step(combined)  # once-touched: also parameters no client sent this round
        new = dict(self.bank.global_model or {})
        params = self.optimizer.params
        for key in stepped:
            new[key] = params[key].detach().cpu().numpy().copy()
        return new

    def after_fit(self, server_round: int, updates: list[Update]) -> None:
        from .maths import federated_mean

        if not self.searching:
            return
        t, k = self.position(server_round)
        plain = [u for u in updates if u.client != CKKS_SUM and wire.TRAIN_LOSS in u.metrics]
        loss = (
            federated_mean([float(u.metrics[wire.TRAIN_LOSS]) for u in plain], [float(u.num_examples) for u in plain])
            if plain
            else math.nan
        )
        self.epoch_losses.append(_finite(loss))
        rec = self.book.start(server_round)
        rec["flagcns"] = {
            "epoch": t,
            "step": k,
            "codes": len(self.codes),
            "arrays": len(self.keys),
            "train_loss": _finite(loss),
        }
        if k == self.budget.steps_per_epoch:
            rec["flagcns"]["generation"] = self._end_epoch(t, server_round)

    def _end_epoch(self, t: int, server_round: int) -> dict[str, Any]:
        losses = [v for v in self.epoch_losses if v is not None]
        record: dict[str, Any] = {
            "epoch": t,
            "train_loss": float(np.mean(losses)) if losses else None,
            "evolved": self.budget.evolves(t),
        }
        if record["evolved"]:
            record.update(self._feo(t, server_round))
        self.history.append(record)
        return record

    def _feo(self, t: int, server_round: int) -> dict[str, Any]:
        """One FEO generation (Algorithm 1) at the end of epoch ``t``."""
        from .maths import assemble_population

        space, budget = self.space, self.budget
        assert self._federation is not None
        clients = self.all_clients(self._federation)
        start = time.perf_counter()
        gamma = budget.gamma(t)
        phase = self.phases.begin(msg.FEO_PHASE, server_round, timeout=self.round_timeout)
        self.controller.set_population(self.population)
        pool = self.controller.propose()
        scores = self.federated_scores(phase, clients, pool, server_round)
        if scores is None:
            self.book.add_phase(phase.end())
            log(WARNING, "round %s: no client scored the controller's pool; FEO generation %s skipped", server_round, t)
            return {"gamma": gamma, "skipped": "no client scored the controller's pool"}
        p_fl = self.controller.select([self._fit_value(loss, acc) for loss, acc in scores])
        ranked: list[list[tuple[int, ...]]] = []
        weights: list[float] = []
        evaluations = 0
        if gamma > 0:  # at gamma = 0 the clients' rankings get no seat in P
            request = msg.EvolveRequest(tuple(p_fl), tuple(self.population), t)
            arrays, values = request.encode()
            for reply in phase.send(
                msg.EVOLVE, clients, PhaseMessage(arrays, values, model=self.net.arrays()), require_all=False
            ):
                try:
                    answer = msg.EvolveReply.decode(reply.arrays, reply.values)
                    codes = [space.check(c) for c in answer.ranked]
                except Exception as exc:  # noqa: BLE001 (a malformed ranking is left out, named)
                    log(
                        WARNING,
                        "round %s: the ranking of client %s is malformed (%s); left out",
                        server_round,
                        reply.client,
                        exc,
                    )
                    continue
                ranked.append(codes)
                weights.append(float(answer.num_train))
                evaluations += answer.evaluations
        if ranked and sum(weights) > 0:
            assembled = assemble_population(space, p_fl, ranked, gamma, weights, budget.population_size)
        else:  # no client ranking (gamma = 0, or none arrived): the controller's alone
            assembled = assemble_population(space, p_fl, [[]], 0.0, [1.0], budget.population_size)
        self.population = list(assembled.population)
        canonical = [space.canonical(c) for c in pool]
        best = scores[canonical.index(space.canonical(p_fl[0]))]
        n_fl, n_clients = assembled.counts()
        self.book.add_phase(phase.end(pool=len(pool), clients_ranked=len(ranked)))
        return {
            "gamma": gamma,
            "best_code": list(p_fl[0]),
            "best_fll": _finite(best[0]),
            "best_val_accuracy": _finite(best[1]),
            "from_controller": n_fl,
            "from_clients": n_clients if ranked else [],
            "pool": len(pool),
            "evaluations": evaluations,
            "feo_seconds": time.perf_counter() - start,
        }

    def federated_scores(
        self, phase: Phase, clients: list[Node], codes: Sequence[tuple[int, ...]], server_round: int
    ) -> list[tuple[float, float]] | None:
        """``(FLL, federated validation accuracy)`` of each code (Eq. 1, validation-size weighted) from the clients
        that answer ``flagcns.evaluate`` (None if none does): their per-client values, or in secure mode only the
        decrypted sums."""
        from .maths import federated_mean

        request = msg.EvaluateRequest(tuple(codes), encrypted=self.secure)
        arrays, values = request.encode()
        replies = phase.send(
            msg.EVALUATE, clients, PhaseMessage(arrays, values, model=self.net.arrays(codes)), require_all=False
        )
        count = len(codes)
        if self.secure:
            assert self.ckks is not None
            uploads = []
            for reply in replies:
                try:
                    enc = msg.EncryptedScores.decode(reply.arrays, reply.values)
                except Exception as exc:  # noqa: BLE001
                    log(
                        WARNING,
                        "round %s: the encrypted scores of client %s are malformed (%s); left out",
                        server_round,
                        reply.client,
                        exc,
                    )
                    continue
                uploads.append(
                    Upload(
                        reply.proxy,
                        reply.client,
                        self.partition(reply.proxy),
                        enc.upload.arrays(),
                        enc.upload.metrics(),
                        enc.num_val,
                    )
                )
            total, info = self.ckks.sum_checked(
                server_round,
                uploads,
                3 * count + 1,
                self.round_timeout,
                purpose=msg.SCORES_PURPOSE,
                phase_name=msg.DECRYPT_PHASE,
            )
            phase.record.setdefault("secure", []).append(
                {k: v for k, v in info.items() if k not in ("bytes_down", "bytes_up")}
            )
            phase.record["bytes_down"] += int(info.get("bytes_down", 0))
            phase.record["bytes_up"] += int(info.get("bytes_up", 0))
            return None if total is None else msg.scores_from_sum(total, count)
        rows = []
        for reply in replies:
            try:
                scores = msg.Scores.decode(reply.arrays, reply.values)
                if len(scores.losses) != count:
                    raise ValueError(f"{len(scores.losses)} scores for {count} codes")
            except Exception as exc:  # noqa: BLE001
                log(
                    WARNING,
                    "round %s: the scores of client %s are malformed (%s); left out",
                    server_round,
                    reply.client,
                    exc,
                )
                continue
            rows.append(scores)
        if not rows:
            return None
        sizes = [float(s.num_val) for s in rows]
        return [
            (
                federated_mean([float(s.losses[j]) for s in rows], sizes),
                federated_mean([float(s.accuracies[j]) for s in rows], sizes),
            )
            for j in range(count)
        ]

    def begin_stage(self, stage: Stage, server_round: int, federation: Federation) -> Mapping[str, np.ndarray] | None:
        """``retrain`` starts: Algorithm 2 lines 19-22 (the member of P with the lowest FLL; ``final_pick=
        "accuracy"``: with the highest federated validation accuracy), then its network with fresh seeded weights
        and a fresh Adam. With finalists: ``retrain-1`` scores P and keeps the K best networks by that pick;
        ``retrain-j`` retrains the j-th."""
        from .maths import final_candidates

        if stage.name == SEARCH:
            return None
        self._federation = federation
        if self.num_finalists > 1:
            return self._begin_finalist(int(stage.name.rsplit("-", 1)[1]) - 1, server_round, federation)
        if self.chosen is None:
            scores = self._final_scores(server_round, federation)
            try:
                ((code, fll, accuracy, _),) = final_candidates(self.space, self.population, scores, 1, self.final_pick)
            except Exception as exc:  # noqa: BLE001 (every FLL NaN: the SuperNet diverged)
                raise RuntimeError(f"round {server_round}: {exc}") from None
            self.chosen = code
            self.selection = {
                "code": list(code),
                "describe": self.space.short(code),
                "fll": _finite(fll),
                "val_accuracy": _finite(accuracy),
                "population": len(self.population),
                **self._population_scores(scores),
            }
            log(
                INFO,
                "FL-AGCNS chose %s (FLL %.4f, federated validation accuracy %.4f; picked by %s)",
                self.space.short(code),
                fll,
                accuracy,
                self.final_pick,
            )
        return self._fresh_network(server_round)

    def _population_scores(self, scores: Sequence[tuple[float, float]]) -> dict[str, Any]:
        """The selection record's account of the final P: the pick's rule and every member's code, FLL and
        federated validation accuracy, in P's order (``benchmarks/flagcns.py --parts population`` retrains them to
        correlate the SuperNet's scores with retrained FLACC)."""
        return {
            "pick": self.final_pick,
            "final_population": [
                {"code": list(c), "fll": _finite(s[0]), "val_accuracy": _finite(s[1])}
                for c, s in zip(self.population, scores)
            ],
        }

    def _final_scores(self, server_round: int, federation: Federation) -> list[tuple[float, float]]:
        """Algorithm 2 lines 19-21: every client scores the final P (phase ``flagcns-final``)."""
        phase = self.phases.begin(msg.FINAL_PHASE, server_round, timeout=self.round_timeout)
        scores = self.federated_scores(phase, self.all_clients(federation), self.population, server_round)
        self.book.add_phase(phase.end(population=len(self.population)))
        if scores is None:
            raise RuntimeError(
                f"round {server_round}: no client scored the final population, so no architecture can be chosen"
            )
        return scores

    def _begin_finalist(self, j: int, server_round: int, federation: Federation) -> Mapping[str, np.ndarray]:
        """Stage ``retrain-(j+1)``: the first scores P and keeps the K best networks by the final pick (fewer when
        P has fewer with a finite value: the last one is then retrained again); each retrains its finalist from
        scratch."""
        from .maths import final_candidates

        if not self.finalists:
            scores = self._final_scores(server_round, federation)
            try:
                top = final_candidates(self.space, self.population, scores, self.num_finalists, self.final_pick)
            except Exception as exc:  # noqa: BLE001 (every FLL NaN: the SuperNet diverged)
                raise RuntimeError(f"round {server_round}: {exc}") from None
            self.finalists = [
                {
                    "code": list(code),
                    "describe": self.space.short(code),
                    "fll": _finite(fll),
                    "val_accuracy": _finite(accuracy),
                }
                for code, fll, accuracy, _ in top
            ]
            self.finalist_best = [None] * self.num_finalists
            self.selection = {
                "rule": "finalists",
                "finalists": self.num_finalists,
                "found": len(top),
                "population": len(self.population),
                "candidates": self.finalists,
                **self._population_scores(scores),
            }
            if len(top) < self.num_finalists:
                log(
                    WARNING,
                    "round %s: only %d of the final population's networks have a finite FLL; "
                    "finalists=%d retrains the last of them again",
                    server_round,
                    len(top),
                    self.num_finalists,
                )
            log(INFO, "FL-AGCNS finalists: %s", "; ".join(f["describe"] for f in self.finalists))
        self.chosen = tuple(self.finalists[min(j, len(self.finalists) - 1)]["code"])
        self.best = None
        arrays = self._fresh_network(server_round)
        rec = self.book.start(server_round)["flagcns"]
        rec["finalist"] = j + 1
        if j:  # the selection is in the first finalist's record
            rec.pop("selection")
        return arrays

    def _fresh_network(self, server_round: int) -> Mapping[str, np.ndarray]:
        """The chosen architecture's network with fresh seeded weights and a fresh Adam (the stage's model)."""
        from .maths import ArchitectureNet, SuperNetOptimizer
        from ...tasks.torch_state import module_arrays

        assert self.chosen is not None
        in_dim, num_classes = self._shape()
        net = ArchitectureNet(self.space, self.chosen, in_dim, num_classes, seed=self.init_seed)
        self.net, self.optimizer = net, SuperNetOptimizer(net, lr=self.lr, weight_decay=self.weight_decay)
        self.keys = net.gradient_keys()
        self.book.start(server_round)["flagcns"] = {
            "selection": self.selection,
            "architecture": list(self.chosen),
            "parameters": self.parameters(),
        }
        return module_arrays(net)

    def parameters(self) -> int:
        """Parameters of the retrained network (all of them, as the paper counts; with finalists, of the chosen
        one, which after the last round need not be the last one retrained)."""
        from .maths import parameter_count

        if self.searching or self.net is None or self.chosen is None:
            return 0
        if self.num_finalists > 1:
            return parameter_count(self.space, self.chosen, *self._shape())
        return int(sum(p.numel() for p in self.net.parameters()))

    def after_evaluate(self, server_round: int, evaluations: list[ClientEvaluation]) -> None:
        """Retraining: the first epoch with the best federated validation accuracy (the reference's choice) and its
        FLACC; after the last round, the run's result in that round's record (``flagcns.result``)."""
        from .maths import federated_mean

        if server_round <= self.search_rounds:
            return
        rows = [e.metrics for e in evaluations]
        val = (
            federated_mean(
                [float(m.get(wire.VAL_ACCURACY, math.nan)) for m in rows], [float(m.get(wire.NUM_VAL, 0)) for m in rows]
            )
            if rows
            else math.nan
        )
        test = (
            federated_mean(
                [float(m.get(wire.ACCURACY, math.nan)) for m in rows], [float(m.get(wire.NUM_TEST, 0)) for m in rows]
            )
            if rows
            else math.nan
        )
        epoch = server_round - self.search_rounds
        if self.num_finalists > 1:
            epoch = (epoch - 1) % self.budget.retrain_epochs + 1
        if math.isfinite(val) and (self.best is None or val > self.best["val_accuracy"]):
            self.best = {
                "epoch": epoch,
                "round": server_round,
                "val_accuracy": val,
                "flacc": _finite(test),
                "inference_s": float(sum(m.get(msg.INFERENCE_S, 0.0) for m in rows)),
            }
        if self.num_finalists > 1:
            self._finalist_done(server_round)
        if server_round == self.num_rounds:
            self.book.start(server_round).setdefault("flagcns", {})["result"] = self.result()

    def _finalist_done(self, server_round: int) -> None:
        """Keep the current finalist's best epoch; after the last round, choose among the finalists."""
        from .maths import pick_finalist

        j = (server_round - self.search_rounds - 1) // self.budget.retrain_epochs
        self.finalist_best[min(j, self.num_finalists - 1)] = self.best
        if server_round != self.num_rounds:
            return
        vals = [None if b is None else b["val_accuracy"] for b in self.finalist_best]
        try:
            kept = pick_finalist(vals)
        except Exception as exc:  # noqa: BLE001 (no finalist was ever evaluated)
            raise RuntimeError(f"round {server_round}: {exc}") from None
        self.chosen = tuple(self.finalists[min(kept, len(self.finalists) - 1)]["code"])
        self.best = self.finalist_best[kept]
        assert self.selection is not None
        finalist = self.finalists[min(kept, len(self.finalists) - 1)]
        self.selection = {
            **self.selection,
            "kept": kept + 1,
            "code": list(self.chosen),
            "describe": self.space.short(self.chosen),
            "fll": finalist["fll"],
            "val_accuracy": finalist["val_accuracy"],
            "retrained": [
                None if b is None else {k: b[k] for k in ("epoch", "val_accuracy", "flacc")} for b in self.finalist_best
            ],
        }
        log(
            INFO,
            "FL-AGCNS kept finalist %d of %d: %s (validation accuracy %.4f)",
            kept + 1,
            self.num_finalists,
            self.space.short(self.chosen),
            vals[kept],
        )

    def result(self) -> dict[str, Any]:
        """The run's outcome: the architecture, how it was chosen, its parameters and its best retraining epoch."""
        assert self.chosen is not None
        return {
            "architecture": list(self.chosen),
            "describe": self.space.short(self.chosen),
            "parameters": self.parameters(),
            "selection": self.selection,
            **(self.best or {}),
        }

    # --------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        from .maths import rng_state_json

        arrays, values = self.optimizer.state() if self.optimizer is not None else ({}, None)
        return {
            **super().state_dict(),
            "flagcns": {
                "population": [list(c) for c in self.population],
                "rng": rng_state_json(self.rng),
                "controller": self.controller.state(),
                "training": [list(c) for c in self.training],
                "epoch_losses": list(self.epoch_losses),
                "history": self.history,
                "chosen": None if self.chosen is None else list(self.chosen),
                "selection": self.selection,
                "best": self.best,
                "optimizer": {"arrays": arrays, "values": values},
                "finalists": self.finalists,
                "finalist_best": self.finalist_best,
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from .maths import EvolutionaryOptimizer, rng_from_json

        super().load_state_dict(state)
        own = state.get("flagcns")
        if own is None:
            raise RuntimeError("the checkpoint holds no FL-AGCNS state (was it written by another method?)")
        space = self.space
        self.population = [space.check(c) for c in own["population"]]
        self.rng = rng_from_json(own["rng"])
        self.controller = EvolutionaryOptimizer.from_state(space, own["controller"])
        self.training = [space.check(c) for c in own["training"]]
        self.epoch_losses = list(own["epoch_losses"])
        self.history = [dict(r) for r in own["history"]]
        self.chosen = None if own["chosen"] is None else space.check(own["chosen"])
        self.selection, self.best = own["selection"], own["best"]
        self.finalists = [dict(f) for f in own.get("finalists", [])]  # checkpoints before flagcns.finalists: none
        self.finalist_best = list(own.get("finalist_best", []))
        opt = own["optimizer"]
        self._optimizer_state = None if opt["values"] is None else (dict(opt["arrays"]), opt["values"])
