"""When models are evaluated on the clients, and how their metrics are combined (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

Client-side evaluation runs every ``eval_every`` rounds and after the last. With fused evaluation, round r's
model is evaluated inside round r+1's ``fit`` message (the client evaluates the arrays it receives before
training and reports the metrics prefixed ``eval_``): one message per client per round instead of two, the same
numbers. That needs every client in every round (fit sample = evaluation sample), a known run length (the last
round is evaluated with a separate ``evaluate`` message) and the same model in both rounds (the last round of a
stage is evaluated separately too).

:class:`FusedEvaluation` is the strategy's side of it: round r's record is held back (:meth:`FusedEvaluation.hold`),
round r+1's fit carries the ``evaluate_global`` flag, and its replies' ``eval_*`` metrics complete the held record
(:meth:`FusedEvaluation.complete`). A client that ignored the flag is evaluated right then with a separate
``evaluate`` message on the arrays that fit sent it (:func:`evaluate_now`), and fusion is off for the rest of the
run.

Each client's metrics form a :class:`ClientEvaluation`; a :class:`MetricAggregation` turns a round's rows into its
aggregates (default: accuracy and loss weighted by test-set sizes, validation metrics by validation-set sizes, and
the unweighted mean client accuracy that graph-level papers report). Pass your own to the strategy
(``metrics=``) to aggregate other metrics. The server's own evaluation (``evaluate_fn``) goes to the round's record
through :func:`server_evaluation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from logging import INFO, WARNING
from typing import Any, Callable, Iterable, Mapping

from flwr.common.logger import log

from ..wire import EVAL_PREFIX, EVALUATE_GLOBAL, LOSS, NUM_TEST, PARTITION_ID
from .common import arrays_bytes, config_bytes, weighted_metric
from .directory import failure_reason
from .nodes import Federation, Instruction, Node, Reply
from .records import RoundBook

Labeller = Callable[[Node, Any], str]  # (proxy, its reply's metrics) -> the client's label


class EvaluationSchedule:
    """``eval_every``, ``num_rounds`` (None: unknown), whether evaluation is fused into the next fit, and the
    rounds whose evaluation is never fused (``separate``: the last round of each stage)."""

    def __init__(
        self, *, eval_every: int = 1, num_rounds: int | None = None, fused: bool = False, separate: Iterable[int] = ()
    ) -> None:
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        self.eval_every = eval_every
        self.num_rounds = num_rounds
        self.fused = bool(fused and num_rounds is not None)
        self.separate = set(separate)

    def due(self, server_round: int) -> bool:
        return server_round % self.eval_every == 0 or (self.num_rounds is not None and server_round == self.num_rounds)

    def fuse(self, server_round: int) -> bool:
        """Whether round ``server_round``'s evaluation travels inside the next round's fit."""
        return (
            self.due(server_round)
            and self.fused
            and server_round != self.num_rounds
            and server_round not in self.separate
        )


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
    pairs averaged over clients with a non-empty test set; ``server``: the metrics the server's own evaluation
    (``server-eval=true``) reports besides ``accuracy``, recorded as ``server_<name>`` (:func:`server_evaluation`)."""

    def __init__(
        self,
        weighted: Iterable[tuple[str, str]] = (
            ("accuracy", "num_test"),
            ("loss", "num_test"),
            ("val_accuracy", "num_val"),
            ("val_loss", "num_val"),
        ),
        unweighted: Iterable[tuple[str, str]] = (("mean_client_accuracy", "accuracy"),),
        server: Iterable[str] = (),
    ) -> None:
        self.weighted = tuple(weighted)
        self.unweighted = tuple(unweighted)
        self.server = tuple(server)

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
    return {k[len(EVAL_PREFIX) :]: v for k, v in metrics.items() if k.startswith(EVAL_PREFIX)}


def record_evaluation(
    rec: dict[str, Any], per_client: list[tuple[str, dict[str, Any]]], aggregation: MetricAggregation = DEFAULT_METRICS
) -> list[ClientEvaluation]:
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


def eval_row(res: Reply) -> dict[str, Any]:
    """One client's ``evaluate`` reply as its row: its metrics, ``num_test`` and ``loss`` from the reply's fields
    when the metrics lack them."""
    loss = res.metrics.get(LOSS, res.loss if res.loss is not None else 0.0)
    return {**res.metrics, NUM_TEST: res.metrics.get(NUM_TEST, res.num_examples), LOSS: loss}


def record_replies(
    rec: dict[str, Any],
    results: list[tuple[Node, Reply]],
    label: Labeller,
    aggregation: MetricAggregation = DEFAULT_METRICS,
    add_bytes: Callable[..., None] | None = None,
) -> list[ClientEvaluation]:
    """``evaluate`` replies into ``rec`` (:func:`record_evaluation`), their bytes (metrics and the loss) to
    ``add_bytes`` when given; returns the rows added. Rows go in partition order (then node id), whatever order
    the replies arrived in, so every mean over them is summed in one order (as the fit results are)."""
    results = sorted(results, key=lambda pr: (int(pr[1].metrics.get(PARTITION_ID, -1)), pr[0].cid))
    if add_bytes is not None:
        for _, res in results:
            add_bytes(up=config_bytes(res.metrics) + 8)
    return record_evaluation(rec, [(label(proxy, res.metrics), eval_row(res)) for proxy, res in results], aggregation)


