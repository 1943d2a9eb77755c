"""The base strategy of every flowergraph method, composed of small parts.

:class:`FederatedStrategy` is a legacy Flower ``Strategy`` (it runs in Flower's simulation, in deployment, in
your own ``server_fn`` and under ``LegacyContext`` + ``DefaultWorkflow``, SecAgg+ included) built from:

* :class:`~flowergraph.strategies.directory.ClientDirectory`: identity handshake (which node holds which
  partition), seeded sampling, clients named in logs and records;
* update validation (:func:`~flowergraph.strategies.common.check_update`: count, shape, dtype, finite);
* an :class:`~flowergraph.strategies.aggregation.Aggregator` (weighted mean by default);
* an :class:`~flowergraph.strategies.evaluation.EvaluationSchedule` (``eval_every``, fused evaluation);
* a :class:`~flowergraph.strategies.records.RoundBook` (timing, bytes, one record per round);
* a :class:`~flowergraph.strategies.phases.PhaseRunner` (method phases besides training);
* checkpoint state (:meth:`state_dict`) and, for methods whose clients keep state, client checkpoints.

A method strategy subclasses it and overrides hooks; each hook has a working default:

* :meth:`setup` (once, after the initial model: one-off phases such as FedGCN's exchange);
* :meth:`before_fit` (every round, before training: per-round phases such as an embedding exchange);
* :meth:`fit_config` and :meth:`fit_instructions` (what each sampled client is told: the same config, or one
  per client, e.g. per-client hyper-parameters);
* :meth:`client_parameters` (the model a client trains and is evaluated on: the global one, or its group's,
  e.g. GCFL's cluster models) and :meth:`aggregate_updates` (how accepted updates become the new model(s));
* :meth:`after_fit` (every round, after aggregation);
* :meth:`state_dict` / :meth:`load_state_dict` (extend with the method's own state: agents, populations).

Algorithm (round r = 1..R): sample ``fraction_fit`` of the clients (seeded by seed and r); send each the global
arrays and its config; reject malformed updates (logged with the client's partition id); if at least
``min_clients`` valid updates remain, the aggregator combines them into the new global arrays, else the global
model is kept for that round; evaluate on the clients every ``eval_every`` rounds (fused into the next round's
fit when ``fused_eval``) and on the server with ``evaluate_fn``. Failed clients (an exception, a timeout, a dead
node) are left out of the round and named; a client that refuses the run because of bad input fails the run.
"""

from __future__ import annotations

import concurrent.futures
import math
import uuid
from logging import INFO, WARNING
from typing import Any, Callable

from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    GetParametersIns,
    NDArrays,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.logger import log
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from .. import wire
from ..wire.secure import CKKS_VALUES
from .aggregation import AggregationConfigError, Aggregator, RoundNotAggregated, Update, WeightedMean
from .common import check_update, config_bytes, parameters_bytes, weighted_metric
from .directory import ClientDirectory, failure_reason
from .evaluation import EvaluationSchedule, fused_metrics, record_evaluation
from .phases import PhaseMessage, PhaseRunner
from .records import RoundBook
from .secure import CKKSAggregation

SECURE_AGG = ("none", "secagg+", "ckks")

EvaluateFn = Callable[[int, NDArrays], "tuple[float, dict[str, Scalar]] | None"]


