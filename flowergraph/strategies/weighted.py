"""Weighted averaging (FedAvg; FedGCN's "0-hop"): the strategy every node-level method builds on.

Wire protocol (NumPyClient messages; every client runs :class:`flowergraph.clients.node.NodeClassificationClient`
or a subclass)
---------------------------------------------------------------------------------------------------------------
Phase INIT, once: ``get_properties`` to every connected client, config ``{"flowergraph": "identity"}``,
and (in parallel) ``get_parameters`` to one of them (lowest node id), config ``{}``.
    client -> server: properties ``{"partition_id": int}`` (which partition each node holds: failures are
    logged by partition id, and client sampling is seeded per (seed, round) over partition ids, so it does not
    depend on Flower's random node ids); the model's arrays, in ``state_dict`` order (GCN hidden 16 on Cora:
    4 arrays, 1433x16, 16, 16x7, 7, float32). The server learns the partition ids and the architecture.
    A client that does not answer the identity request is labelled by its node id. With a checkpoint to
    resume from (``initial_parameters``), no ``get_parameters`` is sent.

Phase TRAIN, every round r = 1..R: ``fit`` to the sampled clients.
    server -> client: parameters = the global arrays; config ``{"server_round": int r}``, plus
    ``"evaluate_global": True`` with fused evaluation when round r-1's model is due for evaluation.
    client -> server: parameters = the locally trained arrays (same count, shapes and dtypes);
    ``num_examples`` = the client's number of training nodes; metrics
    ``{"partition_id": int, "train_loss": float (NaN when it has no training node), "num_train": int,
    "batch_size": int}`` (full batch: batch_size = num_train).
    With ``evaluate_global`` the client first evaluates the arrays it received (the global model after round
    r-1) and adds the EVALUATE metrics below, each key prefixed with ``eval_`` (``eval_accuracy``,
    ``eval_loss``, ``eval_num_test``, ...), then trains.
    The server learns each client's model update, training-set size and mean training loss.

Phase EVALUATE, every ``eval_every`` rounds and after the last: ``evaluate`` to the sampled clients. With
fused evaluation (``fused_eval=True``) only after the last round; every other evaluation travels inside the
next round's ``fit`` (one message per client per round instead of two: Flower's simulation dispatches each
message phase on a 0.1 s tick, so this halves the per-round floor; the numbers are the same).
    server -> client: parameters = the new global arrays; config ``{"server_round": int r}``.
    client -> server: loss = test loss (0.0 when it has no test node); ``num_examples`` = number of test
    nodes; metrics ``{"partition_id": int, "accuracy": float, "loss": float, "num_test": int,
    "val_accuracy": float, "val_loss": float, "num_val": int, "train_accuracy": float}`` (NaN for an empty
    set). The server learns per-client accuracies and set sizes.

Aggregation: ``w = sum_k a_k w_k / sum_k a_k`` with ``a_k`` the training-node count (``train-size``,
default), the reported ``batch_size`` (``batch-size``) or 1 (``uniform``, the FedGCN reference code).
An update with the wrong array count/shapes, a non-numeric dtype or NaN/Inf values is rejected and logged
with the client's partition id; when fewer than ``min_clients`` valid updates remain, the global model is
kept unchanged for that round. Accuracy and loss are aggregated weighted by test-node counts.

Failures: a client whose message fails (it raised, its process died, the round timed out: Flower's
``failures``) is logged with its partition id and left out of the round; so is a rejected update. A failure
whose reason carries :data:`CONFIG_ERROR_MARKER` (a client refused the run because of bad input, see
:mod:`flowergraph.client_app`) fails the whole run with that message instead: bad input never trains silently.

State (checkpoints): :meth:`WeightedAveraging.state_dict` returns what the strategy needs, besides the global
arrays and the round number, to continue a run exactly (the round record held back for fused evaluation, the
elapsed time); :meth:`load_state_dict` restores it. A stateful subclass (an RL agent, a population) extends
both: values may be JSON types or numpy arrays, nested in dicts and lists (see :mod:`flowergraph.checkpoint`).

Records: one per round (see :mod:`flowergraph.results`). ``time_s`` is the round's wall time (fit, server
evaluation, separate client evaluation); with fused evaluation a round's client evaluation runs inside the
next round's fit, so its record is written when that fit returns.
"""