def evaluate_now(
    rec: dict[str, Any],
    clients: list[Node],
    sent: Mapping[str, Instruction],
    config: Mapping[str, Any],
    server_round: int,
    *,
    federation: Federation,
    label: Labeller,
    aggregation: MetricAggregation = DEFAULT_METRICS,
    timeout: float | None = None,
) -> list[ClientEvaluation]:
    """Evaluate ``clients`` now, each on ``sent[its node id]`` with ``config`` (in parallel): their rows go to
    ``rec`` with the bytes each way; a client that fails is listed under ``rec["eval_failures"]``."""
    requests = [(p, Instruction(sent[p.cid].arrays, dict(config), sent[p.cid].names)) for p in clients]
    results: list[tuple[Node, Reply]] = []
    failures: list[BaseException] = []
    replies = {p.cid: outcome for p, outcome in federation.evaluate(requests, timeout, server_round)}
    for p in clients:  # in the order sent
        outcome = replies.get(p.cid, RuntimeError(f"node {p.cid} sent no reply"))
        if isinstance(outcome, BaseException):
            failures.append(outcome)
        else:
            results.append((p, outcome))
    for proxy, res in results:
        rec["bytes_up"] = rec.get("bytes_up", 0) + config_bytes(res.metrics) + 8
    rec["bytes_down"] = rec.get("bytes_down", 0) + sum(
        arrays_bytes(sent[p.cid].arrays) + config_bytes(config) for p in clients
    )
    if failures:
        rec.setdefault("eval_failures", []).extend({"client": "unknown", "reason": failure_reason(f)} for f in failures)
    return record_replies(rec, results, label, aggregation)


class FusedEvaluation:
    """The strategy's side of fused evaluation (see the module docstring), over its ``schedule`` (``fused`` is
    turned off here when a client ignores the flag) and its ``book`` (which holds the record back)."""

    def __init__(
        self,
        schedule: EvaluationSchedule,
        book: RoundBook,
        aggregation: MetricAggregation = DEFAULT_METRICS,
        label: Labeller = lambda proxy, metrics: proxy.cid,
    ) -> None:
        self.schedule = schedule
        self.book = book
        self.aggregation = aggregation
        self.label = label

    def hold(self, server_round: int) -> bool:
        """Whether round ``server_round``'s evaluation travels inside the next fit; if so its record is closed and
        held back."""
        if not self.schedule.fuse(server_round):
            return False
        self.book.hold()
        return True

    def flag(self, config: dict[str, Any]) -> dict[str, Any]:
        """A fit config, with the ``evaluate_global`` flag while a record is held back."""
        if self.book.held is not None:
            config[EVALUATE_GLOBAL] = True
        return config

    def complete(
        self,
        server_round: int,
        results: list[tuple[Node, Reply]],
        sent: Mapping[str, Instruction],
        config: Callable[[int], Mapping[str, Any]],
        after_evaluate: Callable[[int, list[ClientEvaluation]], None] = lambda r, rows: None,
        timeout: float | None = None,
        federation: Federation | None = None,
    ) -> dict[str, Any]:
        """The held record of round ``server_round - 1``, completed from the ``eval_*`` metrics of round
        ``server_round``'s fit ``results``: its rows go to ``after_evaluate(held round, rows)`` (the strategy's
        hook), then the record is written and returned. A client that ignored the flag is evaluated now on
        ``sent[its node id]`` (what the fit sent it) with ``config(held round)`` (the strategy's evaluate config),
        and fused evaluation is turned off for the rest of the run."""
        held = self.book.take_held()
        assert held is not None
        per_client, ignored = [], []
        for proxy, res in results:
            metrics = fused_metrics(res.metrics)
            if metrics:
                per_client.append((self.label(proxy, res.metrics), metrics))
            else:
                ignored.append((proxy, self.label(proxy, res.metrics)))
        rows = record_evaluation(held, per_client, self.aggregation)
        if ignored:
            labels = ", ".join(label for _, label in ignored)
            log(
                WARNING,
                "round %s: client(s) %s ignored the fused-evaluation flag '%s'; evaluating round %s's model "
                "on them with a separate message, and using separate evaluation from now on",
                server_round,
                labels,
                EVALUATE_GLOBAL,
                server_round - 1,
            )
            self.schedule.fused = False
            held["fused_eval_fallback"] = [label for _, label in ignored]
            clients = [p for p, _ in ignored]
            rows += evaluate_now(
                held,
                clients,
                {p.cid: sent[p.cid] for p in clients},
                config(held["round"]),
                held["round"],
                federation=federation,  # type: ignore[arg-type]
                label=self.label,
                aggregation=self.aggregation,
                timeout=timeout,
            )
        after_evaluate(int(held["round"]), rows)
        self.book.write(held)
        return held


def server_evaluation(
    evaluate_fn: Callable[[int, Any], Any], server_round: int, arrays: Any, book: RoundBook
) -> tuple[float, dict[str, Any]] | None:
    """``evaluate_fn(server_round, arrays)`` (the server's own evaluation: ``(loss, {"accuracy": ...})`` or None);
    its loss and accuracy go to round ``server_round``'s record as ``server_loss`` / ``server_accuracy``, any other
    metric ``m`` as ``server_m`` (round 0, the initial model: to the log)."""
    result = evaluate_fn(server_round, arrays)
    if result is None:
        return None
    loss, metrics = result
    if server_round >= 1:
        extra = {f"server_{k}": v for k, v in metrics.items() if k != "accuracy"}  # a task's own (link: cross_auc)
        book.start(server_round).update(server_loss=float(loss), server_accuracy=metrics.get("accuracy"), **extra)
    else:
        log(INFO, "initial global model on the server: loss %.4f, accuracy %s", loss, metrics.get("accuracy"))
    return loss, metrics
