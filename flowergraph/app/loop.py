"""Flower's legacy server loop, able to start at any round and to name the client behind every failure.

:class:`FlowergraphServer` is a :class:`flwr.server.Server` (pass it to ``start_grid(server=...)``) that runs
exactly Flower's ``Server.fit`` loop (initial parameters, then per round: ``fit_round``, centralised
``strategy.evaluate``, ``evaluate_round``) with three differences:

* ``start_round``: a resumed run starts at round k + 1 (Flower's ``Server.fit`` always starts at 1) and skips
  the evaluation of the initial parameters (round 0), which the interrupted run already did;
* ``on_round_end(server_round, parameters)`` is called after each round's evaluation (checkpoints);
* a client's exception is handed to the strategy as a :class:`ClientFailure` that carries its ``ClientProxy``
  (Flower passes bare exceptions, so a strategy cannot tell which client a timeout or a crash belongs to);
* a round in which a client's process died in Flower's Ray simulation (``ActorDiedError``) is completed with the
  clients that answered, checkpointed as usual, and the run then stops with :class:`ClientProcessDied`: Flower
  1.41 does not replace a dead Ray actor and keeps handing it later messages, healthy clients' included, so
  going on would train on fewer and fewer clients while the run looks complete (docs/reliability.md);
* :meth:`FlowergraphServer.use_fit_workflow`: the training rounds run through one of Flower's fit workflows
  instead (``SecAggPlusWorkflow`` for ``secure-agg=secagg+``), called each round with a ``LegacyContext`` that
  holds the current parameters and round, as Flower's ``DefaultWorkflow`` would, while the rest of the loop
  (start round, checkpoints, evaluation) stays this one.

Everything else (thread pool, timeouts, the History it returns) is Flower's.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import timeit
from logging import INFO
from typing import Any, Callable, Protocol, runtime_checkable

from flwr.common import Code, Parameters
from flwr.common.logger import log
from flwr.server import Server
from flwr.server.client_manager import ClientManager, SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.history import History
from flwr.server.strategy import Strategy

from ..errors import ClientProcessDied
from ..strategies.directory import PROCESS_DIED, failure_reason, refusal


@runtime_checkable
class ManagedStrategy(Protocol):
    """What this loop and the checkpoints use besides Flower's ``Strategy`` API:
    :class:`flowergraph.strategies.FederatedStrategy` and its DP wrappers have it. A plain Flower strategy runs
    too, without the SecAgg+ byte counts and client checkpoints."""

    last_fit_round: int

    @property
    def global_arrays(self) -> Any: ...

    def measured_fit_bytes(self, server_round: int, down: int, up: int, stages: Any = ()) -> None: ...

    def fit_round_failed(self, server_round: int, reason: str) -> None: ...

    def checkpoint_clients(self, server_round: int, client_manager: ClientManager) -> dict[str, Any] | None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def finish(self) -> None: ...


class ClientFailure(Exception):
    """A client's exception, with the client: ``proxy`` and ``cause``; ``str()`` is the cause's text."""

    def __init__(self, proxy: ClientProxy, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.proxy = proxy
        self.cause = cause


def run_clients(
    instructions,
    call: str,
    timeout: float | None,
    group_id: int,
    max_workers: int | None,
    rank: Callable[[ClientProxy], Any] | None = None,
):
    """Send each ``(proxy, ins)`` (``call`` = "fit" or "evaluate") concurrently; (results, failures) as Flower's
    ``fit_clients`` returns them, except that exceptions are :class:`ClientFailure`. ``rank(proxy)``: the
    messages are sent in this order (Flower's simulation serves them in the order they arrive); results and
    failures keep the order of ``instructions`` whatever it is."""

    def one(proxy, ins):
        try:
            return proxy, getattr(proxy, call)(ins, timeout=timeout, group_id=group_id)
        except BaseException as exc:  # noqa: BLE001 (handed to the strategy, as Flower does)
            raise ClientFailure(proxy, exc) from exc

    instructions = list(instructions)
    order = list(range(len(instructions)))
    if rank is not None:
        order.sort(key=lambda i: rank(instructions[i][0]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max_workers) as pool:
        submitted = {i: pool.submit(one, *instructions[i]) for i in order}
        futures = [submitted[i] for i in range(len(instructions))]
        concurrent.futures.wait(futures)
    results, failures = [], []
    for future in futures:
        exc = future.exception()
        if exc is not None:
            failures.append(exc)
            continue
        proxy, res = future.result()
        (results if res.status.code == Code.OK else failures).append((proxy, res))
    return results, failures


class FlowergraphServer(Server):
    """Flower's ``Server`` starting at ``start_round``, with a per-round hook and failures that name clients."""

    def __init__(
        self,
        *,
        strategy: Strategy,
        client_manager: ClientManager | None = None,
        start_round: int = 1,
        on_round_end: Callable[[int, Parameters], None] | None = None,
    ) -> None:
        super().__init__(client_manager=client_manager or SimpleClientManager(), strategy=strategy)
        if start_round < 1:
            raise ValueError(f"start_round must be >= 1, got {start_round}")
        self.start_round = start_round
        self.on_round_end = on_round_end
        self.managed: ManagedStrategy | None = strategy if isinstance(strategy, ManagedStrategy) else None
        self.fit_workflow: Callable | None = None
        self.grid = None
        self._legacy_context = None
        self._start_time = timeit.default_timer()
        self._workflow_errors: list[str] = []

    def use_fit_workflow(self, workflow: Callable, grid, num_rounds: int, round_timeout: float | None) -> None:
        """Run each training round as ``workflow(grid, LegacyContext)`` (Flower's fit-workflow signature)."""
        from flwr.app import Context, RecordDict
        from flwr.server import ServerConfig
        from flwr.server.compat.legacy_context import LegacyContext

        self.fit_workflow, self.grid = workflow, grid
        base = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
        self._legacy_context = LegacyContext(
            base,
            config=ServerConfig(num_rounds=num_rounds, round_timeout=round_timeout),
            strategy=self.strategy,
            client_manager=self._client_manager,
        )

    def fit(self, num_rounds: int, timeout: float | None) -> tuple[History, float]:
        history = History()
        log(INFO, "[INIT]")
        self.parameters = self._get_initial_parameters(server_round=0, timeout=timeout)
        if self.start_round == 1:
            res = self.strategy.evaluate(0, parameters=self.parameters)
            if res is not None:
                history.add_loss_centralized(server_round=0, loss=res[0])
                history.add_metrics_centralized(server_round=0, metrics=res[1])
        else:
            log(INFO, "resuming at round %s of %s", self.start_round, num_rounds)
        start_time = timeit.default_timer()
        for current_round in range(self.start_round, num_rounds + 1):
            log(INFO, "")
            log(INFO, "[ROUND %s]", current_round)
            res_fit = self.fit_round(server_round=current_round, timeout=timeout)
            if res_fit is not None:
                parameters_prime, fit_metrics, _ = res_fit
                if parameters_prime:
                    self.parameters = parameters_prime
                history.add_metrics_distributed_fit(server_round=current_round, metrics=fit_metrics)
            res_cen = self.strategy.evaluate(current_round, parameters=self.parameters)
            if res_cen is not None:
                history.add_loss_centralized(server_round=current_round, loss=res_cen[0])
                history.add_metrics_centralized(server_round=current_round, metrics=res_cen[1])
            res_fed = self.evaluate_round(server_round=current_round, timeout=timeout)
            if res_fed is not None and res_fed[0] is not None:
                history.add_loss_distributed(server_round=current_round, loss=res_fed[0])
                history.add_metrics_distributed(server_round=current_round, metrics=res_fed[1])
            if self.on_round_end is not None:
                self.on_round_end(current_round, self.parameters)
            died = self._process_deaths([res for res in (res_fit, res_fed) if res is not None])
            if died:  # the last round too: its accuracy is over fewer clients than the run had
                trained = [self._label(proxy) for proxy, _ in res_fit[2][0]] if res_fit is not None else []
                raise self._died(current_round, died, trained)
        return history, timeit.default_timer() - start_time

    def _process_deaths(self, round_results) -> list[str]:
        """The clients of this round's fit and evaluate phases whose message failed because the Ray actor
        process running it died (named by the strategy's client directory; "a client" where none is known)."""
        names: list[str] = []
        for res in round_results:
            for failure in res[2][1]:
                if isinstance(failure, tuple):
                    proxy, reason = failure[0], failure_reason(failure[1].status.message)
                else:
                    proxy = getattr(failure, "proxy", None)
                    reason = failure_reason(getattr(failure, "cause", failure))
                if reason != PROCESS_DIED:
                    continue
                name = self._label(proxy)
                if name not in names:
                    names.append(name)
        if any(failure_reason(r) == PROCESS_DIED for r in self._workflow_errors):
            names = names or ["a client"]
        self._workflow_errors = []
        return names

    def _label(self, proxy: ClientProxy | None) -> str:
        directory = getattr(self.strategy, "directory", None)
        if proxy is None:
            return "a client"
        return directory.label(proxy) if directory is not None else f"node {proxy.cid}"

    @staticmethod
    def _died(server_round: int, clients: list[str], trained: list[str]) -> ClientProcessDied:
        who = f"client {clients[0]}" if len(clients) == 1 else "clients " + ", ".join(clients)
        with_ = (
            ("with client " if len(trained) == 1 else "with clients ") + ", ".join(trained)
            if trained
            else "with no client's update"
        )
        return ClientProcessDied(
            f"round {server_round}: {who} got no reply: the Ray actor process that ran the message died "
            f"(Ray: ActorDiedError; with several clients, one process died and the others' messages went to it). "
            f"Flower's Ray simulation does not replace a dead actor and hands it later messages too, healthy "
            f"clients' included, so the run stops after round {server_round} instead of finishing with fewer "
            f"clients. Round {server_round} trained {with_} (rounds.jsonl: its 'failures')",
            server_round,
            tuple(clients),
        )

    def _dispatch_rank(self) -> Callable[[ClientProxy], Any] | None:
        """The strategy's order for sending a round's messages (its client directory's, when it has one)."""
        directory = getattr(self.strategy, "directory", None)
        return getattr(directory, "dispatch_rank", None)

    def fit_round(self, server_round: int, timeout: float | None):
        if self.fit_workflow is not None:
            return self._fit_round_workflow(server_round)
        instructions = self.strategy.configure_fit(
            server_round=server_round, parameters=self.parameters, client_manager=self._client_manager
        )
        if not instructions:
            log(INFO, "configure_fit: no clients selected, cancel")
            return None
        results, failures = run_clients(
            instructions, "fit", timeout, server_round, self.max_workers, self._dispatch_rank()
        )
        log(INFO, "aggregate_fit: received %s results and %s failures", len(results), len(failures))
        parameters, metrics = self.strategy.aggregate_fit(server_round, results, failures)
        return parameters, metrics, (results, failures)

    def _fit_round_workflow(self, server_round: int):
        import flwr.compat.common.recorddict_compat as compat
        from flwr.app import ConfigRecord
        from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key

        ctx = self._legacy_context
        ctx.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(self.parameters, keep_input=True)
        ctx.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
            {Key.CURRENT_ROUND: server_round, Key.START_TIME: self._start_time}
        )
        managed = self.managed
        pushed, pulled = getattr(self.grid, "bytes_pushed", None), getattr(self.grid, "bytes_pulled", None)
        recording = getattr(self.grid, "recording", None)  # PollingGrid: each stage's messages, time, errors
        with recording() if recording else contextlib.nullcontext(None) as rec:
            self.fit_workflow(self.grid, ctx)
        if rec is not None:
            self._workflow_errors = [str(r) for r in rec.errors]
            refused = [refusal(failure_reason(r)) for r in rec.errors if refusal(failure_reason(r))]
            if refused:  # the workflow dropped a client that refused the run: fail it with the reason instead
                raise RuntimeError(f"round {server_round}: {refused[0]}")
        if pushed is not None and managed is not None:  # a counting grid (PollingGrid)
            managed.measured_fit_bytes(
                server_round,
                self.grid.bytes_pushed - pushed,
                self.grid.bytes_pulled - pulled,
                stages=rec.exchanges if rec is not None else (),
            )
        if managed is not None and managed.last_fit_round != server_round:
            # the workflow stopped before handing the strategy any result (SecAgg+: too few clients answered)
            managed.fit_round_failed(
                server_round,
                "the fit workflow stopped before aggregation (see the log: too few clients completed a stage)",
            )
        parameters = compat.arrayrecord_to_parameters(ctx.state.array_records[MAIN_PARAMS_RECORD], keep_input=True)
        return parameters, {}, ([], [])

    def evaluate_round(self, server_round: int, timeout: float | None):
        instructions = self.strategy.configure_evaluate(
            server_round=server_round, parameters=self.parameters, client_manager=self._client_manager
        )
        if not instructions:
            return None
        results, failures = run_clients(
            instructions, "evaluate", timeout, server_round, self.max_workers, self._dispatch_rank()
        )
        log(INFO, "aggregate_evaluate: received %s results and %s failures", len(results), len(failures))
        loss, metrics = self.strategy.aggregate_evaluate(server_round, results, failures)
        return loss, metrics, (results, failures)
