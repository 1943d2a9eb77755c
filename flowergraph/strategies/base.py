"""The base strategy of every flowergraph method, composed of small parts.

:class:`FederatedStrategy` names no Flower type: it speaks flowergraph's own plain values
(:mod:`flowergraph.strategies.nodes`: a :class:`~.nodes.Node` per Flower node id, an :class:`~.nodes.Instruction`
per message, a :class:`~.nodes.Reply` per answer, :class:`~.nodes.Failure` s) and reaches the nodes through a
:class:`~.nodes.Federation`. Flower's Message API drives it directly
(:class:`flowergraph.app.message_server.FlowergraphStrategy`); the legacy stack (Flower's legacy
``Strategy`` API, kept for SecAgg+) drives it through one adapter, :class:`flowergraph.app.loop.LegacyStrategy`.
Its parts, each usable on its own, are in docs/architecture.md ("The base strategy and its parts").

What a client gets is said one way: :meth:`client_model`, :meth:`fit_config` / :meth:`evaluate_config` and
:meth:`client_config`, from which :meth:`instruction` builds every message; what a client was sent is what its
update is checked against. A method overrides hooks ("hooks" below), each with a working default.

Algorithm (round r = 1..R): sample ``fraction_fit`` of the clients (seeded by seed and r); send each its model and
its config; reject malformed updates (logged with the client's partition id); if at least ``min_clients`` valid
updates remain, :meth:`aggregate_updates` combines them into the new model(s), else the models are kept for that
round; evaluate on the clients every ``eval_every`` rounds (fused into the next round's fit when ``fused_eval``)
and on the server with ``evaluate_fn``. Failed clients (an exception, a timeout, a dead node) are left out of the
round and named; a client that refuses the run because of bad input fails the run.
"""

from __future__ import annotations

import concurrent.futures
from logging import INFO, WARNING
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from flwr.common.logger import log

from .. import wire
from .aggregation import AggregationConfigError, Aggregator, RoundNotAggregated, Update, WeightedMean
from .bank import GLOBAL, ModelBank, NamedArrays, initial_arrays, named
from .client_checkpoints import ClientCheckpoints
from .directory import ClientDirectory
from .evaluation import (
    DEFAULT_METRICS,
    ClientEvaluation,
    EvaluationSchedule,
    FusedEvaluation,
    MetricAggregation,
    record_replies,
    server_evaluation,
)
from .nodes import Failure, Federation, Instruction, Node, Reply, Scalar
from .phases import PhaseRunner
from .policy import UPDATE_KINDS, FederationPolicy, Stage, StagePlan, resolve_policy
from .records import RoundBook
from .secure import CKKSAggregation
from .updates import round_updates

NDArrays = list[np.ndarray]
EvaluateFn = Callable[[int, NDArrays], "tuple[float, dict[str, Scalar]] | None"]
Replies = list[tuple[Node, Reply]]


