"""flowergraph's strategies on Flower's Message API: :class:`FlowergraphStrategy`, a
``flwr.serverapp.strategy.Strategy``.

One core, two faces. A method's server side (the :class:`~flowergraph.strategies.FederatedStrategy` parts: client
directory, model bank, aggregation, evaluation schedule, phases, stages, CKKS, DP wrappers, checkpoint state)
speaks flowergraph's own plain values (:mod:`flowergraph.strategies.nodes`). This face drives it directly: a
:class:`~flowergraph.strategies.nodes.Node` is a grid node id, an
:class:`~flowergraph.strategies.nodes.Instruction` becomes a ``train`` / ``evaluate`` Message (the records of
:mod:`flowergraph.app.message_records`), a reply's ArrayRecord and MetricRecord become a
:class:`~flowergraph.strategies.nodes.Reply`, and :class:`GridNodes` is the core's
:class:`~flowergraph.strategies.nodes.Federation`: a phase's ``query`` messages go to many nodes in one push.
The legacy stack's adapter (:mod:`flowergraph.app.loop`) drives the same core. Nothing a method does is written
twice.

:class:`FlowergraphStrategy` has Flower's method names:

* :meth:`~FlowergraphStrategy.configure_train` asks the core for the round (sampling, the round's phases such as
  FedGraph's embedding relay or FL-AGCNS's search steps, which run as ``query.fg_phase`` messages right there,
  per-client models and configs) and returns one ``train`` Message per sampled node;
* :meth:`~FlowergraphStrategy.aggregate_train` hands the replies to the core's aggregation (validation by name,
  robust rules, per-group and per-client models) and returns the global model as an ArrayRecord;
* :meth:`~FlowergraphStrategy.configure_evaluate` / :meth:`~FlowergraphStrategy.aggregate_evaluate` likewise;
* :meth:`~FlowergraphStrategy.start` takes the arguments of Flower's ``FedAvg.start`` and returns Flower's
  ``Result``; it also takes ``start_round`` and ``on_round_end`` (resume and checkpoints: flowergraph's ServerApp
  passes them).

Build one from a run configuration (:meth:`FlowergraphStrategy.from_run_config`: the keys flowergraph's ServerApp
reads, validated with the same messages) or around a core you built yourself (``FlowergraphStrategy(core)``).

What the legacy face has and this one has not: SecAgg+ (Flower 1.41/1.42 offer ``SecAggPlusWorkflow`` only on the
legacy stack; ``secure-agg=secagg+`` is refused here, CKKS works), and the stop after a Ray actor died
(:class:`flowergraph.errors.ClientProcessDied`): here the round goes on with the clients that answered and the
failure is recorded.
"""

from __future__ import annotations

import io
import threading
import time
from logging import INFO
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from .. import wire
from ..strategies.nodes import Failure, Instruction, Node, Reply
from . import message_records as rec
from .polling import poll_pause


class NoReply(RuntimeError):
    """A node sent no reply (within the timeout) or an error reply; ``str()`` is the reason."""


def _reason(reply: Message) -> str:
    return (
        f"Message contains an Error (reason: {reply.error.reason}). It originated during client-side execution "
        f"of a message."
    )


def train_content(ins: Instruction) -> RecordDict:
    """A train or evaluate message's content from the core's instruction (arrays named by the config's
    :data:`~flowergraph.wire.KEYS`, else by the instruction's names)."""
    keys = wire.decode_keys(ins.config, len(ins.arrays)) if wire.KEYS in ins.config else ins.names
    return RecordDict({rec.ARRAYS: rec.array_record(ins.arrays, keys), rec.CONFIG: rec.config_record(ins.config)})


def fit_reply(content: RecordDict) -> Reply:
    arrays, _keys = rec.request_arrays(content)
    num, metrics = rec.reply_metrics(content)
    return Reply(arrays, num, metrics)


