"""When the global model is evaluated on the clients, and how their metrics are combined (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

Client-side evaluation runs every ``eval_every`` rounds and after the last. With fused evaluation, round r's
global model is evaluated inside round r+1's ``fit`` message (the client evaluates the arrays it receives
before training and reports the metrics prefixed ``eval_``): one message per client per round instead of two,
the same numbers. That needs every client in every round (fit sample = evaluation sample) and a known run
length (the last round is evaluated with a separate ``evaluate`` message).
"""

from __future__ import annotations

from typing import Any

from ..wire import EVAL_PREFIX
from .common import weighted_metric

# (metric, the count it is weighted by)
AGGREGATED = (("accuracy", "num_test"), ("loss", "num_test"), ("val_accuracy", "num_val"), ("val_loss", "num_val"))


class EvaluationSchedule:
    """``eval_every``, ``num_rounds`` (None: unknown) and whether evaluation is fused into the next fit."""

    def __init__(self, *, eval_every: int = 1, num_rounds: int | None = None, fused: bool = False) -> None:
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        self.eval_every = eval_every
        self.num_rounds = num_rounds
        self.fused = bool(fused and num_rounds is not None)

    def due(self, server_round: int) -> bool:
        return server_round % self.eval_every == 0 or (self.num_rounds is not None and
                                                      server_round == self.num_rounds)

    def fuse(self, server_round: int) -> bool:
        """Whether round ``server_round``'s evaluation travels inside the next round's fit."""
        return self.due(server_round) and self.fused and server_round != self.num_rounds


def fused_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The evaluation metrics inside a fit reply (``eval_accuracy`` -> ``accuracy``, ...)."""
    return {k[len(EVAL_PREFIX):]: v for k, v in metrics.items() if k.startswith(EVAL_PREFIX)}


def record_evaluation(rec: dict[str, Any], per_client: list[tuple[str, dict[str, Any]]]) -> None:
    """Per-client evaluation metrics into ``rec["clients"]``, and the aggregates over every client evaluated in
    this record so far, weighted by set sizes (a record may receive its clients' metrics in several calls)."""
    rec.setdefault("clients", {})
    for label, metrics in per_client:
        m = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        if m:
            rec["clients"].setdefault(label, {}).update(m)
    rows = [m for m in rec["clients"].values() if "num_test" in m or "num_val" in m]
    for key, count in AGGREGATED:
        rec[key] = weighted_metric((r.get(key), float(r.get(count, 0))) for r in rows)
    # the unweighted mean over clients (graph-level papers report each client's accuracy averaged over clients)
    rec["mean_client_accuracy"] = weighted_metric((r.get("accuracy"), 1.0) for r in rows
                                                  if float(r.get("num_test", 0)) > 0)
