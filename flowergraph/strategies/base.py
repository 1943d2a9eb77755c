"""The base strategy of every flowergraph method, composed of small parts.

:class:`FederatedStrategy` is a legacy Flower ``Strategy`` (it runs in Flower's simulation, in deployment, in
your own ``server_fn`` and under ``LegacyContext`` + ``DefaultWorkflow``, SecAgg+ included) built from:

* a :class:`~flowergraph.strategies.policy.FederationPolicy` (clients, rounds, sampling, evaluation, timeouts:
  plain values) and, for runs in stages, :class:`~flowergraph.strategies.policy.Stage` s;
* a :class:`~flowergraph.strategies.bank.ModelBank`: the global model, one per group, one per client, as named
  arrays with one serialisation cache (what each client receives: :meth:`client_model`);
* :class:`~flowergraph.strategies.directory.ClientDirectory`: identity handshake (which node holds which
  partition), seeded sampling, clients named in logs and records;
* update validation by name (:func:`~flowergraph.strategies.common.check_named_update`: the arrays a client
  was sent, their shapes, dtypes, finite values; whole or partial updates as the strategy's ``update_kind`` says);
* an :class:`~flowergraph.strategies.aggregation.Aggregator` (weighted mean by default; per array for partial
  updates);
* an :class:`~flowergraph.strategies.evaluation.EvaluationSchedule` (``eval_every``, fused evaluation) and a
  :class:`~flowergraph.strategies.evaluation.MetricAggregation` (how clients' metrics become a round's);
* a :class:`~flowergraph.strategies.records.RoundBook` (timing, bytes, one record per round);
* a :class:`~flowergraph.strategies.phases.PhaseRunner` (method phases besides training);
* checkpoint state (:meth:`state_dict`: the bank, the stage, a per-client table, the round clock) and, for
  methods whose clients keep state, client checkpoints.

A method strategy subclasses it and overrides hooks; each hook has a working default:

* :meth:`setup` (once, after the initial model: one-off phases such as FedGCN's exchange);
* :meth:`begin_stage` (when a later stage starts: the stage's new model, e.g. the architecture a search chose);
* :meth:`before_fit` (every round, before training: per-round phases such as an embedding exchange);
* :meth:`fit_config` and :meth:`fit_instructions` (what each sampled client is told: the same config, or one
  per client, e.g. per-client hyper-parameters);
* :meth:`client_model` (which model, and which of its arrays, a client trains and is evaluated on: the bank's
  answer by default, a sub-network for an architecture search);
* :meth:`aggregate_updates` (how accepted updates become the new model(s): the aggregator by default; a method
  with groups or per-client models updates the bank here);
* :meth:`after_fit` (every round, after aggregation);
* :meth:`evaluate_instructions` (what each client evaluates) and :meth:`after_evaluate` (every client's
  evaluation of a round's model, from the separate and the fused path alike);
* :meth:`round_closed` (a round's record, once complete: time, bytes, accuracy; e.g. an agent's reward);
* :meth:`state_dict` / :meth:`load_state_dict` (extend with the method's own state: agents, populations).

Algorithm (round r = 1..R): sample ``fraction_fit`` of the clients (seeded by seed and r); send each its model
and its config; reject malformed updates (logged with the client's partition id); if at least ``min_clients``
valid updates remain, :meth:`aggregate_updates` combines them into the new model(s), else the models are kept
for that round; evaluate on the clients every ``eval_every`` rounds (fused into the next round's fit when
``fused_eval``) and on the server with ``evaluate_fn``. Failed clients (an exception, a timeout, a dead node)
are left out of the round and named; a client that refuses the run because of bad input fails the run.
"""

from __future__ import annotations

import concurrent.futures
import math
import uuid
from logging import INFO, WARNING
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    GetParametersIns,
    NDArrays,
    Parameters,
    Scalar,
)
from flwr.common.logger import log
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from .. import wire
from ..wire.secure import CKKS_SUM, CKKS_SUMMED, CKKS_TOTAL_WEIGHT, CKKS_VALUES
from .aggregation import AggregationConfigError, Aggregator, RoundNotAggregated, Update, WeightedMean
from .bank import GLOBAL, ModelBank, NamedArrays, named
from .common import check_named_update, config_bytes, parameters_bytes, weighted_metric
from .directory import ClientDirectory, distinct_failures, failure_reason
from .evaluation import (DEFAULT_METRICS, ClientEvaluation, EvaluationSchedule, MetricAggregation, fused_metrics,
                         record_evaluation)
from ..wire import PhaseMessage
from .phases import PhaseRunner
from .policy import UPDATE_KINDS, FederationPolicy, Stage, StagePlan
from .records import RoundBook
from .secure import CKKSAggregation, Upload

SECURE_AGG = ("none", "secagg+", "ckks")