def evaluate_reply(content: RecordDict) -> Reply:
    num, metrics = rec.reply_metrics(content)
    return Reply([], num, metrics, float(metrics.get(wire.LOSS, 0.0) or 0.0))


class GridNodes:
    """The grid's nodes as the core's :class:`~flowergraph.strategies.nodes.Federation`: every exchange is one
    push of Messages to all the nodes it addresses, the replies handed on as they arrive."""

    def __init__(self, grid: Grid, poll_s: float = 0.5, settings: ConfigRecord | None = None) -> None:
        self.grid = grid
        self.poll_s = poll_s
        self.settings = settings  # what the server decided, sent with every message (rec.SETTINGS)
        self._lock = threading.Lock()

    def message(self, node: Node, content: RecordDict, message_type: str, group_id: int | None, timeout) -> Message:
        if self.settings is not None:
            content[rec.SETTINGS] = ConfigRecord(dict(self.settings))
        return Message(
            content=content,
            message_type=message_type,
            dst_node_id=node.node_id,
            group_id=str(group_id) if group_id else "",
            ttl=timeout,
        )

    # ------------------------------------------------------------------------------------ Federation
    def nodes(self) -> list[Node]:
        return [Node(int(node_id)) for node_id in self.grid.get_node_ids()]

    def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if len(self.nodes()) >= count:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))

    def get_model(self, node: Node, timeout: float | None) -> list[np.ndarray]:
        content = RecordDict({rec.CONFIG: rec.config_record({})})
        outcome = next(iter(self._exchange([(node, content, rec.MODEL)], timeout, 0, lambda c: c)))[1]
        if isinstance(outcome, BaseException):
            raise outcome
        return rec.request_arrays(outcome)[0]

    def query(
        self, requests: Iterable[tuple[Node, dict[str, Any]]], timeout: float | None, group_id: int, max_parallel=None
    ) -> Iterator[tuple[Node, dict[str, Any] | BaseException]]:
        """One query per request (a phase message, or the identity request: its values as records,
        :func:`~flowergraph.app.message_records.values_content`), at most ``max_parallel`` in flight (None: all at
        once); each node's reply values as they arrive (an error reply, or none within ``timeout`` of its sending:
        :class:`NoReply`). ``requests`` may be lazy: a request is built when a place in flight frees, so the server
        holds at most ``max_parallel`` large messages (FedGCN's downloads)."""
        items = (
            (node, rec.values_content(values), rec.PHASE if wire.PHASE in values else rec.IDENTITY)
            for node, values in requests
        )
        return self._exchange(items, timeout, group_id, rec.content_values, max_parallel)

    def evaluate(
        self, requests: list[tuple[Node, Instruction]], timeout: float | None, group_id: int
    ) -> Iterator[tuple[Node, Reply | BaseException]]:
        items = [(node, train_content(ins), rec.EVALUATE) for node, ins in requests]
        return self._exchange(items, timeout, group_id, evaluate_reply)

    def _exchange(
        self,
        items: Iterable[tuple[Node, RecordDict, str]],
        timeout: float | None,
        group_id: int,
        decode: Callable,
        window: int | None = None,
    ) -> Iterator[tuple[Node, Any]]:
        """Push ``items`` (at most ``window`` awaiting a reply; None: all at once), pull the replies and yield
        each node's decoded reply as it arrives, or :class:`NoReply` once ``timeout`` has passed since its push."""
        items = iter(items)
        pending: dict[str, tuple[Node, float | None]] = {}  # message id -> (node, deadline)
        exhausted = False
        wait = 0.002
        while True:
            batch = []
            while not exhausted and (window is None or len(pending) + len(batch) < window):
                try:
                    node, content, kind = next(items)
                except StopIteration:
                    exhausted = True
                    break
                batch.append((node, self.message(node, content, kind, group_id, timeout)))
                del content
            if batch:
                ids = list(self.grid.push_messages([m for _, m in batch]))
                if len(ids) != len(batch):  # Flower's in-memory grid leaves out what it did not store
                    stored = set(ids)
                    ids = [m.metadata.message_id if m.metadata.message_id in stored else None for _, m in batch]
                deadline = None if timeout is None else time.monotonic() + timeout
                for mid, (node, _) in zip(ids, batch):
                    if mid is None:
                        yield node, NoReply(f"the message to node {node.cid} could not be pushed to the SuperLink")
                    else:
                        pending[str(mid)] = (node, deadline)
                del batch
            if not pending:
                if exhausted:
                    return
                continue
            got = 0
            cpu = time.thread_time()
            pulled = list(self.grid.pull_messages(list(pending)))
            least = poll_pause(time.thread_time() - cpu)  # polling at most 5 % of the wait (app.polling)
            for reply in pulled:
                entry = pending.pop(reply.metadata.reply_to_message_id, None)
                if entry is None:
                    continue
                got += 1
                node = entry[0]
                if reply.has_error():
                    yield node, NoReply(_reason(reply))
                else:
                    try:
                        yield node, decode(reply.content)
                    except GeneratorExit:
                        raise
                    except Exception as exc:  # noqa: BLE001 (a malformed reply fails that node)
                        yield node, exc
            now = time.monotonic()
            for mid, (node, deadline) in list(pending.items()):
                if deadline is not None and now >= deadline:
                    del pending[mid]
                    yield node, NoReply(f"node {node.cid} sent no reply within {timeout} s")
            del pulled
            if got:
                wait = 0.002
                if not exhausted:
                    continue  # places freed: the next requests go out at once
            else:
                wait = min(wait * 1.5, 0.05)
            if pending:
                deadlines = [d for _, d in pending.values() if d is not None]
                pause = max(wait, least)
                time.sleep(pause if not deadlines else max(0.0, min(pause, min(deadlines) - now)))


