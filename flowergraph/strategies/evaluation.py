"""When models are evaluated on the clients, and how their metrics are combined (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

Client-side evaluation runs every ``eval_every`` rounds and after the last. With fused evaluation, round r's
model is evaluated inside round r+1's ``fit`` message (the client evaluates the arrays it receives before
training and reports the metrics prefixed ``eval_``): one message per client per round instead of two, the same
numbers. That needs every client in every round (fit sample = evaluation sample), a known run length (the last
round is evaluated with a separate ``evaluate`` message) and the same model in both rounds (the last round of a
stage is evaluated separately too).

Each client's metrics form a :class:`ClientEvaluation`; a :class:`MetricAggregation` turns a round's rows into its
aggregates (default: accuracy and loss weighted by test-set sizes, validation metrics by validation-set sizes, and
the unweighted mean client accuracy that graph-level papers report). Pass your own to the strategy
(``metrics=``) to aggregate other metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..wire import EVAL_PREFIX
from .common import weighted_metric


class EvaluationSchedule:
    """``eval_every``, ``num_rounds`` (None: unknown), whether evaluation is fused into the next fit, and the
    rounds whose evaluation is never fused (``separate``: the last round of each stage)."""

    def __init__(self, *, eval_every: int = 1, num_rounds: int | None = None, fused: bool = False,
                 separate: Iterable[int] = ()) -> None:
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        self.eval_every = eval_every
        self.num_rounds = num_rounds
        self.fused = bool(fused and num_rounds is not None)
        self.separate = set(separate)

    def due(self, server_round: int) -> bool:
        return server_round % self.eval_every == 0 or (self.num_rounds is not None and
                                                      server_round == self.num_rounds)

    def fuse(self, server_round: int) -> bool:
        """Whether round ``server_round``'s evaluation travels inside the next round's fit."""
        return (self.due(server_round) and self.fused and server_round != self.num_rounds
                and server_round not in self.separate)


@dataclass
class ClientEvaluation:
    """One client's evaluation of one round's model: its label (partition id, or node id when unknown) and the
    metrics it reported (``accuracy``, ``loss``, ``num_test``, ``val_*``, method metrics)."""

    client: str
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def partition(self) -> int | None:
        return int(self.client) if self.client.isdigit() else None


class MetricAggregation:
    """A round's aggregates from its clients' evaluation rows (see the module docstring).

    ``weighted``: (metric, the count it is weighted by) pairs; ``unweighted``: (name of the aggregate, metric)
    pairs averaged over clients with a non-empty test set."""

    def __init__(self, weighted: Iterable[tuple[str, str]] = (("accuracy", "num_test"), ("loss", "num_test"),
                                                                ("val_accuracy", "num_val"), ("val_loss", "num_val")),
                 unweighted: Iterable[tuple[str, str]] = (("mean_client_accuracy", "accuracy"),)) -> None:
        self.weighted = tuple(weighted)
        self.unweighted = tuple(unweighted)

    @property
    def names(self) -> tuple[str, ...]:
        """The aggregates this rule produces (what ``aggregate_evaluate`` returns when they exist)."""
        return tuple(m for m, _ in self.weighted) + tuple(name for name, _ in self.unweighted)

    def __call__(self, rows: list[Mapping[str, Any]]) -> dict[str, float | None]:
        rows = [r for r in rows if "num_test" in r or "num_val" in r]
        out: dict[str, float | None] = {}
        for key, count in self.weighted:
            out[key] = weighted_metric((r.get(key), float(r.get(count, 0))) for r in rows)
        for name, key in self.unweighted:
            out[name] = weighted_metric((r.get(key), 1.0) for r in rows if float(r.get("num_test", 0)) > 0)
        return out


DEFAULT_METRICS = MetricAggregation()


def fused_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The evaluation metrics inside a fit reply (``eval_accuracy`` -> ``accuracy``, ...)."""
    return {k[len(EVAL_PREFIX):]: v for k, v in metrics.items() if k.startswith(EVAL_PREFIX)}


def record_evaluation(rec: dict[str, Any], per_client: list[tuple[str, dict[str, Any]]],
                      aggregation: MetricAggregation = DEFAULT_METRICS) -> list[ClientEvaluation]:
    """Per-client evaluation metrics into ``rec["clients"]``, and the aggregates over every client evaluated in
    this record so far (a record may receive its clients' metrics in several calls). Returns the rows added."""
    rec.setdefault("clients", {})
    added = []
    for label, metrics in per_client:
        m = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        if m:
            rec["clients"].setdefault(label, {}).update(m)
        added.append(ClientEvaluation(label, dict(m)))
    rec.update(aggregation(list(rec["clients"].values())))
    return added
