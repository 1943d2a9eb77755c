"""flowergraph's strategies on Flower's Message API: :class:`FlowergraphStrategy`, a
``flwr.serverapp.strategy.Strategy``.

One core, two faces. A method's server side (the :class:`~flowergraph.strategies.FederatedStrategy` parts: client
directory, model bank, aggregation, evaluation schedule, phases, stages, CKKS, DP wrappers, checkpoint state) talks
to its clients through Flower's ``ClientProxy`` interface (``get_properties``, ``get_parameters``, ``fit``,
``evaluate``). The legacy face gives it Flower's proxies (``start_grid``'s, the legacy records); this face gives it
:class:`NodeProxy` s, which send the Message-API records of :mod:`flowergraph.app.message_records` through the
grid. Nothing a method does is written twice.

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

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common import (
    Code,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    GetParametersIns,
    GetParametersRes,
    GetPropertiesIns,
    GetPropertiesRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
)
from flwr.common.logger import log
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from .. import wire
from . import message_records as rec


class NoReply(RuntimeError):
    """A node sent no reply (within the timeout) or an error reply; ``str()`` is the reason."""


def _reason(reply: Message) -> str:
    return (
        f"Message contains an Error (reason: {reply.error.reason}). It originated during client-side execution "
        f"of a message."
    )


class NodeProxy(ClientProxy):
    """One node of the grid, spoken to in the Message-API layout (one message, one reply)."""

    def __init__(self, node_id: int, grid: Grid, settings: ConfigRecord | None = None) -> None:
        super().__init__(str(node_id))
        self.node_id = int(node_id)
        self.grid = grid
        self.settings = settings  # what the server decided, sent with every message (rec.SETTINGS)

    def message(self, content: RecordDict, message_type: str, group_id: int | None, timeout: float | None) -> Message:
        if self.settings is not None:
            content[rec.SETTINGS] = ConfigRecord(dict(self.settings))
        return Message(
            content=content,
            message_type=message_type,
            dst_node_id=self.node_id,
            group_id=str(group_id) if group_id else "",
            ttl=timeout,
        )

    def exchange(
        self, content: RecordDict, message_type: str, timeout: float | None, group_id: int | None
    ) -> RecordDict:
        replies = list(
            self.grid.send_and_receive([self.message(content, message_type, group_id, timeout)], timeout=timeout)
        )
        if len(replies) != 1:
            raise NoReply(f"node {self.node_id} sent no reply to a {message_type} message within {timeout} s")
        if replies[0].has_error():
            raise NoReply(_reason(replies[0]))
        return replies[0].content

    # ---------------------------------------------------------------------------------- ClientProxy API
    def get_properties(self, ins: GetPropertiesIns, timeout: float | None, group_id: int | None) -> GetPropertiesRes:
        kind = rec.PHASE if wire.PHASE in ins.config else rec.IDENTITY
        props = rec.content_values(self.exchange(rec.values_content(ins.config), kind, timeout, group_id))
        return GetPropertiesRes(status=Status(Code.OK, ""), properties=props)

    def get_parameters(self, ins: GetParametersIns, timeout: float | None, group_id: int | None) -> GetParametersRes:
        content = self.exchange(RecordDict({rec.CONFIG: rec.config_record(ins.config)}), rec.MODEL, timeout, group_id)
        arrays, _ = rec.request_arrays(content)
        return GetParametersRes(status=Status(Code.OK, ""), parameters=ndarrays_to_parameters(arrays))

    def fit(self, ins: FitIns, timeout: float | None, group_id: int | None) -> FitRes:
        return fit_result(self.exchange(train_content(ins, None), rec.TRAIN, timeout, group_id))

    def evaluate(self, ins: EvaluateIns, timeout: float | None, group_id: int | None) -> EvaluateRes:
        return evaluate_result(self.exchange(train_content(ins, None), rec.EVALUATE, timeout, group_id))

    def reconnect(self, ins, timeout, group_id):  # pragma: no cover (Flower's API; nothing to do)
        from flwr.common import DisconnectRes

        return DisconnectRes(reason="")


def train_content(ins: FitIns | EvaluateIns, names: list[str] | None) -> RecordDict:
    """A train or evaluate message's content from the core's instruction (arrays named by the config's
    :data:`~flowergraph.wire.KEYS`, else by ``names``)."""
    arrays = wire.to_ndarrays(ins.parameters)
    keys = wire.decode_keys(ins.config, len(arrays)) if wire.KEYS in ins.config else names
    return RecordDict({rec.ARRAYS: rec.array_record(arrays, keys), rec.CONFIG: rec.config_record(ins.config)})


def fit_result(content: RecordDict) -> FitRes:
    arrays, keys = rec.request_arrays(content)
    num, metrics = rec.reply_metrics(content)
    return FitRes(
        status=Status(Code.OK, ""), parameters=ndarrays_to_parameters(arrays), num_examples=num, metrics=metrics
    )


def evaluate_result(content: RecordDict) -> EvaluateRes:
    num, metrics = rec.reply_metrics(content)
    loss = float(metrics.get(wire.LOSS, 0.0) or 0.0)
    return EvaluateRes(status=Status(Code.OK, ""), loss=loss, num_examples=num, metrics=metrics)


class GridNodes(SimpleClientManager):
    """The grid's nodes as a ClientManager of :class:`NodeProxy` s (registered as the grid reports them)."""

    def __init__(self, grid: Grid, poll_s: float = 0.5, settings: ConfigRecord | None = None) -> None:
        super().__init__()
        self.grid = grid
        self.poll_s = poll_s
        self.settings = settings
        self._lock = threading.Lock()

    def refresh(self) -> None:
        with self._lock:
            known = set(self.clients)
            for node_id in self.grid.get_node_ids():
                if str(node_id) not in known:
                    self.register(NodeProxy(int(node_id), self.grid, self.settings))

    def num_available(self) -> int:
        self.refresh()
        return super().num_available()

    def all(self) -> dict[str, ClientProxy]:
        self.refresh()
        return super().all()

    def wait_for(self, num_clients: int, timeout: int = 86400) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if self.num_available() >= num_clients:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))

    def exchange(
        self, requests: list[tuple[ClientProxy, dict[str, Any]]], timeout: float | None, group_id: int
    ) -> Iterator[tuple[ClientProxy, dict[str, Any] | BaseException]]:
        """Send one query per request (a phase message, or the identity request: its values as records,
        :func:`~flowergraph.app.message_records.values_content`) to all the nodes at once, and yield each node's
        reply values as it arrives (a node whose reply is an error, or that sent none within ``timeout``:
        :class:`NoReply`). What the core's phases and identity handshake send through (the legacy face sends
        one ``get_properties`` per client instead)."""
        messages: dict[str, tuple[ClientProxy, Message]] = {}
        for proxy, values in requests:
            kind = rec.PHASE if wire.PHASE in values else rec.IDENTITY
            message = proxy.message(rec.values_content(values), kind, group_id, timeout)  # type: ignore[attr-defined]
            messages[str(len(messages))] = (proxy, message)
        if not messages:
            return
        order = list(messages.values())
        ids = list(self.grid.push_messages([m for _, m in order]))
        if len(ids) != len(order):  # Flower's in-memory grid leaves out what it did not store
            stored = set(ids)
            ids = [m.metadata.message_id if m.metadata.message_id in stored else None for _, m in order]
        pending = {}
        for mid, (proxy, _) in zip(ids, order):
            if mid is None:
                yield proxy, NoReply(f"the message to node {proxy.cid} could not be pushed to the SuperLink")
            else:
                pending[str(mid)] = proxy
        deadline = None if timeout is None else time.monotonic() + timeout
        wait = 0.002
        while pending:
            got = list(self.grid.pull_messages(list(pending)))
            for reply in got:
                proxy = pending.pop(reply.metadata.reply_to_message_id, None)
                if proxy is None:
                    continue
                if reply.has_error():
                    yield proxy, NoReply(_reason(reply))
                else:
                    yield proxy, rec.content_values(reply.content)
            if not pending:
                return
            if deadline is not None and time.monotonic() >= deadline:
                break
            wait = 0.002 if got else min(wait * 1.5, 0.05)
            time.sleep(wait if deadline is None else max(0.0, min(wait, deadline - time.monotonic())))
        for proxy in pending.values():
            yield proxy, NoReply(f"node {proxy.cid} sent no reply within {timeout} s")


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
        self._instructions: dict[str, tuple[ClientProxy, Any]] = {}
        self._parameters: Parameters | None = None
        self._record: ArrayRecord | None = None
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
        """The grid's nodes as the core's ClientManager (one per grid; what checkpoints ask for client state)."""
        return self._grid_nodes(grid)

    def _grid_nodes(self, grid: Grid) -> GridNodes:
        if self.nodes is None or self.nodes.grid is not grid:
            self.nodes = GridNodes(grid, settings=self.client_settings)
            inner = _inner(self.core)
            inner.phases.transport = inner.directory.transport = self.nodes.exchange  # all nodes at once
        return self.nodes

    def _names(self, count: int) -> list[str] | None:
        model = getattr(getattr(self.core, "bank", None), "global_model", None)
        return list(model) if model is not None and len(model) == count else None

    def _adopt(self, arrays: ArrayRecord) -> Parameters:
        """The Parameters of ``arrays`` (the core's own serialisation when they are the record this strategy
        returned last: its global model)."""
        if self._parameters is not None and arrays is self._record:
            return self._parameters
        return ndarrays_to_parameters(rec.record_arrays(arrays)[0])

    def _returned(self, parameters: Parameters) -> ArrayRecord:
        """``parameters`` (the core's global model) as the ArrayRecord this strategy hands to Flower's loop."""
        self._parameters = parameters
        arrays = wire.to_ndarrays(parameters)
        self._record = rec.array_record(arrays, self._names(len(arrays)))
        return self._record

    @property
    def timeout(self) -> float | None:
        """Each exchange's timeout: the core's ``round-timeout``, else ``start()``'s ``timeout``."""
        return getattr(self.core, "round_timeout", None) or self._timeout

    def _messages(
        self, instructions, message_type: str, config: ConfigRecord, group_id: int, timeout: float | None
    ) -> list[Message]:
        self._instructions = {}
        rank = getattr(getattr(self.core, "directory", None), "dispatch_rank", None)
        ordered = sorted(instructions, key=lambda pi: rank(pi[0])) if rank is not None else list(instructions)
        messages = []
        for proxy, ins in ordered:
            ins.config = {**dict(config), **ins.config}  # the caller's config under the method's own keys
            content = train_content(ins, self._names(len(ins.parameters.tensors)))
            messages.append(proxy.message(content, message_type, group_id, timeout))
            self._instructions[proxy.cid] = (proxy, ins)
        return messages

    def _sort(self, replies: Iterable[Message], to_result: Callable[[RecordDict], Any]):
        """(results, failures) for the core, each failure naming its node (a missing reply is a failure too)."""
        from .loop import ClientFailure

        results, failures, answered = [], [], set()
        for reply in replies:
            cid = str(reply.metadata.src_node_id)
            proxy = self._instructions.get(cid, (None, None))[0]
            if proxy is None:
                continue
            answered.add(cid)
            if reply.has_error():
                failures.append(ClientFailure(proxy, NoReply(_reason(reply))))
                continue
            try:
                results.append((proxy, to_result(reply.content)))
            except Exception as exc:  # noqa: BLE001 (a malformed reply fails that client, as on the legacy face)
                failures.append(ClientFailure(proxy, exc))
        for cid, (proxy, _) in self._instructions.items():
            if cid not in answered:
                failures.append(ClientFailure(proxy, NoReply(f"node {cid} sent no reply within the round's timeout")))
        return results, failures

    # ---------------------------------------------------------------------------------- Strategy API
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        parameters = self._adopt(arrays)
        instructions = self.core.configure_fit(server_round, parameters, self._grid_nodes(grid))
        return self._messages(instructions, rec.TRAIN, config, server_round, self.timeout)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        results, failures = self._sort(replies, fit_result)
        log(INFO, "aggregate_train: received %s results and %s failures", len(results), len(failures))
        parameters, metrics = self.core.aggregate_fit(server_round, results, failures)
        if parameters is None:
            numbers = rec.split_metrics(metrics or {})[0]
            return None, MetricRecord(numbers) if numbers else None
        return self._returned(parameters), MetricRecord(rec.split_metrics(metrics)[0])

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        parameters = self._adopt(arrays)
        instructions = self.core.configure_evaluate(server_round, parameters, self._grid_nodes(grid))
        return self._messages(instructions, rec.EVALUATE, config, server_round, self.timeout)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        results, failures = self._sort(replies, evaluate_result)
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
        on_round_end: Callable[[int, Parameters], None] | None = None,
    ) -> Result:
        """Run the method: Flower's ``Strategy.start`` contract, with the core's setup first.

        ``initial_arrays``: the initial global model (None or empty: the core's own, else one client's, as on the
        legacy face). ``timeout`` bounds each round's replies where the core sets no ``round-timeout``.
        ``start_round`` > 1 resumes (the core holds the checkpoint's state); ``on_round_end(round, parameters)``
        is called after each round (checkpoints)."""
        log(INFO, "Starting %s strategy:", type(self).__name__)
        self.summary()
        train_config = ConfigRecord() if train_config is None else train_config
        evaluate_config = ConfigRecord() if evaluate_config is None else evaluate_config
        nodes = self._grid_nodes(grid)
        core = self.core
        self._timeout = timeout
        inner = _inner(core)
        if initial_arrays is not None and len(initial_arrays) > 0 and inner.initial_parameters is None:
            arrays, keys = rec.record_arrays(initial_arrays)
            inner.initial_parameters = dict(zip(keys, arrays)) if not rec.positional(keys) else arrays
        parameters = core.initialize_parameters(nodes)
        if parameters is None:
            raise RuntimeError("the strategy has no initial model: pass initial_arrays")
        arrays = self._returned(parameters)
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
            core.evaluate(0, parameters)
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
            core.evaluate(current_round, self._parameters)
            messages = list(self.configure_evaluate(current_round, arrays, evaluate_config, grid))
            if messages:  # the core's record of it reaches the result through ``evaluated``
                self.aggregate_evaluate(current_round, grid.send_and_receive(messages, timeout=self.timeout))
            if evaluate_fn is not None and (res := evaluate_fn(current_round, arrays)) is not None:
                result.evaluate_metrics_serverapp[current_round] = res
            if on_round_end is not None:
                on_round_end(current_round, self._parameters)
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