EvaluateFn = Callable[[int, NDArrays], "tuple[float, dict[str, Scalar]] | None"]


class FederatedStrategy(Strategy):
    """Federated training with per-round records, built from parts (see the module docstring).

    Parameters
    ----------
    policy: how the federation runs (:class:`~flowergraph.strategies.policy.FederationPolicy`).
    aggregator: how valid updates are combined (default ``WeightedMean("train-size")``).
    initial_parameters: the model to start from: arrays, Flower ``Parameters``, or named arrays (state-dict
        keys); None asks one client for its (seeded) initial model.
    evaluate_fn: optional server-side evaluation ``(round, arrays) -> (loss, {"accuracy": ...})``.
    recorder: optional :class:`flowergraph.storage.results.RunRecorder` receiving one record per round.
    metrics: how the clients' evaluation metrics are aggregated (default
        :class:`~flowergraph.strategies.evaluation.MetricAggregation`).
    update_kind: what clients send back: ``"weights"`` (their whole trained model, default), ``"gradients"``
        (whole, same shapes; the strategy's :meth:`aggregate_updates` steps the model) or ``"partial"`` (any of
        the arrays they were sent, named: each array is averaged over the clients that sent it).
    stages: the run's stages (default one); :meth:`begin_stage` gives each later stage its model.

    The policy's fields are not keyword arguments (``num_clients=3, num_rounds=5`` was removed in 0.3): a
    TypeError names ``policy=FederationPolicy(...)``.
    """

    def __init__(self, policy: FederationPolicy | None = None, *, aggregator: Aggregator | None = None,
                 initial_parameters: Any = None, evaluate_fn: EvaluateFn | None = None, recorder: Any = None,
                 metrics: MetricAggregation | None = None, update_kind: str = "weights",
                 stages: Sequence[Stage] | None = None, **kwargs: Any) -> None:
        super().__init__()
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
        self.directory = ClientDirectory(policy.num_clients, seed=policy.seed,
                                         clients_per_round=policy.clients_per_round)
        self.schedule = EvaluationSchedule(eval_every=policy.eval_every, num_rounds=policy.num_rounds,
                                           fused=policy.fused_eval and policy.full_participation,
                                           separate=self.stage_plan.last_rounds())
        self.book = RoundBook(recorder, listeners=[self.round_closed])
        self.phases = PhaseRunner(self.directory, max_parallel=policy.max_parallel)
        self.ckks = CKKSAggregation(self.phases, policy.min_secure_clients) if policy.secure_agg == "ckks" \
            else None
        self.last_fit_round = 0  # the last round whose fit results reached aggregate_fit
        self.resumed = False  # set by load_state_dict: the run continues from a checkpoint
        self.restored_clients = False  # a resumed run restored its clients' saved state
        self.run_tag = uuid.uuid4().hex[:12]  # names this run's client state files (kept across a resume)
        self.client_checkpoint: dict[str, Any] | None = None  # the last client checkpoint (round, files)
        self._resume_bank: dict[str, Any] | None = None
        self._sampled: list[ClientProxy] = []  # the current fit/evaluate phase's clients (to name failures)
        self._sent: dict[str, tuple[Parameters, str, list[str] | None]] = {}  # this round's fit, per node id

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

    @property
    def recorder(self) -> Any:
        return self.book.recorder

    @property
    def fused_eval(self) -> bool:
        return self.schedule.fused

    @property
    def partition_of(self) -> dict[str, int]:
        return self.directory.partition_of

    @property
    def global_arrays(self) -> NDArrays | None:
        """The global model's arrays, in order (None before the initial model)."""
        model = self.bank.global_model
        return None if model is None else list(model.values())

    @global_arrays.setter
    def global_arrays(self, arrays: Sequence[np.ndarray] | Mapping[str, np.ndarray]) -> None:
        self.bank.set_global(arrays)

    @property
    def stage(self) -> Stage:
        """The stage the run is in."""
        return self.stage_plan.stages[self.stage_index]

    def client_label(self, proxy: ClientProxy | None, metrics: dict[str, Scalar] | None = None) -> str:
        return self.directory.label(proxy, metrics)

    def partition(self, proxy: ClientProxy) -> int | None:
        """The partition id a node holds (None when it did not say)."""
        return self.directory.partition_of.get(proxy.cid)

    def identify_clients(self, client_manager: ClientManager) -> dict[str, int]:
        """Ask every connected client which partition it holds (see :meth:`ClientDirectory.identify`)."""
        return self.directory.identify(client_manager, self.init_timeout)

    def wait_for_clients(self, client_manager: ClientManager) -> None:
        self.directory.wait(client_manager, self.connect_timeout)

    def all_clients(self, client_manager: ClientManager) -> list[ClientProxy]:
        """Every connected client, ordered by partition id."""
        return self.directory.ordered(client_manager.all().values())

    def client_entry(self, partition: int) -> dict[str, Any]:
        """The server-side table entry of a client (created empty; checkpointed with the strategy's state):
        per-client hyper-parameters, a search's per-client state, ... Values: JSON types or numpy arrays."""
        return self.client_table.setdefault(int(partition), {})

    # ------------------------------------------------------------------------------------------ hooks
    def setup(self, client_manager: ClientManager) -> None:
        """One-off method phases after the initial model, before round 1 (default: none)."""

    def begin_stage(self, stage: Stage, server_round: int, client_manager: ClientManager
                    ) -> Mapping[str, np.ndarray] | Sequence[np.ndarray] | None:
        """A later stage starts with round ``server_round``: return its model (the bank is reset to it: groups and
        per-client models of the previous stage are dropped), or None to keep the current one (default)."""
        return None

    def before_fit(self, server_round: int, clients: list[ClientProxy], client_manager: ClientManager) -> None:
        """Per-round method phases before training (default: none). Add a phase's record to the round with
        ``self.book.add_phase(phase.end())``."""

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        """Config sent with every ``fit`` instruction (subclasses add keys)."""
        config: dict[str, Scalar] = {wire.SERVER_ROUND: server_round}
        if self.ckks is not None:
            config[wire.SECURE_AGG] = "ckks"
        if len(self.stage_plan.stages) > 1:
            config[wire.STAGE] = self.stage.name
        return config

    def client_model(self, proxy: ClientProxy) -> tuple[str, list[str] | None]:
        """Which model a client is sent to train and to evaluate: ``(slot, keys)``, the bank slot and the names
        of the arrays it gets (None: all). Default: its own model if the bank holds one, else its group's, else
        the global one, whole. An architecture search returns the sub-network's keys."""
        return self.bank.slot_for(self.partition(proxy)), None

    def client_parameters(self, proxy: ClientProxy, parameters: Parameters) -> Parameters:
        """The serialised model :meth:`client_model` names (``parameters``: the server loop's global model,
        unused by the default)."""
        slot, keys = self.client_model(proxy)
        return self.bank.parameters(slot, keys)

    def fit_instructions(self, server_round: int, parameters: Parameters, clients: list[ClientProxy],
                         config: dict[str, Scalar]) -> list[tuple[ClientProxy, FitIns]]:
        """One ``FitIns`` per sampled client (its model: :meth:`client_model`); override for per-client configs
        (use :meth:`fit_instruction` to build each)."""
        return [(c, self.fit_instruction(c, parameters, config)) for c in clients]

    def fit_instruction(self, proxy: ClientProxy, parameters: Parameters, config: Mapping[str, Scalar]) -> FitIns:
        """The ``FitIns`` of one client: its model and ``config`` (plus the arrays' names when it gets a part)."""
        params, slot, keys = self._model_for(proxy, parameters)
        self._sent[proxy.cid] = (params, slot, keys)
        config = dict(config)
        if keys is not None:
            config[wire.KEYS] = wire.encode_keys(keys)
        return FitIns(params, config)

    def aggregate_updates(self, server_round: int, updates: list[Update], weights: list[float]
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

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        config: dict[str, Scalar] = {wire.SERVER_ROUND: server_round}
        if len(self.stage_plan.stages) > 1:
            config[wire.STAGE] = self.stage.name
        return config

    def evaluate_instructions(self, server_round: int, parameters: Parameters,
                              clients: list[ClientProxy]) -> list[tuple[ClientProxy, EvaluateIns]]:
        """One ``EvaluateIns`` per client: its model (:meth:`client_model`) and :meth:`evaluate_config`; override
        for per-client evaluation (each client's own architecture or mixture)."""
        out = []
        for proxy in clients:
            params, _, keys = self._model_for(proxy, parameters)
            config = dict(self.evaluate_config(server_round))
            if keys is not None:
                config[wire.KEYS] = wire.encode_keys(keys)
            out.append((proxy, EvaluateIns(params, config)))
        return out

    def after_evaluate(self, server_round: int, evaluations: list[ClientEvaluation]) -> None:
        """Every client's evaluation of round ``server_round``'s model(s), once the round's evaluation is complete
        (called from the separate evaluation and from fused evaluation alike; default: nothing)."""

    def round_closed(self, record: dict[str, Any]) -> None:
        """Round ``record["round"]``'s record is complete and written (time, bytes, training and evaluation
        results; round 0: a one-off phase). Default: nothing. With fused evaluation a round's record closes when
        the next round's fit returns."""

    # ------------------------------------------------------------------------------------- model bookkeeping
    def _model_for(self, proxy: ClientProxy, parameters: Parameters) -> tuple[Parameters, str, list[str] | None]:
        """The serialised model of one client, the bank slot it comes from and its keys (None: all)."""
        if type(self).client_parameters is not FederatedStrategy.client_parameters:  # an older subclass's hook
            return self.client_parameters(proxy, parameters), "", None
        slot, keys = self.client_model(proxy)
        return self.bank.parameters(slot, keys), slot, keys

    def _reference(self, proxy: ClientProxy) -> NamedArrays | None:
        """The named arrays a client was sent in this round's fit (what its update is checked against)."""
        sent = self._sent.get(proxy.cid)
        if sent is None:
            return self.bank.global_model
        params, slot, keys = sent
        if not slot:  # built by an overriding client_parameters: decode what travelled
            arrays = wire.to_ndarrays(params)
            model = self.bank.global_model
            return named(arrays, list(model) if model is not None and len(model) == len(arrays) else None)
        model = self.bank.get(slot) or {}
        return model if keys is None else {k: model[k] for k in keys}

    def _adopt(self, parameters: Parameters | None) -> None:
        """The server loop's model becomes the global model when it is another model of the same shapes (Flower's
        contract: a round trains the parameters the loop passes, e.g. a DP wrapper's noisy release). The
        bank's own serialisation (what :meth:`aggregate_fit` returned) costs nothing; a loop model of other
        shapes (the previous stage's, after a stage changed the model) is ignored."""
        if parameters is None or not parameters.tensors or self.bank.is_current(GLOBAL, parameters):
            return
        current = self.bank.global_model
        arrays = wire.to_ndarrays(parameters)
        if current is None:
            self.bank.set(GLOBAL, named(arrays), parameters=parameters)
        elif len(arrays) == len(current) and all(a.shape == b.shape for a, b in zip(arrays, current.values())):
            self.bank.set(GLOBAL, named(arrays, list(current)), parameters=parameters)

    def _enter_stage(self, server_round: int, client_manager: ClientManager) -> None:
        index = self.stage_plan.index(server_round)
        while self.stage_index < index:
            self.stage_index += 1
            stage = self.stage
            new = self.begin_stage(stage, server_round, client_manager)
            if new is not None:
                self.bank.reset(global_model=new if isinstance(new, Mapping) else named(new))
            self.book.start(server_round)["stage_started"] = stage.name
            log(INFO, "stage %r starts with round %d%s", stage.name, server_round,
                "" if new is None else f" ({len(self.bank.global_model or {})} arrays)")

    # ---------------------------------------------------------------------------------------- Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.directory.wait(client_manager, self.connect_timeout)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            identities = pool.submit(self.directory.identify, client_manager, self.init_timeout)
            initial, keys = self.initial_parameters, None
            self.initial_parameters = None  # free memory
            if isinstance(initial, Mapping):
                arrays, keys = list(initial.values()), list(initial)
            elif isinstance(initial, Parameters):
                arrays = wire.to_ndarrays(initial)
            elif initial is not None:
                arrays = list(initial)
            else:
                arrays, keys = self._ask_initial_model(client_manager, identities)
            identities.result()
        if self._resume_bank is not None:  # a resumed run: the checkpoint's model with its names, groups, clients
            self.bank.load_state_dict(self._resume_bank, global_arrays=arrays)
            self._resume_bank = None
        else:
            self.bank.set_global(named(arrays, keys))
        if self.resumed and self.stateful_clients and self.client_checkpoint is not None:
            self.restore_clients(client_manager)
        if self.ckks is not None:
            record = self.ckks.setup(self.all_clients(client_manager), self.init_timeout)
            if not self.resumed:
                self.book.write({**record, "elapsed_s": 0.0})
        self.setup(client_manager)
        return self.bank.parameters(GLOBAL)

    def _ask_initial_model(self, client_manager: ClientManager, identities: concurrent.futures.Future[Any]
                           ) -> tuple[NDArrays, list[str] | None]:
        """One client's initial model, and the names it gave them in the identity reply (None if it gave none)."""
        proxy = sorted(client_manager.all().values(), key=lambda c: c.cid)[0]
        try:
            res = proxy.get_parameters(GetParametersIns(config={}), timeout=self.init_timeout, group_id=0)
        except Exception as exc:
            identities.result()  # a client's refusal of the run is the better error
            raise RuntimeError(f"client node {proxy.cid} could not send the initial model: "
                               f"{failure_reason(exc)}") from exc
        if not res.parameters.tensors:
            identities.result()
            raise RuntimeError(f"client node {proxy.cid} returned no initial parameters: "
                               f"{failure_reason(res.status.message)}")
        arrays = wire.to_ndarrays(res.parameters)
        identities.result()
        keys = self.directory.model_keys.get(proxy.cid)
        return arrays, keys if keys is not None and len(keys) == len(arrays) else None

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        self.book.start(server_round)
        self._adopt(parameters)
        self._enter_stage(server_round, client_manager)
        if len(self.stage_plan.stages) > 1:
            self.book.start(server_round)["stage"] = self.stage.name
        self._sent = {}
        clients = self.directory.sample(client_manager, self.fraction_fit, server_round, "fit")
        self._sampled = clients
        self.before_fit(server_round, clients, client_manager)
        config = self.fit_config(server_round)
        if self.book.held is not None:
            config[wire.EVALUATE_GLOBAL] = True
        instructions = self.fit_instructions(server_round, parameters, clients, config)
        for proxy, ins in instructions:  # an overriding fit_instructions may bypass fit_instruction
            self._sent.setdefault(proxy.cid, (ins.parameters, "", None))
        return self._counted(instructions)

    def _counted(self, instructions: list[Any]) -> list[Any]:
        """``instructions`` (fit or evaluate), their bytes added to the round's record."""
        self.book.add_bytes(down=sum(parameters_bytes(ins.parameters) + config_bytes(ins.config)
                                     for _, ins in instructions))
        return instructions

    def aggregate_fit(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                      failures: list[tuple[ClientProxy, FitRes] | BaseException]
                      ) -> tuple[Parameters | None, dict[str, Scalar]]:
        rec = self.book.start(server_round)
        self.last_fit_round = server_round
        failures = distinct_failures(failures)
        rec["num_failures"] = len(failures)
        rec["failures"] = self.directory.name_failures(server_round, results, failures, "train", self._sampled)
        results = sorted(results, key=lambda pr: (int(pr[1].metrics.get(wire.PARTITION_ID, -1)), pr[0].cid))
        if self.book.held is not None:  # fused: these fits evaluated the previous round's model first
            self._record_fused_evaluation(server_round, results)
        if self.ckks is not None:
            return self._aggregate_ckks(server_round, results, rec)
        if self.secure_agg == "secagg+":  # what SecAgg+ handed over: one aggregate, copied into every result
            rec["secure_agg"] = {"mode": "secagg+", "distinct_payloads": len({
                hash(b"".join(res.parameters.tensors)) for _, res in results})}
            problem = self._secagg_sum_problem(results)
            if problem is not None:
                log(WARNING, "round %s: the SecAgg+ sum is not usable: %s; the model is kept unchanged", server_round,
                    problem)
                rec.update(not_aggregated=f"the unmasked SecAgg+ sum is not usable: {problem}", rejected=[],
                           num_fit=0)
                return self._not_aggregated(server_round, rec, [])
        updates, weights, rejected, norms = [], [], [], []
        for proxy, res in results:
            self.book.add_bytes(up=parameters_bytes(res.parameters) + config_bytes(res.metrics))
            label = self.client_label(proxy, res.metrics)
            update, problem = self._accept(proxy, res, label)
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
            if self.policy.max_update_norm > 0:
                norms.append(self._update_norm(proxy, update))
            fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
            rec.setdefault("clients", {}).setdefault(label, {}).update(
                {"num_train": int(res.num_examples), "fit_weight": weight,
                 **{f"fit_{k}": v for k, v in fit_metrics.items() if k != wire.NUM_TRAIN}})
        if norms and len(updates) >= 3:
            updates, weights = self._refuse_outliers(server_round, updates, weights, norms, rejected, rec)
        rec["rejected"] = rejected
        rec["num_fit"] = len(updates)
        rec["train_loss"] = weighted_metric((u.metrics.get(wire.TRAIN_LOSS), w) for u, w in zip(updates, weights))
        needed = max(self.min_clients or 1, 1)
        if len(updates) < needed or sum(weights) <= 0:
            log(WARNING, "round %s: %d valid updates (%d needed, total weight %.3g); the model is kept unchanged",
                server_round, len(updates), needed, sum(weights))
            return self._not_aggregated(server_round, rec, updates)
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
        return self.bank.parameters(GLOBAL), {"num_fit": len(updates)}

    def _accept(self, proxy: ClientProxy, res: FitRes, label: str) -> tuple[Update, str | None]:
        """The client's update and why it is malformed (None when it is not)."""
        try:
            arrays = wire.to_ndarrays(res.parameters)
        except Exception as exc:  # noqa: BLE001 (undecodable payload)
            return Update(label, [], int(res.num_examples), dict(res.metrics)), \
                f"undecodable update ({type(exc).__name__}: {exc})"
        reference = self._reference(proxy) or {}
        try:
            keys = wire.decode_keys(res.metrics, len(arrays))
        except ValueError as exc:
            return Update(label, arrays, int(res.num_examples), dict(res.metrics)), str(exc)
        problem = check_named_update(arrays, keys, reference, partial=self.update_kind == "partial")
        return Update(label, arrays, int(res.num_examples), dict(res.metrics),
                      keys=list(keys) if keys is not None else list(reference)), problem

    def _update_norm(self, proxy: ClientProxy, update: Update) -> float:
        """The L2 norm of an accepted update: of the arrays themselves (``gradients``), else of their difference
        to the arrays the client was sent."""
        if self.update_kind == "gradients":
            return float(math.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in update.arrays)))
        reference = self._reference(proxy) or {}
        keys = update.keys if update.keys is not None else list(reference)
        total = 0.0
        for key, array in zip(keys, update.arrays):
            diff = np.asarray(array, dtype=np.float64) - np.asarray(reference[key], dtype=np.float64)
            total += float(np.sum(np.square(diff)))
        return math.sqrt(total)

    def _refuse_outliers(self, server_round: int, updates: list[Update], weights: list[float], norms: list[float],
                         rejected: list[dict[str, str]], rec: dict[str, Any]) -> tuple[list[Update], list[float]]:
        """``max_update_norm``: the updates whose norm exceeds that multiple of the round's median norm are
        refused (recorded under ``rejected``); the others are returned."""
        limit = self.policy.max_update_norm
        median = float(np.median(norms))
        keep_u, keep_w = [], []
        for update, weight, norm in zip(updates, weights, norms):
            if median > 0 and norm > limit * median:
                reason = (f"update norm {norm:.4g} is {norm / median:.3g} x the round's median {median:.4g}, above "
                          f"max-update-norm={limit:g}")
                log(WARNING, "round %s: refused the update of client %s: %s", server_round, update.client, reason)
                rejected.append({"client": update.client, "reason": reason})
                rec.get("clients", {}).pop(update.client, None)
                continue
            keep_u.append(update)
            keep_w.append(weight)
        return keep_u, keep_w

    def _secagg_sum_problem(self, results: list[tuple[ClientProxy, FitRes]]) -> str | None:
        """What is wrong with the average SecAgg+ unmasked (the same in every result), or None: it must be finite
        and, as a weighted average of values clipped to the clipping range, inside it (a NaN a client sent, or an
        overflow, lands anywhere after Flower's quantisation)."""
        if not results:
            return None
        try:
            arrays = wire.to_ndarrays(results[0][1].parameters)
        except Exception as exc:  # noqa: BLE001
            return f"undecodable ({type(exc).__name__}: {exc})"
        bad = sum(int(np.size(a) - np.count_nonzero(np.isfinite(a))) for a in arrays)
        if bad:
            return f"{bad} NaN or infinite value(s)"
        bound = self.policy.secagg_clipping_range
        if bound is not None and arrays:
            largest = max(float(np.max(np.abs(a))) if np.size(a) else 0.0 for a in arrays)
            if largest > bound * (1 + 1e-3):
                return (f"a value of magnitude {largest:.4g}, outside the clipping range {bound:g} that bounds an "
                        f"average of clipped updates")
        return None

    def _not_aggregated(self, server_round: int, rec: dict[str, Any], updates: list[Update]
                        ) -> tuple[Parameters | None, dict[str, Scalar]]:
        rec["aggregated"] = False
        self.after_fit(server_round, updates)
        return None, {"num_fit": len(updates)}

    def measured_fit_bytes(self, server_round: int, down: int, up: int,
                           stages: Sequence[tuple[int, int, float]] = ()) -> None:
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
        SecAgg+ stopped): recorded, and the model is kept."""
        rec = self.book.start(server_round)
        rec.update(aggregated=False, not_aggregated=reason, num_fit=0)
        log(WARNING, "round %s: %s; the global model is kept unchanged", server_round, reason)

    def _aggregate_ckks(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                        rec: dict[str, Any]) -> tuple[Parameters | None, dict[str, Scalar]]:
        """secure-agg=ckks: add the encrypted updates, have a client decrypt the sum (strategies/secure.py)."""
        assert self.ckks is not None
        uploads: list[Upload] = []
        weights: list[float] = []
        metrics: list[dict[str, Scalar]] = []
        for proxy, res in results:
            self.book.add_bytes(up=parameters_bytes(res.parameters) + config_bytes(res.metrics))
            label = self.client_label(proxy, res.metrics)
            arrays: list[Any]
            try:
                arrays = wire.to_ndarrays(res.parameters)
            except Exception as exc:  # noqa: BLE001
                arrays = [f"undecodable: {exc}"]
            uploads.append(Upload(proxy, label, self.partition(proxy), arrays, dict(res.metrics),
                                  int(res.num_examples)))
            fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
            rec.setdefault("clients", {}).setdefault(label, {}).update(
                {"num_train": int(res.num_examples), **{f"fit_{k}": v for k, v in fit_metrics.items()
                                                         if k not in (wire.NUM_TRAIN, CKKS_VALUES)}})
            weights.append(float(res.num_examples))
            metrics.append(res.metrics)
        rec["train_loss"] = weighted_metric((_number(m.get(wire.TRAIN_LOSS)), w) for m, w in zip(metrics, weights))
        needed = max(self.min_clients or 1, self.ckks.min_clients)
        mean: list[np.ndarray] | None = None
        info: dict[str, Any] = {"mode": "ckks", "summed": 0}
        # what the clients were sent (the global model, or the part client_model names: every client is sent the
        # same arrays, since per-client models cannot be summed): the shapes of the encrypted update
        sent = self._reference(results[0][0]) if results else None
        if sent is None:
            sent = self.bank.global_model or {}
        if len(uploads) >= needed:
            mean, info = self.ckks.aggregate(server_round, uploads, list(sent.values()), self.round_timeout)
            self.book.add_bytes(down=info.pop("bytes_down", 0), up=info.pop("bytes_up", 0))
        else:
            info["error"] = (f"{len(uploads)} encrypted update(s) arrived, fewer than {needed}: a sum of so few is "
                             f"never decrypted")
        rec["secure_agg"] = info
        rec["rejected"] = info.get("rejected", [])
        rec["num_fit"] = int(info.get("summed", 0))
        if mean is None or rec["num_fit"] < needed:
            log(WARNING, "round %s: %d encrypted updates summed (%d needed)%s; the global model is kept unchanged",
                server_round, rec["num_fit"], needed, f": {info['error']}" if "error" in info else "")
            rec["aggregated"] = False
            self.after_fit(server_round, [])
            return None, {"num_fit": rec["num_fit"]}
        # The decrypted weighted mean, as one update of weight 1 (the mean of one update is itself): the default
        # aggregate_updates adopts it as the new model; a method that sends gradients steps its model with it.
        total_weight = float(info.get("total_weight", 0.0))
        update = Update(CKKS_SUM, mean, int(round(total_weight)),
                        {CKKS_TOTAL_WEIGHT: total_weight, CKKS_SUMMED: rec["num_fit"]}, keys=list(sent))
        try:
            new = self.aggregate_updates(server_round, [update], [1.0])
        except RoundNotAggregated as exc:
            log(WARNING, "round %s: %s; the model is kept unchanged", server_round, exc)
            rec["not_aggregated"] = str(exc)
            rec["aggregated"] = False
            self.after_fit(server_round, [update])
            return None, {"num_fit": rec["num_fit"]}
        if new is not None:
            self.bank.set_global(new)
        rec["aggregated"] = True
        self.after_fit(server_round, [update])
        return self.bank.parameters(GLOBAL), {"num_fit": rec["num_fit"]}

    def _record_fused_evaluation(self, server_round: int, results: list[tuple[ClientProxy, FitRes]]) -> None:
        """Round r-1's evaluation, from the ``eval_*`` metrics of round r's fit replies. A client that ignored the
        ``evaluate_global`` flag is evaluated now with a separate message (on the arrays it was sent), and fused
        evaluation is turned off for the rest of the run."""
        held = self.book.take_held()
        assert held is not None
        per_client, ignored = [], []
        for proxy, res in results:
            metrics = fused_metrics(res.metrics)
            if metrics:
                per_client.append((self.client_label(proxy, res.metrics), metrics))
            else:
                ignored.append((proxy, self.client_label(proxy, res.metrics)))
        rows = record_evaluation(held, per_client, self.metrics)
        if ignored:
            labels = ", ".join(label for _, label in ignored)
            log(WARNING, "round %s: client(s) %s ignored the fused-evaluation flag '%s'; evaluating round %s's model "
                "on them with a separate message, and using separate evaluation from now on", server_round,
                labels, wire.EVALUATE_GLOBAL, server_round - 1)
            self.schedule.fused = False
            held["fused_eval_fallback"] = [label for _, label in ignored]
            rows += self._evaluate_directly(held, [p for p, _ in ignored], held["round"])
        self.after_evaluate(int(held["round"]), rows)
        self.book.write(held)

    def _evaluate_directly(self, rec: dict[str, Any], clients: list[ClientProxy],
                           server_round: int) -> list[ClientEvaluation]:
        """Evaluate ``clients`` now on the arrays this round's fit sent them (fused evaluation's fallback)."""
        config = self.evaluate_config(server_round)
        sent = {p.cid: self._sent[p.cid][0] for p in clients}

        def call(proxy: ClientProxy) -> tuple[ClientProxy, EvaluateRes]:
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
        return record_evaluation(rec, [(self.client_label(proxy, res.metrics), self._eval_row(res))
                                       for proxy, res in results], self.metrics)

    @staticmethod
    def _eval_row(res: EvaluateRes) -> dict[str, Any]:
        return {**res.metrics, wire.NUM_TEST: res.metrics.get(wire.NUM_TEST, res.num_examples),
                wire.LOSS: res.metrics.get(wire.LOSS, res.loss)}

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict[str, Scalar]] | None:
        if self.evaluate_fn is None:
            return None
        arrays = self.global_arrays if self.global_arrays is not None else wire.to_ndarrays(parameters)
        result = self.evaluate_fn(server_round, arrays)
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
        self._adopt(parameters)
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
        return self._counted(self.evaluate_instructions(server_round, parameters, clients))

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
        rows = record_evaluation(rec, [(self.client_label(proxy, res.metrics), self._eval_row(res))
                                       for proxy, res in results], self.metrics)
        metrics = {k: rec[k] for k in self.metrics.names if rec.get(k) is not None}
        self.after_evaluate(server_round, rows)
        self.book.flush()
        return metrics.get(wire.LOSS), metrics

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
        from ..wire.state import STATE_SAVE, StateReply, StateRequest

        phase = self.phases.begin("client-checkpoint", server_round, timeout=self.round_timeout)
        replies = phase.send(STATE_SAVE, self.all_clients(client_manager),
                             PhaseMessage(values=StateRequest(self.run_tag).values()), require_all=False)
        record = phase.end()
        self.client_checkpoint = {"round": server_round, "run_tag": self.run_tag,
                                  "files": {r.client: StateReply.decode(r.values).path for r in replies},
                                  "missing": [f["client"] for f in record["failures"]]}
        log(INFO, "flowergraph: %d client state file(s) for round %d (%.2f s)%s", len(replies), server_round,
            record["time_s"], f"; MISSING for {record['failures']}" if record["failures"] else "")
        return self.client_checkpoint

    def restore_clients(self, client_manager: ClientManager) -> None:
        """Every client loads the state it saved at the checkpoint this run resumes from (all must succeed)."""
        from ..wire.state import STATE_LOAD, StateRequest

        ckpt = self.client_checkpoint
        assert ckpt is not None
        phase = self.phases.begin("client-restore", int(ckpt["round"]), timeout=self.init_timeout)
        phase.send(STATE_LOAD, self.all_clients(client_manager),
                   PhaseMessage(values=StateRequest(str(ckpt["run_tag"])).values()), require_all=True)
        record = phase.end()
        self.restored_clients = True
        log(INFO, "flowergraph: every client restored its state of round %s (%.2f s)", ckpt["round"],
            record["time_s"])

    # --------------------------------------------------------------------------------- state (checkpoints)
    def state_dict(self) -> dict[str, Any]:
        """The strategy's state besides the global model's arrays and the round (see
        :mod:`flowergraph.storage.checkpoint`): the round record held back for fused evaluation, the elapsed
        training time, the run's tag and last client checkpoint, the model bank (groups, per-client models, the
        global model's names), the stage and the per-client table. Subclasses with state of their own extend it
        (``{**super().state_dict(), "agent": {...}}``) and :meth:`load_state_dict`."""
        return {**self.book.state_dict(), "fused_eval": self.schedule.fused, "run_tag": self.run_tag,
                "client_checkpoint": self.client_checkpoint, "bank": self.bank.state_dict(),
                "stage_index": self.stage_index,
                "client_table": {str(p): entry for p, entry in sorted(self.client_table.items())}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (call before the first round of the resumed run)."""
        self.book.load_state_dict(state)
        if "fused_eval" in state:
            self.schedule.fused = self.schedule.fused and bool(state["fused_eval"])
        self.run_tag = str(state.get("run_tag") or self.run_tag)
        self.client_checkpoint = state.get("client_checkpoint")
        self._resume_bank = state.get("bank")  # applied with the checkpoint's model in initialize_parameters
        self.stage_index = int(state.get("stage_index", 0))
        self.client_table = {int(p): dict(entry) for p, entry in (state.get("client_table") or {}).items()}
        self.resumed = True


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def resolve_policy(policy: FederationPolicy | None, kwargs: dict[str, Any], owner: str) -> FederationPolicy:
    """``policy``; ``kwargs`` are the constructor's keyword arguments left over, each refused with a TypeError: a
    field of the policy names ``policy=FederationPolicy(...)`` (0.3 removed the policy's fields as keyword
    arguments of a strategy), any other key the policy's fields."""
    fields = sorted(k for k in kwargs if k in FederationPolicy.field_names())
    if fields:
        raise TypeError(f"{owner}({', '.join(f'{k}=' for k in fields)}...): the policy's fields are not keyword "
                        f"arguments of a strategy (removed in 0.3); pass "
                        f"policy=FederationPolicy({', '.join(f'{k}=...' for k in fields)})")
    unknown = sorted(kwargs)
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword argument(s) {', '.join(unknown)}; the policy's fields "
                        f"are {', '.join(FederationPolicy.field_names())}")
    if policy is None:
        raise TypeError(f"{owner}() needs policy=FederationPolicy(num_clients=...)")
    return policy
