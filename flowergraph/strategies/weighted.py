"""Weighted averaging (FedAvg; FedGCN's "0-hop"): the strategy every node-level method builds on.

Wire protocol (NumPyClient messages; every client runs :class:`flowergraph.clients.node.NodeClassificationClient`
or a subclass)
---------------------------------------------------------------------------------------------------------------
Phase INIT, once: ``get_parameters`` to one connected client (lowest node id), config ``{}``.
    client -> server: the model's arrays, in ``state_dict`` order (GCN hidden 16 on Cora: 4 arrays,
    1433x16, 16, 16x7, 7, float32). Model initialisation only; the server learns the architecture.

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

Records: one per round (see :mod:`flowergraph.results`). ``time_s`` is the round's wall time (fit, server
evaluation, separate client evaluation); with fused evaluation a round's client evaluation runs inside the
next round's fit, so its record is written when that fit returns.
"""

from __future__ import annotations

import math
import time
from logging import INFO, WARNING
from typing import Any, Callable

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
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.logger import log
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from .common import check_update, config_bytes, parameters_bytes, weighted_average, weighted_metric

WEIGHTINGS = ("train-size", "batch-size", "uniform")

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
    round_timeout: seconds a direct request (initial parameters, method phases) may take.
    clients_per_round: cap on the clients sampled per round (``centralized`` uses 1).
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
                 fused_eval: bool = False) -> None:
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
        self.global_arrays: NDArrays | None = None
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

    def _sample(self, client_manager: ClientManager, fraction: float) -> list[ClientProxy]:
        available = client_manager.num_available()
        n = max(1, int(round(fraction * available))) if fraction > 0 else 0
        if self.clients_per_round is not None:
            n = min(n, self.clients_per_round)
        if n == 0:
            return []
        clients = client_manager.sample(num_clients=n, min_num_clients=n)
        return sorted(clients, key=lambda c: c.cid)

    def _start_round(self, server_round: int) -> None:
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
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

    @staticmethod
    def client_label(proxy: ClientProxy, metrics: dict[str, Scalar] | None) -> str:
        if metrics and "partition_id" in metrics:
            return str(int(metrics["partition_id"]))
        return f"node {proxy.cid}"

    # ----------------------------------------------------------------------------------- Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        self.wait_for_clients(client_manager)
        if self.initial_parameters is not None:
            params = self.initial_parameters
            self.initial_parameters = None  # free memory
        else:
            proxy = sorted(client_manager.all().values(), key=lambda c: c.cid)[0]
            res = proxy.get_parameters(GetParametersIns(config={}), timeout=self.round_timeout, group_id=0)
            params = res.parameters
            if not params.tensors:
                raise RuntimeError(f"client node {proxy.cid} returned no initial parameters")
        self.global_arrays = parameters_to_ndarrays(params)
        return params

    def configure_fit(self, server_round: int, parameters: Parameters,
                      client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        self._start_round(server_round)
        self.global_arrays = parameters_to_ndarrays(parameters)
        clients = self._sample(client_manager, self.fraction_fit)
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
        for failure in failures:
            if isinstance(failure, BaseException):
                log(WARNING, "round %s: a client failed: %s", server_round, failure)
            else:
                proxy, res = failure
                log(WARNING, "round %s: client %s failed: %s", server_round,
                    self.client_label(proxy, res.metrics), res.status.message)
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
        clients = self._sample(client_manager, self.fraction_evaluate) if due else []
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
        for failure in failures:
            if isinstance(failure, BaseException):
                log(WARNING, "round %s: a client failed to evaluate: %s", server_round, failure)
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
