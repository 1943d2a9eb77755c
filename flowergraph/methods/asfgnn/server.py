"""ASFGNN (Zheng et al., *ASFGNN: Automated Separated-Federated Graph Neural Network*): each client trains its
own GraphSAGE message passing (SGNN, private) and a copy of a shared discriminator (FGNN); the server averages the
discriminators and the clients' label counts and metrics, each client mixes the average into its own
discriminator with the Jensen-Shannon weight of its label distribution against the global one, and the server
tunes every client's hyper-parameters with Bayesian optimisation (SMAC3), each trial being a federated run.

The maths and the specification of every number are the Flower-free core, :mod:`flowergraph.methods.asfgnn.maths`
(its docstring lists the deviations from the paper); this strategy and :class:`flowergraph.methods.asfgnn.client.
ASFGNNClient` reproduce its reference loops (:mod:`flowergraph.methods.asfgnn.maths.reference`) number for number.

Trials and rounds
-----------------
A run is ``trials`` trials of ``T`` rounds each plus one closing evaluation round (``T + 1`` rounds per trial);
round r belongs to trial ``k = (r - 1) // (T + 1)`` at position ``p = (r - 1) % (T + 1) + 1``. When a trial starts
(its first round) the strategy asks the search driver for a configuration (``search=none``: the run's one
configuration), stores each client's hyper-parameters in its ``client_table`` entry, asks one client (the lowest
partition id: the reference loops' client 0) for the trial's seeded initial shared part (phase ``asfgnn.init``),
and resets the global model to it: the discriminator's width is the trial's hidden size. Each client gets its own
hyper-parameters in its fit config; a client whose stored model belongs to another trial starts afresh (new
SGNN, new discriminator, new Adam). After the closing round the trial's objective
``M = max_p mean_i val_acc_i`` (over the T + 1 evaluations of the trial, Algorithm 4 line 11) is told to the
driver as the cost ``1 - M``; the trial's test accuracy is the mean client test accuracy at the first
evaluation reaching M. Records in ``rounds.jsonl`` carry ``trial`` and ``trial_round``; the round that closes
a trial carries ``trial_result``; ``summary.json`` names the best trial, its configuration and test accuracy
(``search``); the checkpoint holds the driver's state (every trial asked, its configuration and cost), the
trial in progress and the finished trials, so a tuning run resumes between trials and within one (the clients'
SGNNs, discriminators and Adam states are in their client checkpoints).

Wire protocol (training and evaluation messages; keys in :mod:`flowergraph.methods.asfgnn.wire`)
---------------------------------------------------------------------------
* phase ``asfgnn.init`` (``get_properties``, once per trial, to one client): the trial's hyper-parameters of that
  client -> its seeded initial shared arrays (SFGNN: ``fgnn.lin1.weight`` l x l, ``fgnn.lin1.bias`` l,
  ``fgnn.lin2.weight`` J x l, ``fgnn.lin2.bias`` J; FL: also every ``sgnn.*`` array; SP/CM: none) and J.
  Randomly initialised weights, no data.
* ``fit`` (every round): server -> client the global model (the shared part and the statistics arrays, named in
  ``fg.keys``) and the client's :class:`~flowergraph.methods.asfgnn.wire.TrialInstruction` (trial, position, train or
  evaluate only, its hyper-parameters); client -> server the same names: the shared part after its local round
  and its statistics (label counts, validation/test/train accuracy of the model that entered the round, loss),
  ``num_examples`` = the update's weight (1; FL: its training-node count with ``weighting=train-size``), metrics
  ``{partition_id, fg.keys}`` and nothing else.
* no ``evaluate`` message: the evaluation of round r's model travels inside round r + 1's fit (and the closing
  round's), as statistics, so it is aggregated like the rest.

What the server learns
----------------------
With ``secure-agg=none`` each client's reply: its discriminator (SFGNN) or whole model (FL), its label counts and
accuracies. With ``secure-agg=ckks`` (2 clients, as in the paper) or ``secagg+`` (>= 3 clients) only the weighted
mean of the replies: the averaged discriminator, the summed label counts ``N_s`` (hence ``Q_s``) and the mean
(and pooled) accuracies and loss; never a single client's discriminator, counts or metric. The SGNN never leaves
a client (SFGNN, SP, CM); its hyper-parameters are the server's (it proposes them). The JS weight is computed on
each client from its own ``Q_i`` and the ``N_s`` it receives. The per-client initial discriminator sent in phase
``asfgnn.init`` is a random initialisation.

Aggregation: every array is the weighted mean of the clients' arrays with the update weights (SFGNN, SP, CM: equal
weights ``1/I``, Algorithm 2 line 17; FL: FedAvg's training-node counts, or equal with ``weighting=uniform``); the
statistics arrays are divided by the weight on the client, so the server recovers plain sums over the clients
(see :mod:`flowergraph.methods.asfgnn.wire`). Under CKKS the aggregate comes from the decrypted sum
(one update labelled ``CKKS_SUM`` in :meth:`aggregate_updates`); under SecAgg+ every reply the strategy sees is the same
masked mean.
"""