class FederatedStrategy:
    """Federated training with per-round records, built from parts (see the module docstring).

    Parameters
    ----------
    policy: how the federation runs (:class:`~flowergraph.strategies.policy.FederationPolicy`).
    aggregator: how valid updates are combined (default ``WeightedMean("train-size")``).
    initial_parameters: the model to start from: arrays or named arrays (state-dict keys); None asks one client
        for its (seeded) initial model.
    evaluate_fn: optional server-side evaluation ``(round, arrays) -> (loss, {"accuracy": ...})``.
    recorder: optional :class:`flowergraph.storage.results.RunRecorder` receiving one record per round.
    metrics: how the clients' evaluation metrics are aggregated (default
        :class:`~flowergraph.strategies.evaluation.MetricAggregation`).
    update_kind: what clients send back: ``"weights"`` (their whole trained model, default), ``"gradients"``
        (whole, same shapes; the strategy's :meth:`aggregate_updates` steps the model) or ``"partial"`` (any of
        the arrays they were sent, named: each array is averaged over the clients that sent it).
    stages: the run's stages (default one); :meth:`begin_stage` gives each later stage its model.
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        aggregator: Aggregator | None = None,
        initial_parameters: Any = None,
        evaluate_fn: EvaluateFn | None = None,
        recorder: Any = None,
        metrics: MetricAggregation | None = None,
        update_kind: str = "weights",
        stages: Sequence[Stage] | None = None,
        **kwargs: Any,
    ) -> None:
        policy = resolve_policy(policy, kwargs, type(self).__name__)  # kwargs: only to refuse them by name
        if update_kind not in UPDATE_KINDS:
            raise ValueError(f"unknown update_kind {update_kind!r}; valid choices: {', '.join(UPDATE_KINDS)}")
        self.policy = policy
        self.update_kind = update_kind
        self.initial_parameters = initial_parameters
        self.aggregator = aggregator or WeightedMean()
        self.evaluate_fn = evaluate_fn
        self.metrics = metrics or DEFAULT_METRICS
        self.stage_plan = StagePlan(tuple(stages or (Stage("train"),)), policy.num_rounds)
        self.stage_index = 0
        self.bank = ModelBank()
        self.client_table: dict[int, dict[str, Any]] = {}  # per-client server-side values (checkpointed)
        self.directory = ClientDirectory(
            policy.num_clients, seed=policy.seed, clients_per_round=policy.clients_per_round
        )
        fused = policy.fused_eval and policy.full_participation
        separate = self.stage_plan.last_rounds()
        self.schedule = EvaluationSchedule(
            eval_every=policy.eval_every, num_rounds=policy.num_rounds, fused=fused, separate=separate
        )
        self.book = RoundBook(recorder, listeners=[self.round_closed])
        self.fused = FusedEvaluation(self.schedule, self.book, self.metrics, self.directory.label)
        self.phases = PhaseRunner(self.directory, max_parallel=policy.max_parallel)
        self.ckks = CKKSAggregation(self.phases, policy.min_secure_clients) if policy.secure_agg == "ckks" else None
        self.client_state = ClientCheckpoints(self.phases)  # used when the policy has stateful_clients
        self.last_fit_round = 0  # the last round whose fit results reached aggregate_fit
        self.resumed = False  # set by load_state_dict: the run continues from a checkpoint
        self._resume_bank: dict[str, Any] | None = None
        self._sampled: list[Node] = []  # the current fit/evaluate phase's clients (to name failures)
        self._sent: dict[str, tuple[Instruction, str, list[str] | None]] = {}  # this round's fit, per node id
        self.federation: Federation | None = None  # the face's nodes, as the last call handed them

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_clients={self.num_clients}, aggregator={self.aggregator!r})"

    # Shortcuts to the policy and the parts (read by tests, benchmarks, wrappers and subclasses).
    num_clients = property(lambda self: self.policy.num_clients)
    num_rounds = property(lambda self: self.policy.num_rounds)
    fraction_fit = property(lambda self: self.policy.fraction_fit)
    fraction_evaluate = property(lambda self: self.policy.fraction_evaluate)
    min_clients = property(lambda self: self.policy.min_clients)
    connect_timeout = property(lambda self: self.policy.connect_timeout)
    init_timeout = property(lambda self: self.policy.effective_init_timeout)
    round_timeout = property(lambda self: self.policy.round_timeout)
    stateful_clients = property(lambda self: self.policy.stateful_clients)
    secure_agg = property(lambda self: self.policy.secure_agg)
    seed = property(lambda self: self.policy.seed)
    recorder = property(lambda self: self.book.recorder)
    fused_eval = property(lambda self: self.schedule.fused)
    partition_of = property(lambda self: self.directory.partition_of)
    client_checkpoint = property(lambda self: self.client_state.last, doc="The last client checkpoint, or None.")

    @property
    def global_arrays(self) -> NDArrays | None:
        """The global model's arrays, in order (None before the initial model)."""
        return None if self.bank.global_model is None else self.bank.payload(GLOBAL)

    @global_arrays.setter
    def global_arrays(self, arrays: Sequence[np.ndarray] | Mapping[str, np.ndarray]) -> None:
        self.bank.set_global(arrays)

    @property
    def stage(self) -> Stage:
        """The stage the run is in."""
        return self.stage_plan.stages[self.stage_index]

    def client_label(self, proxy: Node | None, metrics: dict[str, Scalar] | None = None) -> str:
        return self.directory.label(proxy, metrics)

    def partition(self, proxy: Node) -> int | None:
        """The partition id a node holds (None when it did not say)."""
        return self.directory.partition_of.get(proxy.cid)

    def use(self, federation: Federation) -> Federation:
        """The face's nodes: what the phases, the identity handshake and fused evaluation send through."""
        self.federation = self.phases.federation = federation
        return federation

    def identify_clients(self, federation: Federation) -> dict[str, int]:
        """Ask every connected client which partition it holds (see :meth:`ClientDirectory.identify`)."""
        return self.directory.identify(self.use(federation), self.init_timeout)

    def all_clients(self, federation: Federation) -> list[Node]:
        """Every connected client, ordered by partition id."""
        return self.directory.ordered(federation.nodes())

    def client_entry(self, partition: int) -> dict[str, Any]:
        """The server-side table entry of a client (created empty; checkpointed with the strategy's state):
        per-client hyper-parameters, a search's per-client state, ... Values: JSON types or numpy arrays."""
        return self.client_table.setdefault(int(partition), {})

    # ------------------------------------------------------------------------------------------ hooks
    def setup(self, federation: Federation) -> None:
        """One-off method phases after the initial model, before round 1 (default: none)."""

    def begin_stage(
        self, stage: Stage, server_round: int, federation: Federation
    ) -> Mapping[str, np.ndarray] | Sequence[np.ndarray] | None:
        """A later stage starts with round ``server_round``: return its model (the bank is reset to it: groups and
        per-client models of the previous stage are dropped), or None to keep the current one (default)."""
        return None

    def before_fit(self, server_round: int, clients: list[Node], federation: Federation) -> None:
        """Per-round method phases before training (default: none). Add a phase's record to the round with
        ``self.book.add_phase(phase.end())``."""

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        """The round's ``fit`` config, the same for every sampled client (subclasses add keys)."""
        config = FederatedStrategy.evaluate_config(self, server_round)
        if self.ckks is not None:
            config[wire.SECURE_AGG] = "ckks"
        return config

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        """The round's ``evaluate`` config, the same for every evaluated client (subclasses add keys)."""
        config: dict[str, Scalar] = {wire.SERVER_ROUND: server_round}
        if len(self.stage_plan.stages) > 1:
            config[wire.STAGE] = self.stage.name
        return config

    def client_model(self, proxy: Node) -> tuple[str, list[str] | None]:
        """Which model a client is sent to train and to evaluate: ``(slot, keys)``, the bank slot and the names
        of the arrays it gets (None: all; else the names travel in the config's ``wire.KEYS``). Default: its own
        model if the bank holds one, else its group's, else the global one, whole. An architecture search returns
        the sub-network's keys."""
        return self.bank.slot_for(self.partition(proxy)), None

    def client_config(self, server_round: int, proxy: Node, config: dict[str, Scalar], kind: str) -> dict[str, Scalar]:
        """What one client is told besides its model: ``config`` (the round's :meth:`fit_config` or
        :meth:`evaluate_config`, a copy) with the client's own keys (default: unchanged). ``kind``: ``"fit"`` or
        ``"evaluate"``. Override for per-client hyper-parameters, a client's inbox, ..."""
        return config

    def aggregate_updates(
        self, server_round: int, updates: list[Update], weights: list[float]
    ) -> Mapping[str, np.ndarray] | NDArrays | None:
        """The new global model from the round's accepted updates (default: the :class:`Aggregator`, by name:
        partial updates count for the arrays they carry). A method that keeps several models
        (:meth:`client_model`) updates them in ``self.bank`` here and returns the global model (checkpointed as
        the run's model, evaluated by ``evaluate_fn``), or None to keep it. May raise
        :class:`~flowergraph.strategies.aggregation.RoundNotAggregated` to keep every model for the round."""
        return self.aggregator.aggregate_named(updates, weights, like=self.bank.global_model or {})

    def after_fit(self, server_round: int, updates: list[Update]) -> None:
        """Per-round work after aggregation (default: none); ``updates`` are the accepted ones (under
        ``secure-agg=ckks``: the one decrypted mean, labelled ``CKKS_SUM``)."""

    def after_evaluate(self, server_round: int, evaluations: list[ClientEvaluation]) -> None:
        """Every client's evaluation of round ``server_round``'s model(s), once the round's evaluation is complete
        (called from the separate evaluation and from fused evaluation alike; default: nothing)."""

    def round_closed(self, record: dict[str, Any]) -> None:
        """Round ``record["round"]``'s record is complete and written (time, bytes, training and evaluation
        results; round 0: a one-off phase). Default: nothing. With fused evaluation a round's record closes when
        the next round's fit returns."""

    # ------------------------------------------------------------------------------- what a client gets
    def instruction(
        self, server_round: int, proxy: Node, config: Mapping[str, Scalar], kind: str = "fit"
    ) -> Instruction:
        """The one place a client's :class:`~.nodes.Instruction` is built: the model :meth:`client_model` names and
        :meth:`client_config`'s config (plus the arrays' names when the client gets a part). A fit instruction is
        remembered as what the client was sent (:meth:`sent_to`)."""
        slot, keys = self.client_model(proxy)
        arrays = self.bank.payload(slot, keys)
        config = dict(self.client_config(server_round, proxy, dict(config), kind))
        if keys is not None:
            config[wire.KEYS] = wire.encode_keys(keys)
        names = list(keys) if keys is not None else list(self.bank.arrays(slot))
        ins = Instruction(arrays, config, names if len(names) == len(arrays) else None)
        if kind == "fit":
            self._sent[proxy.cid] = (ins, slot, keys)
        return ins

    def sent_to(self, proxy: Node) -> NamedArrays | None:
        """The named arrays a client was sent in this round's fit (what its update is checked against); the global
        model for a client this round sent nothing."""
        sent = self._sent.get(proxy.cid)
        return self.bank.global_model if sent is None else self.bank.arrays(sent[1], sent[2])

    def _enter_stage(self, server_round: int, federation: Federation) -> None:
        while self.stage_index < self.stage_plan.index(server_round):
            self.stage_index += 1
            new = self.begin_stage(self.stage, server_round, federation)
            if new is not None:
                self.bank.reset(global_model=new if isinstance(new, Mapping) else named(new))
            self.book.start(server_round)["stage_started"] = self.stage.name
            size = "" if new is None else f" ({len(self.bank.global_model or {})} arrays)"
            log(INFO, "stage %r starts with round %d%s", self.stage.name, server_round, size)

    # ------------------------------------------------------------------------------------------ the round
    def initialize_parameters(self, federation: Federation) -> NDArrays:
        """Wait for the nodes, identify them, get the initial model (given, the checkpoint's, or one client's),
        restore the clients' state (a resumed run), run the key check (CKKS) and :meth:`setup`; returns the
        global model's arrays."""
        self.use(federation)
        self.directory.wait(federation, self.connect_timeout)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            identities = pool.submit(self.directory.identify, federation, self.init_timeout)
            initial, self.initial_parameters = self.initial_parameters, None  # free memory
            if initial is not None:
                arrays, keys = initial_arrays(initial)
            else:
                arrays, keys = self.directory.initial_model(federation, identities, self.init_timeout)
            identities.result()
        if self._resume_bank is not None:  # a resumed run: the checkpoint's model with its names, groups, clients
            self.bank.load_state_dict(self._resume_bank, global_arrays=arrays)
            self._resume_bank = None
        else:
            self.bank.set_global(named(arrays, keys))
        if self.resumed and self.stateful_clients and self.client_checkpoint is not None:
            self.client_state.restore(self.all_clients(federation), self.init_timeout)
        if self.ckks is not None:  # the key check; its record is round 0's (a resumed run has it)
            self.ckks.setup(self.all_clients(federation), self.init_timeout, None if self.resumed else self.book)
        self.setup(federation)
        return self.bank.payload(GLOBAL)

    def configure_fit(
        self, server_round: int, arrays: Sequence[np.ndarray] | None, federation: Federation
    ) -> list[tuple[Node, Instruction]]:
        """Round ``server_round``'s training messages: ``arrays`` (the loop's model: the global one, or a DP
        wrapper's release) is adopted, a later stage entered, the clients sampled, the round's phases run
        (:meth:`before_fit`); one :class:`~.nodes.Instruction` per sampled node."""
        self.use(federation)
        self.book.start(server_round)
        self.bank.adopt(arrays)
        self._enter_stage(server_round, federation)
        if len(self.stage_plan.stages) > 1:
            self.book.start(server_round)["stage"] = self.stage.name
        self._sent = {}
        clients = self._sampled = self.directory.sample(federation, self.fraction_fit, server_round, "fit")
        self.before_fit(server_round, clients, federation)
        config = self.fused.flag(self.fit_config(server_round))
        return self.book.count_sent([(c, self.instruction(server_round, c, config, "fit")) for c in clients])

    def aggregate_fit(
        self, server_round: int, results: Replies, failures: list[Failure]
    ) -> tuple[NDArrays | None, dict[str, Scalar]]:
        """The round's replies (and failures, named) into the new global model's arrays (None: kept) and the
        round's metrics (``num_fit``)."""
        rec = self.book.start(server_round)
        self.last_fit_round = server_round
        rec["num_failures"] = len(failures)
        rec["failures"] = self.directory.name_failures(server_round, results, failures, "train", self._sampled)
        results = sorted(results, key=lambda pr: (int(pr[1].metrics.get(wire.PARTITION_ID, -1)), pr[0].cid))
        if self.book.held is not None:  # fused: these fits evaluated the previous round's model first
            sent = {cid: ins for cid, (ins, _slot, _keys) in self._sent.items()}
            self.fused.complete(
                server_round,
                results,
                sent,
                self.evaluate_config,
                self.after_evaluate,
                self.round_timeout,
                federation=self.federation,
            )
        updates, weights, enough = round_updates(self, server_round, results, rec)
        if not enough:
            return self._not_aggregated(server_round, rec, updates)
        return self._aggregated(server_round, rec, updates, weights)

    def _aggregated(
        self, server_round: int, rec: dict[str, Any], updates: list[Update], weights: list[float]
    ) -> tuple[NDArrays | None, dict[str, Scalar]]:
        """:meth:`aggregate_updates` on the round's accepted updates; the new global model (None: kept)."""
        try:
            new = self.aggregate_updates(server_round, updates, weights)
        except RoundNotAggregated as exc:
            log(WARNING, "round %s: %s; the model is kept unchanged", server_round, exc)
            rec["not_aggregated"] = str(exc)
            return self._not_aggregated(server_round, rec, updates)
        except AggregationConfigError as exc:
            raise RuntimeError(f"round {server_round}: {exc}") from None
        if new is not None:
            self.bank.set_global(new)
        rec["aggregated"] = True
        self.after_fit(server_round, updates)
        return self.bank.payload(GLOBAL), {"num_fit": rec["num_fit"]}

    def _not_aggregated(
        self, server_round: int, rec: dict[str, Any], updates: list[Update]
    ) -> tuple[NDArrays | None, dict[str, Scalar]]:
        rec["aggregated"] = False
        self.after_fit(server_round, updates)
        return None, {"num_fit": rec["num_fit"]}

    def measured_fit_bytes(
        self, server_round: int, down: int, up: int, stages: Sequence[tuple[int, int, float]] = ()
    ) -> None:
        """The bytes of the round's training as the server loop measured them on the grid, when a fit workflow
        (SecAgg+) sends messages this strategy never sees (:meth:`~.records.RoundBook.measured`)."""
        self.book.measured(server_round, down, up, stages)

    def fit_round_failed(self, server_round: int, reason: str) -> None:
        """The round's training ended before any result reached :meth:`aggregate_fit` (a fit workflow such as
        SecAgg+ stopped): recorded, and the model is kept."""
        self.book.start(server_round).update(aggregated=False, not_aggregated=reason, num_fit=0)
        log(WARNING, "round %s: %s; the global model is kept unchanged", server_round, reason)

    def evaluate(
        self, server_round: int, arrays: Sequence[np.ndarray] | None
    ) -> tuple[float, dict[str, Scalar]] | None:
        """The server's own evaluation (``evaluate_fn``) of the global model (``arrays`` when the strategy holds
        none)."""
        if self.evaluate_fn is None:
            return None
        model = self.global_arrays if self.global_arrays is not None else list(arrays or [])
        return server_evaluation(self.evaluate_fn, server_round, model, self.book)

    def configure_evaluate(
        self, server_round: int, arrays: Sequence[np.ndarray] | None, federation: Federation
    ) -> list[tuple[Node, Instruction]]:
        """Round ``server_round``'s evaluation messages (none when it is not due, or travels fused)."""
        self.use(federation)
        self.book.start(server_round)
        self.bank.adopt(arrays)
        if self.fused.hold(server_round):  # evaluated inside the next round's fit
            return []
        clients = []
        if self.schedule.due(server_round):
            clients = self.directory.sample(federation, self.fraction_evaluate, server_round, "evaluate")
        self._sampled = clients
        if not clients:
            self.book.flush()  # aggregate_evaluate will not be called this round
            return []
        config = self.evaluate_config(server_round)
        return self.book.count_sent([(c, self.instruction(server_round, c, config, "evaluate")) for c in clients])

    def aggregate_evaluate(
        self, server_round: int, results: Replies, failures: list[Failure]
    ) -> tuple[float | None, dict[str, Scalar]]:
        rec = self.book.start(server_round)
        rec["num_eval_failures"] = len(failures)
        if failures:
            rec["eval_failures"] = self.directory.name_failures(
                server_round, results, failures, "evaluate", self._sampled
            )
        rows = record_replies(rec, results, self.client_label, self.metrics, add_bytes=self.book.add_bytes)
        metrics = {k: rec[k] for k in self.metrics.names if rec.get(k) is not None}
        self.after_evaluate(server_round, rows)
        self.book.flush()
        return metrics.get(wire.LOSS), metrics

    def finish(self) -> None:
        """Write any record still held back (fused evaluation whose next fit never came; a failed run)."""
        self.book.finish()

    def checkpoint_clients(self, server_round: int, federation: Federation) -> dict[str, Any] | None:
        """Every connected client saves its ``context.state`` for round ``server_round`` when the method's clients
        keep state (:class:`~flowergraph.strategies.client_checkpoints.ClientCheckpoints`); returns what was saved
        (kept in :meth:`state_dict`), or None."""
        if not self.stateful_clients:
            return None
        self.use(federation)
        return self.client_state.save(server_round, self.all_clients(federation), self.round_timeout)

    # --------------------------------------------------------------------------------- state (checkpoints)
    def state_dict(self) -> dict[str, Any]:
        """The strategy's state besides the global model's arrays and the round (see
        :mod:`flowergraph.storage.checkpoint`): the round record held back for fused evaluation, the elapsed
        training time, the run's tag and last client checkpoint, the model bank (groups, per-client models, the
        global model's names), the stage and the per-client table. Subclasses with state of their own extend it
        (``{**super().state_dict(), "agent": {...}}``) and :meth:`load_state_dict`."""
        return {
            **self.book.state_dict(),
            "fused_eval": self.schedule.fused,
            **self.client_state.state_dict(),
            "bank": self.bank.state_dict(),
            "stage_index": self.stage_index,
            "client_table": {str(p): entry for p, entry in sorted(self.client_table.items())},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (call before the first round of the resumed run)."""
        self.book.load_state_dict(state)
        if "fused_eval" in state:
            self.schedule.fused = self.schedule.fused and bool(state["fused_eval"])
        self.client_state.load_state_dict(state)
        self._resume_bank = state.get("bank")  # applied with the checkpoint's model in initialize_parameters
        self.stage_index = int(state.get("stage_index", 0))
        self.client_table = {int(p): dict(entry) for p, entry in (state.get("client_table") or {}).items()}
        self.resumed = True