from __future__ import annotations

import concurrent.futures
import math
import re
import time
from logging import INFO, WARNING
from typing import Any, Callable

import numpy as np
from flwr.common import (
    Code,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    GetParametersIns,
    GetPropertiesIns,
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

from .common import check_update, config_bytes, parameters_bytes, weighted_average, weighted_metric

WEIGHTINGS = ("train-size", "batch-size", "uniform")
# Clients prefix errors caused by bad input (node or run configuration, data, key files) with this marker; the
# strategy then fails the run with the message instead of training without that client.
CONFIG_ERROR_MARKER = "flowergraph refused the run:"
IDENTITY_REQUEST = {"flowergraph": "identity"}
_PHASE_CODES = {"fit": 1, "evaluate": 2}


def failure_reason(exc: BaseException | str, limit: int = 300) -> str:
    """A one-line reason from Flower's failure texts (which wrap the client's error in several layers)."""
    text = str(exc)
    if "Node Unavailable" in text:
        return "the node went offline (no heartbeat: its SuperNode stopped or lost its connection)"
    if "Message Unavailable" in text:
        return "no reply in time (the message expired after round-timeout, or its node left the federation)"
    if "ActorDiedError" in text or "actor died" in text.lower():
        return "the client's process died (Ray: ActorDiedError)"
    m = re.search(r"Message: (.*?)'?>\)?\. It originated", text, flags=re.S)
    if m:
        text = m.group(1)
    text = " ".join(text.split()).strip(" '>")
    return text if len(text) <= limit else text[: limit - 3] + "..."


EvaluateFn = Callable[[int, NDArrays], "tuple[float, dict[str, Scalar]] | None"]


class WeightedAveraging(Strategy):
    """Sample-weighted federated averaging with per-round records.

    Parameters
    ----------
    num_clients: clients expected in the federation; the strategy waits up to ``connect_timeout`` seconds for
        them before the first round and fails with a clear error if they do not all connect.
    initial_parameters: global arrays to start from; None asks one client for its (seeded) initial model.
    weighting: ``"train-size"`` (default), ``"batch-size"`` or ``"uniform"``.
    fraction_fit, fraction_evaluate: fraction of connected clients sampled per round.
    min_clients: fewest valid updates that still change the global model (default 1: failed or rejected
        clients are left out and the round goes on with the rest).
    eval_every: client-side evaluation every N rounds (the final round ``num_rounds`` is always evaluated).
    num_rounds: the run's length (only used to evaluate the last round and to label progress).
    evaluate_fn: optional server-side evaluation ``(round, arrays) -> (loss, {"accuracy": ...})``.
    recorder: optional :class:`flowergraph.results.RunRecorder` receiving one record per round.
    connect_timeout: seconds to wait for ``num_clients`` clients before the first round.
    round_timeout: seconds a direct request (identity, initial parameters, method phases such as FedGCN's
        communication phase) may take; the training rounds' timeout is Flower's ``ServerConfig.round_timeout``.
    clients_per_round: cap on the clients sampled per round (``centralized`` uses 1).
    seed: seeds client sampling (``fraction_fit`` / ``fraction_evaluate`` < 1): round r samples the same
        partitions in every run with this seed, so a resumed run samples what the uninterrupted one did.
    fused_eval: evaluate each round's global model inside the next round's ``fit`` message (clients must
        honour the ``evaluate_global`` fit-config flag, as :class:`NodeClassificationClient` does); the last
        round is evaluated separately. Needs ``num_rounds`` and full participation (``fraction_fit`` =
        ``fraction_evaluate`` = 1, no ``clients_per_round``), otherwise the fit sample is not the evaluation
        sample: then the separate evaluate phase is used.
    """

    def __init__(self, *, num_clients: int, initial_parameters: NDArrays | Parameters | None = None,
                 weighting: str = "train-size", fraction_fit: float = 1.0, fraction_evaluate: float = 1.0,
                 min_clients: int | None = None, eval_every: int = 1, num_rounds: int | None = None,
                 evaluate_fn: EvaluateFn | None = None, recorder=None, connect_timeout: float = 600.0,
                 round_timeout: float | None = None, clients_per_round: int | None = None,
                 fused_eval: bool = False, seed: int = 0) -> None:
        super().__init__()
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; valid choices: {', '.join(WEIGHTINGS)}")
        if num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {num_clients}")
        for name, value in (("fraction_fit", fraction_fit), ("fraction_evaluate", fraction_evaluate)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if min_clients is not None and not 0 <= min_clients <= num_clients:
            raise ValueError(f"min_clients must be in [0, num_clients={num_clients}], got {min_clients}")
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        if isinstance(initial_parameters, list):
            initial_parameters = ndarrays_to_parameters(initial_parameters)
        self.num_clients = num_clients
        self.initial_parameters = initial_parameters
        self.weighting = weighting
        self.fraction_fit = fraction_fit
        self.fraction_evaluate = fraction_evaluate
        self.min_clients = min_clients
        self.eval_every = eval_every
        self.num_rounds = num_rounds
        self.evaluate_fn = evaluate_fn
        self.recorder = recorder
        self.connect_timeout = connect_timeout
        self.round_timeout = round_timeout
        self.clients_per_round = clients_per_round
        self.fused_eval = bool(fused_eval and num_rounds is not None and fraction_fit == 1.0
                               and fraction_evaluate == 1.0 and clients_per_round is None)
        self.seed = int(seed)
        self.global_arrays: NDArrays | None = None
        self.partition_of: dict[str, int] = {}  # node id (proxy.cid) -> partition id, from the identity phase
        self.resumed = False  # set by load_state_dict: the run continues from a checkpoint
        self._elapsed_offset = 0.0
        self._sampled: list[ClientProxy] = []  # the current phase's clients (to name failures)
        self._pending: dict[str, Any] = {}
        self._held: dict[str, Any] | None = None  # fused: a finished round waiting for its evaluation
        self._t0: float | None = None
        self._round_start: float | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_clients={self.num_clients}, weighting={self.weighting!r})"

    # ----------------------------------------------------------------------------------------- helpers
    def wait_for_clients(self, client_manager: ClientManager) -> None:
        if not client_manager.wait_for(self.num_clients, timeout=int(math.ceil(self.connect_timeout))):
            raise RuntimeError(
                f"only {client_manager.num_available()} of num_clients={self.num_clients} clients connected "
                f"within {self.connect_timeout:.0f} s; start one SuperNode per client (simulation: "
                f"num-supernodes must equal num-clients)")

    def _ordered(self, clients) -> list[ClientProxy]:
        """Clients ordered by partition id (nodes that did not identify themselves last, by node id)."""
        return sorted(clients, key=lambda c: (0, self.partition_of[c.cid], "") if c.cid in self.partition_of
                      else (1, 0, c.cid))

    def _sample(self, client_manager: ClientManager, fraction: float, server_round: int = 0,
                phase: str = "fit") -> list[ClientProxy]:
        """``round(fraction x available)`` clients (at least 1), drawn with a generator seeded by (seed,
        round, phase) over the clients ordered by partition id: the same partitions in every run."""
        available = self._ordered(client_manager.all().values())
        n = max(1, int(round(fraction * len(available)))) if fraction > 0 and available else 0
        if self.clients_per_round is not None:
            n = min(n, self.clients_per_round)
        if n == 0:
            return []
        if n >= len(available):
            return available
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, server_round, _PHASE_CODES[phase]]))
        return [available[i] for i in sorted(rng.choice(len(available), size=n, replace=False))]

    def _start_round(self, server_round: int) -> None:
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now - self._elapsed_offset
        if self._round_start is None or self._pending.get("round") != server_round:
            self._round_start = now
            self._pending = {"round": server_round, "bytes_down": 0, "bytes_up": 0}

    def _close_round(self) -> dict[str, Any] | None:
        """End the current round's clock; returns its record (not yet written)."""
        if not self._pending:
            return None
        now = time.perf_counter()
        record = self._pending
        record["time_s"] = now - (self._round_start or now)
        record["elapsed_s"] = now - (self._t0 or now)
        self._pending = {}
        self._round_start = None
        return record

    def _write(self, record: dict[str, Any] | None) -> None:
        if record is not None and self.recorder is not None:
            self.recorder.write_round(record)

    def _flush_round(self) -> None:
        self._write(self._close_round())

    def finish(self) -> None:
        """Write any record still held back (fused evaluation whose next fit never came; a failed run)."""
        if self._held is not None:
            held, self._held = self._held, None
            self._write(held)
        self._flush_round()

    def fit_config(self, server_round: int) -> dict[str, Scalar]:
        """Config sent with every ``fit`` instruction (subclasses add keys)."""
        return {"server_round": server_round}

    def evaluate_config(self, server_round: int) -> dict[str, Scalar]:
        return {"server_round": server_round}

    def client_label(self, proxy: ClientProxy | None, metrics: dict[str, Scalar] | None = None) -> str:
        """A client's name in logs and records: its partition id, else its node id."""
        if metrics and "partition_id" in metrics:
            return str(int(metrics["partition_id"]))
        if proxy is None:
            return "unknown"
        if proxy.cid in self.partition_of:
            return str(self.partition_of[proxy.cid])
        return f"node {proxy.cid}"

    def _failures(self, server_round: int, results, failures, what: str) -> list[dict[str, str]]:
        """Name and log every failure; returns ``[{"client", "reason"}]``. Raises RuntimeError for a client that
        refused the run because of bad input. Exceptions carry their client when the server tags them
        (:class:`flowergraph.server.FlowergraphServer`); otherwise the clients sampled for this phase that
        neither replied nor failed with a reply are paired with the untagged exceptions."""
        answered = {p.cid for p, _ in results} | {f[0].cid for f in failures if isinstance(f, tuple)}
        unknown = [p for p in self._sampled if p.cid not in answered
                   and not any(getattr(f, "proxy", None) is p for f in failures)]
        out = []
        for failure in failures:
            if isinstance(failure, tuple):
                proxy, res = failure
                reason = failure_reason(res.status.message)
            else:
                proxy = getattr(failure, "proxy", None)
                if proxy is None and len(unknown) == 1 and sum(
                        not isinstance(f, tuple) and getattr(f, "proxy", None) is None for f in failures) == 1:
                    proxy = unknown[0]
                reason = failure_reason(getattr(failure, "cause", failure))
            label = self.client_label(proxy)
            node = f" (node {proxy.cid})" if proxy is not None and not label.startswith("node") else ""
            if CONFIG_ERROR_MARKER in reason:
                refusal = reason[reason.index(CONFIG_ERROR_MARKER):]
                raise RuntimeError(f"round {server_round}: client {label}{node} {refusal}")
            log(WARNING, "round %s: client %s%s failed to %s: %s", server_round, label, node, what, reason)
            out.append({"client": label, "reason": reason})
        return out

    # ----------------------------------------------------------------------------------- Strategy API
    def identify_clients(self, client_manager: ClientManager) -> dict[str, int]:
        """Ask every connected client which partition it holds (``get_properties``); fills ``partition_of``.

        Raises RuntimeError when two nodes claim the same partition (a misconfigured deployment) or a client
        refuses the run because of bad input; a client that does not answer is labelled by its node id."""
        proxies = sorted(client_manager.all().values(), key=lambda c: c.cid)

        def ask(proxy):
            return proxy.get_properties(GetPropertiesIns(config=dict(IDENTITY_REQUEST)), timeout=self.round_timeout,
                                        group_id=0)

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, max(1, len(proxies)))) as pool:
            futures = {pool.submit(ask, p): p for p in proxies}
        claims: dict[int, list[str]] = {}
        for future, proxy in futures.items():
            try:
                res = future.result()
                pid = res.properties.get("partition_id") if res.status.code == Code.OK else None
                reason = res.status.message
            except Exception as exc:  # noqa: BLE001 (a failed client is reported, not fatal)
                pid, reason = None, str(exc)
            if pid is None:
                reason = failure_reason(reason) if reason else "no partition_id in its properties"
                if CONFIG_ERROR_MARKER in reason:
                    raise RuntimeError(f"client node {proxy.cid} {reason[reason.index(CONFIG_ERROR_MARKER):]}")
                log(WARNING, "node %s did not say which partition it holds (%s); it is labelled by its node id",
                    proxy.cid, reason)
                continue
            self.partition_of[proxy.cid] = int(pid)
            claims.setdefault(int(pid), []).append(proxy.cid)
        duplicates = {pid: nodes for pid, nodes in claims.items() if len(nodes) > 1}
        if duplicates and self.num_clients > 1:
            pid, nodes = sorted(duplicates.items())[0]
            raise RuntimeError(f"nodes {', '.join(nodes)} all hold partition-id={pid}; give each SuperNode its own "
                               f"partition-id in 0..{self.num_clients - 1} (--node-config \"partition-id=K ...\")")
        if self.partition_of:
            log(INFO, "clients: %s", ", ".join(f"partition {pid} = node {cid}" for cid, pid in
                                              sorted(self.partition_of.items(), key=lambda t: t[1])))
        return dict(self.partition_of)

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.wait_for_clients(client_manager)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            identities = pool.submit(self.identify_clients, client_manager)
            if self.initial_parameters is not None:
                params = self.initial_parameters
                self.initial_parameters = None  # free memory
            else:
                proxy = sorted(client_manager.all().values(), key=lambda c: c.cid)[0]
                try:
                    res = proxy.get_parameters(GetParametersIns(config={}), timeout=self.round_timeout, group_id=0)
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
        return params

    # --------------------------------------------------------------------------------- state (checkpoints)
    def state_dict(self) -> dict[str, Any]:
        """The strategy's state besides the global arrays and the round (see :mod:`flowergraph.checkpoint`):
        the round record held back for fused evaluation and the elapsed training time. Subclasses with state
        of their own extend it (``{**super().state_dict(), "agent": {...}}``) and :meth:`load_state_dict`."""
        elapsed = (time.perf_counter() - self._t0) if self._t0 is not None else self._elapsed_offset
        return {"held": dict(self._held) if self._held is not None else None, "elapsed_s": float(elapsed)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (call before the first round of the resumed run)."""
        self._held = dict(state["held"]) if state.get("held") is not None else None
        self._elapsed_offset = float(state.get("elapsed_s", 0.0))
        self._t0 = None
        self.resumed = True

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        self._start_round(server_round)
        self.global_arrays = parameters_to_ndarrays(parameters)
        clients = self._sample(client_manager, self.fraction_fit, server_round, "fit")
        self._sampled = clients
        config = self.fit_config(server_round)
        if self._held is not None:
            config["evaluate_global"] = True
        self._pending["bytes_down"] += len(clients) * (parameters_bytes(parameters) + config_bytes(config))
        return [(c, FitIns(parameters, dict(config))) for c in clients]

    def _weight(self, res: FitRes, label: str) -> float:
        if self.weighting == "uniform":
            return 1.0
        if self.weighting == "batch-size":
            if "batch_size" not in res.metrics:
                raise ValueError("weighting 'batch-size' needs a 'batch_size' metric from every client")
            return float(res.metrics["batch_size"])
        return float(res.num_examples)

    def aggregate_fit(self, server_round: int, results: list[tuple[ClientProxy, FitRes]],
                      failures: list[tuple[ClientProxy, FitRes] | BaseException]
                      ) -> tuple[Parameters | None, dict[str, Scalar]]:
        self._start_round(server_round)
        rec = self._pending
        rec["num_failures"] = len(failures)
        rec["failures"] = self._failures(server_round, results, failures, "train")
        accepted, weights, rejected, clients = [], [], [], {}
        results = sorted(results, key=lambda pr: (int(pr[1].metrics.get("partition_id", -1)), pr[0].cid))
        if self._held is not None:  # fused: these fits evaluated the previous round's global model first
            held, self._held = self._held, None
            self._record_evaluation(held, [
                (self.client_label(proxy, res.metrics),
                 {k[len("eval_"):]: v for k, v in res.metrics.items() if k.startswith("eval_")})
                for proxy, res in results])
            self._write(held)
        for proxy, res in results:
            rec["bytes_up"] += parameters_bytes(res.parameters) + config_bytes(res.metrics)
            label = self.client_label(proxy, res.metrics)
            try:
                arrays = parameters_to_ndarrays(res.parameters)
                problem = check_update(arrays, self.global_arrays)
                weight = self._weight(res, label) if problem is None else 0.0
                if problem is None and not (weight >= 0 and math.isfinite(weight)):
                    problem = f"invalid aggregation weight {weight}"
            except Exception as exc:  # undecodable payload
                problem = f"undecodable update ({type(exc).__name__}: {exc})"
            if problem is not None:
                log(WARNING, "round %s: rejected the update of client %s: %s", server_round, label, problem)
                rejected.append({"client": label, "reason": problem})
                continue
            accepted.append(arrays)
            weights.append(weight)
            clients[label] = {"num_train": int(res.num_examples), "weight": weight,
                              **{k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}}
        rec["rejected"] = rejected
        rec["num_fit"] = len(accepted)
        rec["train_loss"] = weighted_metric(
            (c.get("train_loss"), w) for c, w in zip(clients.values(), weights))
        rec.setdefault("clients", {})
        for label, info in clients.items():
            rec["clients"].setdefault(label, {}).update({f"fit_{k}" if k not in ("num_train",) else k: v
                                                         for k, v in info.items()})
        needed = max(self.min_clients or 1, 1)
        if len(accepted) < needed or sum(weights) <= 0:
            log(WARNING, "round %s: %d valid updates (%d needed, total weight %.3g); the global model is "
                "kept unchanged", server_round, len(accepted), needed, sum(weights))
            rec["aggregated"] = False
            return None, {"num_fit": len(accepted)}
        rec["aggregated"] = True
        self.global_arrays = weighted_average(accepted, weights)
        return ndarrays_to_parameters(self.global_arrays), {"num_fit": len(accepted)}

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict[str, Scalar]] | None:
        if self.evaluate_fn is None:
            return None
        result = self.evaluate_fn(server_round, parameters_to_ndarrays(parameters))
        if result is None:
            return None
        loss, metrics = result
        if server_round >= 1:
            self._start_round(server_round)
            self._pending["server_loss"] = float(loss)
            self._pending["server_accuracy"] = metrics.get("accuracy")
        else:
            log(INFO, "initial global model on the server: loss %.4f, accuracy %s", loss, metrics.get("accuracy"))
        return loss, metrics

    def _evaluate_this_round(self, server_round: int) -> bool:
        return server_round % self.eval_every == 0 or (self.num_rounds is not None and server_round == self.num_rounds)

    def configure_evaluate(self, server_round: int, parameters: Parameters,
                           client_manager: ClientManager) -> list[tuple[ClientProxy, EvaluateIns]]:
        self._start_round(server_round)
        due = self._evaluate_this_round(server_round)
        if due and self.fused_eval and server_round != self.num_rounds:
            self._held = self._close_round()  # evaluated inside the next round's fit
            return []
        clients = self._sample(client_manager, self.fraction_evaluate, server_round, "evaluate") if due else []
        self._sampled = clients
        if not clients:
            self._flush_round()  # aggregate_evaluate will not be called this round
            return []
        config = self.evaluate_config(server_round)
        self._pending["bytes_down"] += len(clients) * (parameters_bytes(parameters) + config_bytes(config))
        return [(c, EvaluateIns(parameters, dict(config))) for c in clients]

    def aggregate_evaluate(self, server_round: int, results: list[tuple[ClientProxy, EvaluateRes]],
                           failures: list[tuple[ClientProxy, EvaluateRes] | BaseException]
                           ) -> tuple[float | None, dict[str, Scalar]]:
        self._start_round(server_round)
        rec = self._pending
        rec["num_eval_failures"] = len(failures)
        if failures:
            rec["eval_failures"] = self._failures(server_round, results, failures, "evaluate")
        for _, res in results:
            rec["bytes_up"] += config_bytes(res.metrics) + 8  # metrics + the loss
        self._record_evaluation(rec, [(self.client_label(proxy, res.metrics),
                                       {**res.metrics, "num_test": res.metrics.get("num_test", res.num_examples),
                                        "loss": res.metrics.get("loss", res.loss)})
                                      for proxy, res in results])
        metrics = {k: rec[k] for k in ("accuracy", "loss", "val_accuracy", "val_loss") if rec.get(k) is not None}
        self._flush_round()
        return metrics.get("loss"), metrics

    @staticmethod
    def _record_evaluation(rec: dict[str, Any], per_client: list[tuple[str, dict[str, Scalar]]]) -> None:
        """Per-client evaluation metrics into ``rec``, and their aggregates weighted by set sizes."""
        rec.setdefault("clients", {})
        rows = []
        for label, metrics in per_client:
            m = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
            if not m:
                continue
            rec["clients"].setdefault(label, {}).update(m)
            rows.append(m)
        for key, count in (("accuracy", "num_test"), ("loss", "num_test"), ("val_accuracy", "num_val"),
                           ("val_loss", "num_val")):
            rec[key] = weighted_metric((r.get(key), float(r.get(count, 0))) for r in rows)