from __future__ import annotations

import math
import time
from logging import INFO, WARNING
from typing import Any, Mapping

import numpy as np
from flwr.common.logger import log

from ...strategies.nodes import Federation, Instruction, Node, Scalar
from .maths.divergence import average_arrays
from .maths.search import SearchDriver, SearchSpace, load_driver, make_driver
from ...wire import PhaseMessage
from . import wire as aw
from ...wire.secure import CKKS_SUM, CKKS_SUMMED
from ...strategies.aggregation import Update, WeightedMean
from ...strategies.bank import GLOBAL, NamedArrays
from ...strategies.base import FederatedStrategy
from ...strategies.phases import PhaseError
from ...strategies.policy import FederationPolicy, resolve_policy

SEARCHES = ("none", "smac", "grid", "random")
SHARES = ("fgnn", "all", "none")
TIE = 1e-9  # mean validation accuracies closer than this are ties (the first round reaching the best wins)


def best_evaluation(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first evaluation of a trial whose mean validation accuracy is the trial's best (None if none has one)."""
    scored = [h for h in history if h.get("mean_val") is not None and not math.isnan(h["mean_val"])]
    if not scored:
        return None
    top = max(h["mean_val"] for h in scored)
    return next(h for h in scored if h["mean_val"] >= top - TIE)


class ASFGNNStrategy(FederatedStrategy):
    """ASFGNN's server (see the module docstring).

    ``share``: what the clients share (``fgnn``: SFGNN; ``all``: FL; ``none``: SP and CM); ``trial_rounds``: T;
    ``trials``: how many trials the search runs (``search="none"``: 1); ``search``: ``none`` (one trial with
    ``config``), ``smac``, ``grid`` or ``random`` over ``space``; ``config``: the configuration of a ``none`` run
    (``{"hidden": l, "clients": [{"dropout", "l2", "depth", "lr"}, ...]}``, one entry per client);
    ``driver_settings``: keyword arguments of the driver (SMAC: ``seed``, ``facade``, ``initial_design_configs``;
    grid: ``shuffle_seed``; random: ``seed``); ``weighting``: ``train-size`` or ``uniform`` (the update weights the
    clients report: SFGNN/SP/CM always 1). Every other argument is
    :class:`~flowergraph.strategies.FederatedStrategy`'s.
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        share: str = "fgnn",
        trial_rounds: int = 200,
        trials: int = 1,
        search: str = "none",
        config: Mapping[str, Any] | None = None,
        space: SearchSpace | None = None,
        driver_settings: Mapping[str, Any] | None = None,
        weighting: str = "uniform",
        initial_parameters: Any = None,
        **kwargs: Any,
    ) -> None:
        if share not in SHARES:
            raise ValueError(f"unknown share {share!r}; valid choices: {', '.join(SHARES)}")
        if search not in SEARCHES:
            raise ValueError(f"unknown search {search!r}; valid choices: {', '.join(SEARCHES)}")
        if int(trial_rounds) < 1 or int(trials) < 1:
            raise ValueError(f"trial_rounds and trials must be >= 1, got {trial_rounds}, {trials}")
        if search == "none" and (config is None or int(trials) != 1):
            raise ValueError("search='none' runs one trial (trials=1) with the given config")
        if search != "none" and space is None:
            raise ValueError(f"search={search!r} needs a search space")
        kwargs.pop("aggregator", None)  # ASFGNN averages itself (plain means; secure aggregates)
        policy = resolve_policy(
            policy, {k: kwargs.pop(k) for k in list(kwargs) if k in FederationPolicy.field_names()}, type(self).__name__
        )
        policy = policy.replace(stateful_clients=True, fused_eval=False)
        super().__init__(
            policy,
            aggregator=WeightedMean(weighting),
            initial_parameters=[] if initial_parameters is None else initial_parameters,
            **kwargs,
        )
        self.share = share
        self.trial_rounds = int(trial_rounds)
        self.trials = int(trials)
        self.search = search
        self.config = dict(config) if config is not None else None
        self.space = space
        self.driver_settings = dict(driver_settings or {})
        self.driver: SearchDriver | None = (
            None if search == "none" else make_driver(search, space, self.trials, **self.driver_settings)
        )  # type: ignore[arg-type]
        self.trial: dict[str, Any] | None = None  # the trial in progress (or the last one, once finished)
        self.results: list[dict[str, Any]] = []  # finished trials
        capacity = self.trials * (self.trial_rounds + 1)
        if policy.num_rounds is not None and policy.num_rounds > capacity:
            raise ValueError(
                f"num_rounds={policy.num_rounds} exceeds trials x (trial rounds + 1) = {self.trials} x "
                f"({self.trial_rounds} + 1) = {capacity}"
            )
        if policy.num_rounds is not None and policy.num_rounds < capacity:
            log(
                WARNING,
                "asfgnn: the run has %d rounds, %d trial(s) of %d + 1 rounds need %d: it covers %d complete "
                "trial(s) (resume with more rounds to go on)",
                policy.num_rounds,
                self.trials,
                self.trial_rounds,
                capacity,
                policy.num_rounds // (self.trial_rounds + 1),
            )

    def __repr__(self) -> str:
        return (
            f"ASFGNNStrategy(num_clients={self.num_clients}, share={self.share!r}, search={self.search!r}, "
            f"trials={self.trials}, trial_rounds={self.trial_rounds})"
        )

    # ---------------------------------------------------------------------------------------------- trials
    def position(self, server_round: int) -> tuple[int, int]:
        """(trial index, round within the trial: 1..T training, T + 1 the closing evaluation)."""
        k, rest = divmod(int(server_round) - 1, self.trial_rounds + 1)
        return k, rest + 1

    def before_fit(self, server_round: int, clients: list[Node], federation: Federation) -> None:
        k, p = self.position(server_round)
        if self.trial is None or self.trial["index"] != k:
            self._start_trial(k, server_round, federation)
        rec = self.book.start(server_round)
        rec["trial"], rec["trial_round"] = k, p
        if p == self.trial_rounds + 1:
            rec["trial_closing"] = True

    def _next_config(self, k: int) -> dict[str, Any]:
        if self.driver is None:
            if k != 0:
                raise RuntimeError(f"search='none' runs one trial; round of trial {k} requested")
            assert self.config is not None
            return dict(self.config)
        trial = self.driver.ask()
        if trial is None:
            raise RuntimeError(f"the {self.search} search has no trial {k} left (budget {self.trials})")
        if trial.index != k:
            raise RuntimeError(f"the {self.search} search proposed trial {trial.index}, the run is at trial {k}")
        return trial.config

    def _start_trial(self, k: int, server_round: int, federation: Federation) -> None:
        config = self._next_config(k)
        hps = self.client_hyperparams(config)
        for partition, hp in enumerate(hps):
            self.client_entry(partition).update(trial=k, hyperparams=hp)
        proxies = [p for p in self.all_clients(federation) if self.partition(p) is not None]
        phase = self.phases.begin("asfgnn-init", server_round, timeout=self.round_timeout)
        reply = None
        for proxy in proxies:  # the lowest partition id (the reference loops' client 0) answers
            pid = self.partition(proxy)
            assert pid is not None
            request = aw.InitRequest(k, hps[pid] if pid < len(hps) else hps[0])
            try:
                (raw,) = phase.send(aw.INIT, [proxy], PhaseMessage(values=request.values()), require_all=True)
                reply = aw.InitReply.decode(raw.arrays, raw.values)
                break
            except PhaseError as exc:
                log(
                    WARNING,
                    "asfgnn: client %s could not send trial %d's initial model (%s); asking the next",
                    pid,
                    k,
                    exc,
                )
        if reply is None:
            raise RuntimeError(f"asfgnn: no client sent trial {k}'s initial model")
        record = phase.end(trial=k)
        self.book.start(server_round)
        self.book.add_phase(record)
        self.bank.reset(global_model={**reply.arrays, **aw.empty_statistics(reply.num_classes)})
        self.trial = {
            "index": k,
            "config": config,
            "first_round": int(server_round),
            "history": [],
            "finished": False,
            "started_s": float(self.book.elapsed()),
        }
        self.book.start(server_round)["trial_started"] = {"trial": k, "config": config}
        log(INFO, "asfgnn: trial %d starts with round %d: %s", k, server_round, config)

    def client_hyperparams(self, config: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Per client: ``{"hidden", "depth", "dropout", "l2", "lr"}`` of a configuration (validated)."""
        if self.space is not None:
            config = self.space.validate(config)
        return [
            {
                "hidden": int(config["hidden"]),
                "depth": int(c["depth"]),
                "dropout": float(c["dropout"]),
                "l2": float(c["l2"]),
                "lr": float(c["lr"]),
            }
            for c in config["clients"]
        ]

    # -------------------------------------------------------------------------------------------- messages
    def client_model(self, proxy: Node) -> tuple[str, list[str] | None]:
        return GLOBAL, list(self.bank.global_model or {})  # the names always travel (model + statistics)

    def client_config(self, server_round: int, proxy: Node, config: dict[str, Scalar], kind: str) -> dict[str, Scalar]:
        """A fit tells each client the trial, the trial's round and its own hyper-parameters."""
        if kind != "fit":
            return config
        k, p = self.position(server_round)
        pid = self.partition(proxy)
        entry = self.client_table.get(int(pid)) if pid is not None else None
        if entry is None or "hyperparams" not in entry:
            raise RuntimeError(
                f"asfgnn: no hyper-parameters for client {pid} (node {proxy.cid}); the "
                f"configuration has {len(self.client_table)} clients"
            )
        return {**config, **aw.TrialInstruction(k, p, p <= self.trial_rounds, entry["hyperparams"]).encode()}

    def configure_evaluate(
        self, server_round: int, arrays: Any, federation: Federation
    ) -> list[tuple[Node, Instruction]]:
        """No evaluate message: every evaluation travels, aggregated, inside the next fit (see the module
        docstring). Closes the round's record."""
        self.book.start(server_round)
        self.book.flush()
        return []

    # ----------------------------------------------------------------------------------------- aggregation
    def aggregate_updates(self, server_round: int, updates: list[Update], weights: list[float]) -> NamedArrays | None:
        like = self.bank.global_model or {}
        named = [u.named(list(like)) for u in updates]
        aggregate = average_arrays(named, weights)
        if self.secure_agg == "none":  # the server sees each reply anyway: per-client rows for the records
            rec = self.book.start(server_round)
            for update, arrays in zip(updates, named):
                row = aw.RoundAggregate.from_aggregate(arrays, 1)
                rec.setdefault("clients", {}).setdefault(update.client, {}).update(
                    {
                        "val_accuracy": row.mean("val_accuracy", "has_val"),
                        "accuracy": row.mean("accuracy", "has_test"),
                        "train_loss": row.mean("train_loss", "has_loss"),
                    }
                )
        if len(updates) == 1 and updates[0].client == CKKS_SUM:  # secure-agg=ckks: the decrypted mean of n clients
            return self._absorb(server_round, aggregate, int(updates[0].metrics[CKKS_SUMMED]))
        return self._absorb(server_round, aggregate, len(updates))

    def _absorb(self, server_round: int, aggregate: Mapping[str, np.ndarray], clients: int) -> NamedArrays:
        """The new global model from the round's aggregate, and the round's aggregated evaluation."""
        like = self.bank.global_model or {}
        stats = aw.RoundAggregate.from_aggregate(aggregate, clients)
        new = {k: np.asarray(aggregate[k]).astype(like[k].dtype, copy=False) for k in like if k not in aw.STAT_NAMES}
        new.update(stats.downstream(like))
        k, p = self.position(server_round)
        entry = {
            "round": int(server_round),
            "trial_round": p,
            "clients": clients,
            "mean_val": stats.mean("val_accuracy", "has_val"),
            "mean_test": stats.mean("accuracy", "has_test"),
            "mean_train": stats.mean("train_accuracy", "has_train"),
            "pooled_val": stats.pooled("val_correct", "num_val"),
            "pooled_test": stats.pooled("test_correct", "num_test"),
            "owner_mean_val": stats.mean("owner_mean_val", "has_val"),
            "owner_mean_test": stats.mean("owner_mean_test", "has_test"),
            "train_loss": stats.mean("train_loss", "has_loss"),
        }
        if self.trial is not None and self.trial["index"] == k:
            self.trial["history"].append(entry)
        rec = self.book.start(server_round)
        rec["asfgnn"] = {
            **{key: v for key, v in entry.items() if key != "round"},
            "label_counts": [int(c) for c in stats.counts],
        }
        # the evaluation in this round's statistics is of the model that entered the round (round r - 1's)
        rec.update(
            accuracy=entry["mean_test"],
            mean_client_accuracy=entry["mean_test"],
            val_accuracy=entry["mean_val"],
            pooled_accuracy=entry["pooled_test"],
            train_loss=entry["train_loss"] if p <= self.trial_rounds else None,
        )
        return new

    def after_fit(self, server_round: int, updates: list[Update]) -> None:
        k, p = self.position(server_round)
        if (
            p == self.trial_rounds + 1
            and self.trial is not None
            and self.trial["index"] == k
            and not self.trial["finished"]
        ):
            self._finish_trial(server_round)

    def _finish_trial(self, server_round: int) -> None:
        assert self.trial is not None
        trial = self.trial
        best = best_evaluation(trial["history"])
        best_val = float(best["mean_val"]) if best is not None else float("nan")
        cost = 1.0 - best_val if best is not None else 1.0
        result = {
            "trial": trial["index"],
            "config": trial["config"],
            "cost": cost,
            "best_val": best_val,
            "test_at_best": None if best is None else best["mean_test"],
            "owner_test_at_best": None if best is None else best["owner_mean_test"],
            "pooled_test_at_best": None if best is None else best["pooled_test"],
            "best_trial_round": None if best is None else best["trial_round"],
            "final_val": trial["history"][-1]["mean_val"] if trial["history"] else None,
            "final_test": trial["history"][-1]["mean_test"] if trial["history"] else None,
            "evaluations": len(trial["history"]),
            "first_round": trial["first_round"],
            "last_round": int(server_round),
            "time_s": float(self.book.elapsed()) - float(trial.get("started_s", 0.0)),
        }
        if self.driver is not None:
            self.driver.tell(int(trial["index"]), float(cost))
        trial["finished"] = True
        self.results.append(result)
        self.book.start(server_round)["trial_result"] = result
        log(
            INFO,
            "asfgnn: trial %d finished: best mean validation accuracy %.4f (trial round %s), test %.4s",
            trial["index"],
            best_val,
            result["best_trial_round"],
            result["test_at_best"],
        )
        self._annotate()

    def best_trial(self) -> dict[str, Any] | None:
        """The finished trial with the lowest cost (the earliest on ties)."""
        return min(self.results, key=lambda r: (r["cost"], r["trial"])) if self.results else None

    def _annotate(self) -> None:
        recorder = self.recorder
        if recorder is None or not hasattr(recorder, "set_summary"):
            return
        best = self.best_trial()
        recorder.set_summary(
            "search",
            {
                "driver": self.search,
                "trials_planned": self.trials,
                "trial_rounds": self.trial_rounds,
                "trials_finished": len(self.results),
                "best_trial": None if best is None else best["trial"],
                "best_config": None if best is None else best["config"],
                "best_val_accuracy": None if best is None else best["best_val"],
                "best_test_accuracy": None if best is None else best["test_at_best"],
                "best_trial_round": None if best is None else best["best_trial_round"],
                "trials": [
                    {
                        "trial": r["trial"],
                        "cost": r["cost"],
                        "best_val": r["best_val"],
                        "test_at_best": r["test_at_best"],
                        "time_s": r["time_s"],
                    }
                    for r in self.results
                ],
            },
        )

    # --------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "asfgnn": {
                "driver": None if self.driver is None else self.driver.export_state(),
                "trial": self.trial,
                "results": self.results,
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        own = state.get("asfgnn") or {}
        self.results = [dict(r) for r in own.get("results") or []]
        self.trial = dict(own["trial"]) if own.get("trial") else None
        if self.driver is not None and own.get("driver") is not None:
            started = time.perf_counter()
            self.driver = load_driver(own["driver"])
            log(
                INFO,
                "asfgnn: %s search restored with %d finished trial(s) in %.1f s",
                self.search,
                len(self.driver.finished),
                time.perf_counter() - started,
            )
            if self.trial is not None and not self.trial.get("finished"):  # resumed inside a trial
                again = self.driver.ask()  # the driver offers the pending trial again: take it back
                if again is None or again.index != self.trial["index"] or again.config != self.trial["config"]:
                    raise RuntimeError(
                        f"asfgnn: the restored {self.search} search does not hold trial "
                        f"{self.trial['index']} in progress as the checkpoint does"
                    )
        self._annotate()