class FlowergraphStrategy(Strategy):
    """A flowergraph method (its :class:`~flowergraph.strategies.FederatedStrategy` core, or a DP wrapper of one)
    as a Message-API strategy; see the module docstring. ``client_settings``: the run-config keys the server
    decided, sent to the clients with every message (the ConfigRecord ``fg.settings``), which then build their
    client from them instead of their run config."""

    def __init__(self, core: Any, client_settings: dict[str, Any] | None = None) -> None:
        if getattr(core, "secure_agg", "none") == "secagg+":
            from ..errors import ConfigError

            raise ConfigError(
                "secure-agg='secagg+' runs only on the legacy face (flower-api='legacy'): Flower offers "
                "SecAggPlusWorkflow only on its legacy stack; valid choices here: none, ckks"
            )
        self.core = core
        self.client_settings = None if client_settings is None else rec.config_record(client_settings)
        self.nodes: GridNodes | None = None
        self._sent: dict[int, Node] = {}  # node id -> the node sent this phase's train/evaluate message
        self._arrays: list[np.ndarray] | None = None  # the core's global model, as it returned it last
        self._record: ArrayRecord | None = None  # ... and as this strategy handed it to Flower's loop
        self._timeout: float | None = None

    @classmethod
    def from_run_config(cls, run_config: dict[str, Any], recorder: Any = None) -> "FlowergraphStrategy":
        """The strategy flowergraph's ServerApp would run for ``run_config`` (validated: bad keys and values are
        refused with the launchers' messages)."""
        from ..settings import parse_run_config
        from .run_strategy import build_strategy

        return cls(build_strategy(parse_run_config(dict(run_config)), recorder))

    # ------------------------------------------------------------------------------------------ helpers
    def nodes_for(self, grid: Grid) -> GridNodes:
        """The grid's nodes as the core's Federation (one per grid; what checkpoints ask for client state)."""
        if self.nodes is None or self.nodes.grid is not grid:
            self.nodes = GridNodes(grid, settings=self.client_settings)
        return self.nodes

    def _names(self, count: int) -> list[str] | None:
        model = getattr(_inner(self.core).bank, "global_model", None)
        return list(model) if model is not None and len(model) == count else None

    def _adopt(self, arrays: ArrayRecord) -> list[np.ndarray]:
        """The arrays of ``arrays`` (the core's own list when they are the record this strategy returned last:
        its global model)."""
        if self._arrays is not None and arrays is self._record:
            return self._arrays
        return rec.record_arrays(arrays)[0]

    def _returned(self, arrays: list[np.ndarray]) -> ArrayRecord:
        """``arrays`` (the core's global model) as the ArrayRecord this strategy hands to Flower's loop."""
        self._arrays = arrays
        self._record = rec.array_record(arrays, self._names(len(arrays)))
        return self._record

    @property
    def timeout(self) -> float | None:
        """Each exchange's timeout: the core's ``round-timeout``, else ``start()``'s ``timeout``."""
        return getattr(self.core, "round_timeout", None) or self._timeout

    def _messages(
        self, instructions: list[tuple[Node, Instruction]], message_type: str, config: ConfigRecord, group_id: int
    ) -> list[Message]:
        self._sent = {}
        nodes = self.nodes
        assert nodes is not None
        rank = _inner(self.core).directory.dispatch_rank
        messages = []
        for node, ins in sorted(instructions, key=lambda pair: rank(pair[0])):
            ins.config = {**dict(config), **ins.config}  # the caller's config under the method's own keys
            messages.append(nodes.message(node, train_content(ins), message_type, group_id, self.timeout))
            self._sent[node.node_id] = node
        return messages

    def _sort(
        self, replies: Iterable[Message], to_reply: Callable[[RecordDict], Reply]
    ) -> tuple[list[tuple[Node, Reply]], list[Failure]]:
        """(replies, failures) for the core, each failure naming its node (a missing reply is a failure too)."""
        results, failures, answered = [], [], set()
        for reply in replies:
            node = self._sent.get(int(reply.metadata.src_node_id))
            if node is None:
                continue
            answered.add(node.node_id)
            if reply.has_error():
                failures.append(Failure(node, NoReply(_reason(reply))))
                continue
            try:
                results.append((node, to_reply(reply.content)))
            except Exception as exc:  # noqa: BLE001 (a malformed reply fails that client, as on the legacy face)
                failures.append(Failure(node, exc))
        for node_id, node in self._sent.items():
            if node_id not in answered:
                failures.append(Failure(node, NoReply(f"node {node_id} sent no reply within the round's timeout")))
        return results, failures

    # ---------------------------------------------------------------------------------- Strategy API
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        instructions = self.core.configure_fit(server_round, self._adopt(arrays), self.nodes_for(grid))
        return self._messages(instructions, rec.TRAIN, config, server_round)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        results, failures = self._sort(replies, fit_reply)
        log(INFO, "aggregate_train: received %s results and %s failures", len(results), len(failures))
        arrays, metrics = self.core.aggregate_fit(server_round, results, failures)
        if arrays is None:
            numbers = rec.split_metrics(metrics or {})[0]
            return None, MetricRecord(numbers) if numbers else None
        return self._returned(arrays), MetricRecord(rec.split_metrics(metrics)[0])

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        instructions = self.core.configure_evaluate(server_round, self._adopt(arrays), self.nodes_for(grid))
        return self._messages(instructions, rec.EVALUATE, config, server_round)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        results, failures = self._sort(replies, evaluate_reply)
        if not results and not failures:
            return None
        log(INFO, "aggregate_evaluate: received %s results and %s failures", len(results), len(failures))
        _, metrics = self.core.aggregate_evaluate(server_round, results, failures)
        numbers = rec.split_metrics(metrics)[0]
        return MetricRecord(numbers) if numbers else None

    def summary(self) -> None:
        log(INFO, "\t├── flowergraph strategy: %r", self.core)

    # ------------------------------------------------------------------------------------------ the run
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
        *,
        start_round: int = 1,
        on_round_end: Callable[[int, list[np.ndarray] | None], None] | None = None,
    ) -> Result:
        """Run the method: Flower's ``Strategy.start`` contract, with the core's setup first.

        ``initial_arrays``: the initial global model (None or empty: the core's own, else one client's, as on the
        legacy face). ``timeout`` bounds each round's replies where the core sets no ``round-timeout``.
        ``start_round`` > 1 resumes (the core holds the checkpoint's state); ``on_round_end(round, arrays)``
        is called after each round (checkpoints)."""
        log(INFO, "Starting %s strategy:", type(self).__name__)
        self.summary()
        train_config = ConfigRecord() if train_config is None else train_config
        evaluate_config = ConfigRecord() if evaluate_config is None else evaluate_config
        nodes = self.nodes_for(grid)
        core = self.core
        self._timeout = timeout
        inner = _inner(core)
        if initial_arrays is not None and len(initial_arrays) > 0 and inner.initial_parameters is None:
            arrays, keys = rec.record_arrays(initial_arrays)
            inner.initial_parameters = dict(zip(keys, arrays)) if not rec.positional(keys) else arrays
        initial = core.initialize_parameters(nodes)
        if initial is None:
            raise RuntimeError("the strategy has no initial model: pass initial_arrays")
        arrays = self._returned(initial)
        result = Result(arrays=arrays)
        names = tuple(getattr(getattr(inner, "metrics", None), "names", ()) or ())

        def evaluated(record: dict[str, Any]) -> None:  # each round's client evaluation, fused or not
            values = {
                k: record[k]
                for k in names
                if isinstance(record.get(k), (int, float)) and not isinstance(record.get(k), bool)
            }
            if int(record.get("round", 0)) >= 1 and values:
                result.evaluate_metrics_clientapp[int(record["round"])] = MetricRecord(values)

        inner.book.listeners.append(evaluated)
        t0 = time.time()
        if start_round == 1:
            core.evaluate(0, initial)
            if evaluate_fn is not None and (res := evaluate_fn(0, arrays)) is not None:
                result.evaluate_metrics_serverapp[0] = res
        else:
            log(INFO, "resuming at round %s of %s", start_round, num_rounds)
        for current_round in range(start_round, num_rounds + 1):
            log(INFO, "")
            log(INFO, "[ROUND %s/%s]", current_round, num_rounds)
            replies = grid.send_and_receive(
                self.configure_train(current_round, arrays, train_config, grid), timeout=self.timeout
            )
            new, train_metrics = self.aggregate_train(current_round, replies)
            if new is not None:
                arrays = result.arrays = new
            if train_metrics is not None:
                result.train_metrics_clientapp[current_round] = train_metrics
            core.evaluate(current_round, self._arrays)
            messages = list(self.configure_evaluate(current_round, arrays, evaluate_config, grid))
            if messages:  # the core's record of it reaches the result through ``evaluated``
                self.aggregate_evaluate(current_round, grid.send_and_receive(messages, timeout=self.timeout))
            if evaluate_fn is not None and (res := evaluate_fn(current_round, arrays)) is not None:
                result.evaluate_metrics_serverapp[current_round] = res
            if on_round_end is not None:
                on_round_end(current_round, self._arrays)
        core.finish()  # a round held back for fused evaluation is written (and reaches the result)
        inner.book.listeners.remove(evaluated)
        log(INFO, "Strategy execution finished in %.2fs", time.time() - t0)
        for line in io.StringIO(str(result)):
            log(INFO, "\t%s", line.strip("\n"))
        return result


def _inner(core: Any) -> Any:
    """The :class:`~flowergraph.strategies.FederatedStrategy` inside ``core`` (DP wrappers hold it as
    ``strategy``)."""
    from ..strategies.base import FederatedStrategy

    while (
        not isinstance(core, FederatedStrategy)
        and isinstance(getattr(core, "strategy", None), object)
        and "strategy" in vars(core)
    ):
        core = vars(core)["strategy"]
    return core