class FederatedStrategy(Strategy):
    """Federated training with per-round records, built from parts (see the module docstring).

    Parameters
    ----------
    num_clients: clients expected in the federation; the strategy waits up to ``connect_timeout`` seconds for
        them before the first round and fails with a clear error if they do not all connect.
    initial_parameters: global arrays to start from; None asks one client for its (seeded) initial model.
    aggregator: how valid updates are combined (default ``WeightedMean("train-size")``).
    fraction_fit, fraction_evaluate: fraction of connected clients sampled per round.
    min_clients: fewest valid updates that still change the global model (default 1).
    eval_every: client-side evaluation every N rounds (the final round ``num_rounds`` is always evaluated).
    num_rounds: the run's length (to evaluate the last round and label progress).
    evaluate_fn: optional server-side evaluation ``(round, arrays) -> (loss, {"accuracy": ...})``.
    recorder: optional :class:`flowergraph.storage.results.RunRecorder` receiving one record per round.
    connect_timeout: seconds to wait for ``num_clients`` clients before the first round.
    init_timeout: seconds a one-off request may take (identity, initial model, :meth:`setup` phases, restoring
        client state); default ``connect_timeout``.
    round_timeout: seconds a per-round request may take (:meth:`before_fit` / :meth:`after_fit` phases, client
        checkpoints, direct evaluations); None waits. The training rounds' own timeout is Flower's
        ``ServerConfig.round_timeout``.
    clients_per_round: cap on the clients sampled per round (``centralized`` uses 1).
    seed: seeds client sampling: round r samples the same partitions in every run with this seed.
    fused_eval: evaluate each round's global model inside the next round's ``fit`` (clients must honour the
        ``evaluate_global`` flag; one that does not is evaluated with a separate message and fused evaluation
        is turned off). Needs ``num_rounds`` and full participation, otherwise the separate phase is used.
    stateful_clients: the method's clients keep state in ``context.state`` that a checkpoint must save
        (:meth:`checkpoint_clients`) and a resumed run must restore.
    max_parallel: messages in flight at once in a phase.
    secure_agg: ``"none"``; ``"ckks"`` (clients send CKKS-encrypted weighted updates, the server adds them and a
        client decrypts the sum: :mod:`flowergraph.strategies.secure`); ``"secagg+"`` (informational: Flower's
        ``SecAggPlusWorkflow`` masks the updates and hands this strategy their weighted average).
    """

    def __init__(self, *, num_clients: int, initial_parameters: NDArrays | Parameters | None = None,
                 aggregator: Aggregator | None = None, fraction_fit: float = 1.0, fraction_evaluate: float = 1.0,
                 min_clients: int | None = None, eval_every: int = 1, num_rounds: int | None = None,
                 evaluate_fn: EvaluateFn | None = None, recorder=None, connect_timeout: float = 600.0,
                 init_timeout: float | None = None, round_timeout: float | None = None,
                 clients_per_round: int | None = None, fused_eval: bool = False, seed: int = 0,
                 stateful_clients: bool = False, max_parallel: int = 16, secure_agg: str = "none") -> None:
        super().__init__()
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        for name, value in (("fraction_fit", fraction_fit), ("fraction_evaluate", fraction_evaluate)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if min_clients is not None and not 0 <= min_clients <= num_clients:
            raise ValueError(f"min_clients must be in [0, num_clients={num_clients}], got {min_clients}")
        if secure_agg not in SECURE_AGG:
            raise ValueError(f"unknown secure_agg {secure_agg!r}; valid choices: {', '.join(SECURE_AGG)}")
        if isinstance(initial_parameters, list):
            initial_parameters = ndarrays_to_parameters(initial_parameters)
        self.num_clients = num_clients
        self.initial_parameters = initial_parameters
        self.aggregator = aggregator or WeightedMean()
        self.fraction_fit = fraction_fit
        self.fraction_evaluate = fraction_evaluate
        self.min_clients = min_clients
        self.evaluate_fn = evaluate_fn
        self.connect_timeout = connect_timeout
        self.init_timeout = connect_timeout if init_timeout is None else init_timeout
        self.round_timeout = round_timeout
        self.stateful_clients = stateful_clients
        full = fraction_fit == 1.0 and fraction_evaluate == 1.0 and clients_per_round is None
        self.directory = ClientDirectory(num_clients, seed=seed, clients_per_round=clients_per_round)
        self.schedule = EvaluationSchedule(eval_every=eval_every, num_rounds=num_rounds, fused=fused_eval and full)
        self.book = RoundBook(recorder)
        self.phases = PhaseRunner(self.directory, max_parallel=max_parallel)
        self.secure_agg = secure_agg  # "secagg+" needs nothing here: Flower's SecAggPlusWorkflow runs the rounds
        self.ckks = CKKSAggregation(self.phases) if secure_agg == "ckks" else None
        self.global_arrays: NDArrays | None = None
        self.last_fit_round = 0  # the last round whose fit results reached aggregate_fit
        self.resumed = False  # set by load_state_dict: the run continues from a checkpoint
        self.restored_clients = False  # a resumed run restored its clients' saved state
        self.run_tag = uuid.uuid4().hex[:12]  # names this run's client state files (kept across a resume)
        self.client_checkpoint: dict[str, Any] | None = None  # the last client checkpoint (round, files)
        self._sampled: list[ClientProxy] = []  # the current fit/evaluate phase's clients (to name failures)
        self._sent: Parameters | None = None  # the arrays this round's fit carried (the model fused eval tests)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_clients={self.num_clients}, aggregator={self.aggregator!r})"

    # Shortcuts to the parts' settings (read by tests, benchmarks and subclasses).
    @property
    def recorder(self):
        return self.book.recorder

    @property
    def num_rounds(self) -> int | None:
        return self.schedule.num_rounds

    @property
    def fused_eval(self) -> bool:
        return self.schedule.fused

    @property
    def seed(self) -> int:
        return self.directory.seed

    @property
    def partition_of(self) -> dict[str, int]:
        return self.directory.partition_of

    def client_label(self, proxy: ClientProxy | None, metrics: dict[str, Scalar] | None = None) -> str:
        return self.directory.label(proxy, metrics)

    def identify_clients(self, client_manager: ClientManager) -> dict[str, int]:
        """Ask every connected client which partition it holds (see :meth:`ClientDirectory.identify`)."""
        return self.directory.identify(client_manager, self.init_timeout)

    def wait_for_clients(self, client_manager: ClientManager) -> None:
        self.directory.wait(client_manager, self.connect_timeout)

    def all_clients(self, client_manager: ClientManager) -> list[ClientProxy]:
        """Every connected client, ordered by partition id."""
        return self.directory.ordered(client_manager.all().values())

    # ------------------------------------------------------------------------------------------ hooks
    def setup(self, client_manager: ClientManager) -> None:
        """One-off method phases after the initial model, before round 1 (default: none)."""

    def before_fit(self, server_round: int, clients: list[ClientProxy], client_manager: ClientManager) -> None:
        """Per-round method phases before training (default: none). Add a phase's record to the round with
        ``self.book.add_phase(phase.end())``."""

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        """Config sent with every ``fit`` instruction (subclasses add keys)."""
        config: dict[str, Scalar] = {wire.SERVER_ROUND: server_round}
        if self.ckks is not None:
            config[wire.SECURE_AGG] = "ckks"
        return config

    def fit_instructions(self, server_round: int, parameters: Parameters, clients: list[ClientProxy],
                         config: dict[str, Scalar]) -> list[tuple[ClientProxy, FitIns]]:
        """One ``FitIns`` per sampled client (its model: :meth:`client_parameters`); override for per-client
        configs."""
        return [(c, FitIns(self.client_parameters(c, parameters), dict(config))) for c in clients]

    def client_parameters(self, proxy: ClientProxy, parameters: Parameters) -> Parameters:
        """The model a client is sent to train and to evaluate: the global ``parameters`` (default). A method
        with one model per group of clients (GCFL's clusters) returns the client's own; training, fused and
        separate evaluation all go through here."""
        return parameters

    def aggregate_updates(self, server_round: int, updates: list[Update], weights: list[float]) -> NDArrays:
        """The new global arrays from the round's accepted updates (default: the :class:`Aggregator`). A method
        that keeps several models (:meth:`client_parameters`) updates them here and returns the arrays that stand
        for the whole federation (checkpointed as the global model, evaluated by ``evaluate_fn``). May raise
        :class:`~flowergraph.strategies.aggregation.RoundNotAggregated` to keep the model for the round."""
        return self.aggregator.aggregate(updates, weights, like=self.global_arrays)

    def after_fit(self, server_round: int, updates: list[Update]) -> None:
        """Per-round work after aggregation (default: none); ``updates`` are the accepted ones."""

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        return {wire.SERVER_ROUND: server_round}

    # ---------------------------------------------------------------------------------------- Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.directory.wait(client_manager, self.connect_timeout)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            identities = pool.submit(self.directory.identify, client_manager, self.init_timeout)
            if self.initial_parameters is not None:
                params = self.initial_parameters
                self.initial_parameters = None  # free memory
            else:
                proxy = sorted(client_manager.all().values(), key=lambda c: c.cid)[0]
                try:
                    res = proxy.get_parameters(GetParametersIns(config={}), timeout=self.init_timeout, group_id=0)
                except Exception as exc:
                    identities.result()  # a client's refusal of the run is the better error
                    raise RuntimeError(f"client node {proxy.cid} could not send the initial model: "
                                       f"{failure_reason(exc)}") from exc
                params = res.parameters
                if not params.tensors:
                    identities.result()
                    raise RuntimeError(f"client node {proxy.cid} returned no initial parameters: "
                                       f"{failure_reason(res.status.message)}")
            identities.result()
        self.global_arrays = parameters_to_ndarrays(params)
        if self.resumed and self.stateful_clients and self.client_checkpoint is not None:
            self.restore_clients(client_manager)
        if self.ckks is not None:
            record = self.ckks.setup(self.all_clients(client_manager), self.init_timeout)
            if not self.resumed:
                self.book.write({**record, "elapsed_s": 0.0})
        self.setup(client_manager)
        return params

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        self.book.start(server_round)
        self.global_arrays = parameters_to_ndarrays(parameters)
        self._sent = parameters
        clients = self.directory.sample(client_manager, self.fraction_fit, server_round, "fit")
        self._sampled = clients
        self.before_fit(server_round, clients, client_manager)
        config = self.fit_config(server_round)
        if self.book.held is not None:
            config[wire.EVALUATE_GLOBAL] = True
        instructions = self.fit_instructions(server_round, parameters, clients, config)
        self.book.add_bytes(down=sum(parameters_bytes(ins.parameters) + config_bytes(ins.config)
                                     for _, ins in instructions))
        return instructions

    def aggregate_fit(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                      failures: list[tuple[ClientProxy, FitRes] | BaseException]
                      ) -> tuple[Parameters | None, dict[str, Scalar]]:
        rec = self.book.start(server_round)
        self.last_fit_round = server_round
        rec["num_failures"] = len(failures)
        rec["failures"] = self.directory.name_failures(server_round, results, failures, "train", self._sampled)
        results = sorted(results, key=lambda pr: (int(pr[1].metrics.get(wire.PARTITION_ID, -1)), pr[0].cid))
        if self.book.held is not None:  # fused: these fits evaluated the previous round's global model first
            self._record_fused_evaluation(server_round, results)
        if self.ckks is not None:
            return self._aggregate_ckks(server_round, results, rec)
        if self.secure_agg == "secagg+":  # what SecAgg+ handed over: one aggregate, copied into every result
            rec["secure_agg"] = {"mode": "secagg+", "distinct_payloads": len({
                hash(b"".join(res.parameters.tensors)) for _, res in results})}
        updates, weights, rejected = [], [], []
        for proxy, res in results:
            self.book.add_bytes(up=parameters_bytes(res.parameters) + config_bytes(res.metrics))
            label = self.client_label(proxy, res.metrics)
            try:
                arrays = parameters_to_ndarrays(res.parameters)
                problem = check_update(arrays, self.global_arrays)
            except Exception as exc:  # undecodable payload
                arrays, problem = None, f"undecodable update ({type(exc).__name__}: {exc})"
            update = Update(label, arrays, int(res.num_examples), dict(res.metrics))
            if problem is None:
                try:
                    weight = self.aggregator.weight(update)
                except AggregationConfigError as exc:
                    raise RuntimeError(f"round {server_round}: {exc}") from None
                if not (weight >= 0 and math.isfinite(weight)):
                    problem = f"invalid aggregation weight {weight}"
            if problem is not None:
                log(WARNING, "round %s: rejected the update of client %s: %s", server_round, label, problem)
                rejected.append({"client": label, "reason": problem})
                continue
            updates.append(update)
            weights.append(weight)
            fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
            rec.setdefault("clients", {}).setdefault(label, {}).update(
                {"num_train": int(res.num_examples), "fit_weight": weight,
                 **{f"fit_{k}": v for k, v in fit_metrics.items() if k != "num_train"}})
        rec["rejected"] = rejected
        rec["num_fit"] = len(updates)
        rec["train_loss"] = weighted_metric((u.metrics.get("train_loss"), w) for u, w in zip(updates, weights))
        needed = max(self.min_clients or 1, 1)
        if len(updates) < needed or sum(weights) <= 0:
            log(WARNING, "round %s: %d valid updates (%d needed, total weight %.3g); the global model is kept "
                "unchanged", server_round, len(updates), needed, sum(weights))
            rec["aggregated"] = False
            self.after_fit(server_round, updates)
            return None, {"num_fit": len(updates)}
        try:
            self.global_arrays = self.aggregate_updates(server_round, updates, weights)
        except RoundNotAggregated as exc:
            log(WARNING, "round %s: %s; the global model is kept unchanged", server_round, exc)
            rec["aggregated"], rec["not_aggregated"] = False, str(exc)
            self.after_fit(server_round, updates)
            return None, {"num_fit": len(updates)}
        rec["aggregated"] = True
        self.after_fit(server_round, updates)
        return ndarrays_to_parameters(self.global_arrays), {"num_fit": len(updates)}

    def measured_fit_bytes(self, server_round: int, down: int, up: int, stages=()) -> None:
        """The bytes that crossed the grid during the round's training, measured by the server loop when a fit
        workflow (SecAgg+) sends messages this strategy never sees: they replace its own estimate. ``stages``:
        the workflow's message exchanges as ``(sent, received, seconds)``, recorded as ``fit_stages``."""
        rec = self.book.start(server_round)
        rec.update(bytes_down=int(down), bytes_up=int(up), bytes_measured="grid")
        if stages:
            rec["fit_stages"] = [{"messages": int(n), "replies": int(r), "time_s": round(float(t), 4)}
                                 for n, r, t in stages]

    def fit_round_failed(self, server_round: int, reason: str) -> None:
        """The round's training ended before any result reached :meth:`aggregate_fit` (a fit workflow such as
        SecAgg+ stopped): recorded, and the global model is kept."""
        rec = self.book.start(server_round)
        rec.update(aggregated=False, not_aggregated=reason, num_fit=0)
        log(WARNING, "round %s: %s; the global model is kept unchanged", server_round, reason)

    def _aggregate_ckks(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                        rec: dict[str, Any]) -> tuple[Parameters | None, dict[str, Scalar]]:
        """secure-agg=ckks: add the encrypted updates, have a client decrypt the sum (strategies/secure.py)."""
        contributions, weights, metrics = [], [], []
        for proxy, res in results:
            self.book.add_bytes(up=parameters_bytes(res.parameters) + config_bytes(res.metrics))
            label = self.client_label(proxy, res.metrics)
            try:
                arrays = parameters_to_ndarrays(res.parameters)
            except Exception as exc:  # noqa: BLE001
                arrays = [f"undecodable: {exc}"]
            contributions.append((proxy, label, arrays, int(res.metrics.get(CKKS_VALUES, -1))))
            fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
            rec.setdefault("clients", {}).setdefault(label, {}).update(
                {"num_train": int(res.num_examples), **{f"fit_{k}": v for k, v in fit_metrics.items()
                                                         if k not in ("num_train", CKKS_VALUES)}})
            weights.append(float(res.num_examples))
            metrics.append(res.metrics)
        rec["train_loss"] = weighted_metric((m.get("train_loss"), w) for m, w in zip(metrics, weights))
        needed = max(self.min_clients or 1, 1)
        new, info = (None, {"mode": "ckks", "summed": 0})
        if len(contributions) >= needed:
            new, info = self.ckks.aggregate(server_round, contributions, self.global_arrays, self.round_timeout)
            self.book.add_bytes(down=info.pop("bytes_down", 0), up=info.pop("bytes_up", 0))
        rec["secure_agg"] = info
        rec["rejected"] = info.get("rejected", [])
        rec["num_fit"] = int(info.get("summed", 0))
        if new is None or rec["num_fit"] < needed:
            log(WARNING, "round %s: %d encrypted updates summed (%d needed)%s; the global model is kept unchanged",
                server_round, rec["num_fit"], needed, f": {info['error']}" if "error" in info else "")
            rec["aggregated"] = False
            return None, {"num_fit": rec["num_fit"]}
        rec["aggregated"] = True
        self.global_arrays = new
        return ndarrays_to_parameters(new), {"num_fit": rec["num_fit"]}

    def _record_fused_evaluation(self, server_round: int, results: list[tuple[ClientProxy, FitRes]]) -> None:
        """Round r-1's evaluation, from the ``eval_*`` metrics of round r's fit replies. A client that ignored the
        ``evaluate_global`` flag is evaluated now with a separate message (on the arrays it was sent), and fused
        evaluation is turned off for the rest of the run."""
        held = self.book.take_held()
        per_client, ignored = [], []
        for proxy, res in results:
            metrics = fused_metrics(res.metrics)
            if metrics:
                per_client.append((self.client_label(proxy, res.metrics), metrics))
            else:
                ignored.append((proxy, self.client_label(proxy, res.metrics)))
        record_evaluation(held, per_client)
        if ignored:
            labels = ", ".join(label for _, label in ignored)
            log(WARNING, "round %s: client(s) %s ignored the fused-evaluation flag '%s'; evaluating round %s's model "
                "on them with a separate message, and using separate evaluation from now on", server_round,
                labels, wire.EVALUATE_GLOBAL, server_round - 1)
            self.schedule.fused = False
            held["fused_eval_fallback"] = [label for _, label in ignored]
            self._evaluate_directly(held, [p for p, _ in ignored], self._sent, held["round"])
        self.book.write(held)

    def _evaluate_directly(self, rec: dict[str, Any], clients: list[ClientProxy], parameters: Parameters,
                           server_round: int) -> None:
        config = self.evaluate_config(server_round)
        sent = {p.cid: self.client_parameters(p, parameters) for p in clients}

        def call(proxy):
            ins = EvaluateIns(sent[proxy.cid], dict(config))
            return proxy, proxy.evaluate(ins, timeout=self.round_timeout, group_id=server_round)

        results, failures = [], []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(16, len(clients)))) as pool:
            for future in [pool.submit(call, p) for p in clients]:
                try:
                    results.append(future.result())
                except Exception as exc:  # noqa: BLE001
                    failures.append(exc)
        for proxy, res in results:
            rec["bytes_up"] = rec.get("bytes_up", 0) + config_bytes(res.metrics) + 8
        rec["bytes_down"] = rec.get("bytes_down", 0) + sum(parameters_bytes(p) + config_bytes(config)
                                                           for p in sent.values())
        if failures:
            rec.setdefault("eval_failures", []).extend(
                {"client": "unknown", "reason": failure_reason(f)} for f in failures)
        record_evaluation(rec, [(self.client_label(proxy, res.metrics), self._eval_row(res)) for proxy, res in results])

    @staticmethod
    def _eval_row(res: EvaluateRes) -> dict[str, Any]:
        return {**res.metrics, "num_test": res.metrics.get("num_test", res.num_examples),
                "loss": res.metrics.get("loss", res.loss)}

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict[str, Scalar]] | None:
        if self.evaluate_fn is None:
            return None
        result = self.evaluate_fn(server_round, parameters_to_ndarrays(parameters))
        if result is None:
            return None
        loss, metrics = result
        if server_round >= 1:
            rec = self.book.start(server_round)
            rec["server_loss"] = float(loss)
            rec["server_accuracy"] = metrics.get("accuracy")
        else:
            log(INFO, "initial global model on the server: loss %.4f, accuracy %s", loss, metrics.get("accuracy"))
        return loss, metrics

    def configure_evaluate(self, server_round: int, parameters: Parameters,
                           client_manager: ClientManager) -> list[tuple[ClientProxy, EvaluateIns]]:
        self.book.start(server_round)
        if self.schedule.fuse(server_round):
            self.book.hold()  # evaluated inside the next round's fit
            return []
        due = self.schedule.due(server_round)
        clients = self.directory.sample(client_manager, self.fraction_evaluate, server_round, "evaluate") \
            if due else []
        self._sampled = clients
        if not clients:
            self.book.flush()  # aggregate_evaluate will not be called this round
            return []
        config = self.evaluate_config(server_round)
        instructions = [(c, EvaluateIns(self.client_parameters(c, parameters), dict(config))) for c in clients]
        self.book.add_bytes(down=sum(parameters_bytes(ins.parameters) + config_bytes(config)
                                     for _, ins in instructions))
        return instructions

    def aggregate_evaluate(self, server_round: int, results: list[tuple[ClientProxy, EvaluateRes]],
                           failures: list[tuple[ClientProxy, EvaluateRes] | BaseException]
                           ) -> tuple[float | None, dict[str, Scalar]]:
        rec = self.book.start(server_round)
        rec["num_eval_failures"] = len(failures)
        if failures:
            rec["eval_failures"] = self.directory.name_failures(server_round, results, failures, "evaluate",
                                                                self._sampled)
        for _, res in results:
            self.book.add_bytes(up=config_bytes(res.metrics) + 8)  # metrics + the loss
        record_evaluation(rec, [(self.client_label(proxy, res.metrics), self._eval_row(res))
                                for proxy, res in results])
        metrics = {k: rec[k] for k in ("accuracy", "loss", "val_accuracy", "val_loss") if rec.get(k) is not None}
        self.book.flush()
        return metrics.get("loss"), metrics

    def finish(self) -> None:
        """Write any record still held back (fused evaluation whose next fit never came; a failed run)."""
        self.book.finish()

    # ------------------------------------------------------------------------------------ client checkpoints
    def checkpoint_clients(self, server_round: int, client_manager: ClientManager) -> dict[str, Any] | None:
        """Ask every connected client to save its ``context.state`` for round ``server_round`` (when the method's
        clients keep state); returns what was saved (kept in :meth:`state_dict`). A client that cannot save is
        logged: resuming from this checkpoint then fails for it, naming its file."""
        if not self.stateful_clients:
            return None
        phase = self.phases.begin("client-checkpoint", server_round, timeout=self.round_timeout)
        replies = phase.send(wire.STATE_SAVE, self.all_clients(client_manager),
                             PhaseMessage(values={wire.RUN_TAG: self.run_tag}), require_all=False)
        record = phase.end()
        self.client_checkpoint = {"round": server_round, "run_tag": self.run_tag,
                                  "files": {r.client: str(r.values.get("path")) for r in replies},
                                  "missing": [f["client"] for f in record["failures"]]}
        log(INFO, "flowergraph: %d client state file(s) for round %d (%.2f s)%s", len(replies), server_round,
            record["time_s"], f"; MISSING for {record['failures']}" if record["failures"] else "")
        return self.client_checkpoint

    def restore_clients(self, client_manager: ClientManager) -> None:
        """Every client loads the state it saved at the checkpoint this run resumes from (all must succeed)."""
        ckpt = self.client_checkpoint
        assert ckpt is not None
        phase = self.phases.begin("client-restore", int(ckpt["round"]), timeout=self.init_timeout)
        phase.send(wire.STATE_LOAD, self.all_clients(client_manager),
                   PhaseMessage(values={wire.RUN_TAG: str(ckpt["run_tag"])}), require_all=True)
        record = phase.end()
        self.restored_clients = True
        log(INFO, "flowergraph: every client restored its state of round %s (%.2f s)", ckpt["round"],
            record["time_s"])

    # --------------------------------------------------------------------------------- state (checkpoints)
    def state_dict(self) -> dict[str, Any]:
        """The strategy's state besides the global arrays and the round (see :mod:`flowergraph.storage.checkpoint`):
        the round record held back for fused evaluation, the elapsed training time, the run's tag and last
        client checkpoint. Subclasses with state of their own extend it
        (``{**super().state_dict(), "agent": {...}}``) and :meth:`load_state_dict`."""
        return {**self.book.state_dict(), "fused_eval": self.schedule.fused, "run_tag": self.run_tag,
                "client_checkpoint": self.client_checkpoint}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (call before the first round of the resumed run)."""
        self.book.load_state_dict(state)
        if "fused_eval" in state:
            self.schedule.fused = self.schedule.fused and bool(state["fused_eval"])
        self.run_tag = str(state.get("run_tag") or self.run_tag)
        self.client_checkpoint = state.get("client_checkpoint")
        self.resumed = True
