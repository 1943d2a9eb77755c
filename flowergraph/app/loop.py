"""The legacy stack's adapter, server side: flowergraph's core as a legacy Flower ``Strategy``, and Flower's legacy
server loop, able to start at any round and to name the client behind every failure.

:class:`LegacyStrategy` wraps a core strategy (:class:`flowergraph.strategies.FederatedStrategy`, or a DP wrapper
of one) as a ``flwr.server.strategy.Strategy``: a ``ClientProxy`` becomes a :class:`~flowergraph.strategies.nodes.
Node`, a ``FitIns`` / ``EvaluateIns`` is built from the core's :class:`~flowergraph.strategies.nodes.Instruction`,
a ``FitRes`` / ``EvaluateRes`` becomes a :class:`~flowergraph.strategies.nodes.Reply`, ``Parameters`` become
arrays; the client manager is the core's :class:`~flowergraph.strategies.nodes.Federation` (:class:`LegacyNodes`:
a phase's queries are ``get_properties`` calls, at most ``max_parallel`` at once). Flower 1.42 has SecAgg+ only on
this stack; flowergraph's launchers take it for ``secure-agg=secagg+`` or ``flower-api=legacy``.

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
import math
import threading
import timeit
import zlib
from logging import INFO
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

import numpy as np
from flwr.common import (
    Code,
    EvaluateIns,
    FitIns,
    GetParametersIns,
    GetPropertiesIns,
    Parameters,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.logger import log
from flwr.server import Server, ServerConfig
from flwr.server.client_manager import ClientManager, SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.history import History
from flwr.server.strategy import Strategy

from .. import wire
from ..errors import ClientProcessDied
from ..storage._astlock import serialize_ast_parse
from ..strategies.directory import PROCESS_DIED, distinct_failures, failure_reason, refusal
from ..strategies.nodes import Failure, Instruction, Node, Reply


__all__ = [
    "ClientFailure",
    "FlowergraphServer",
    "LegacyNodes",
    "LegacyStrategy",
    "ManagedStrategy",
    "legacy_server",
    "node_of",
    "parameters_bytes",
    "run_clients",
    "run_legacy",
    "secagg_workflow",
    "to_ndarrays",
]


def to_ndarrays(parameters: Parameters) -> list[np.ndarray]:
    """Flower's ``parameters_to_ndarrays`` after the ``ast.parse`` lock (:mod:`flowergraph.storage._astlock`):
    how the legacy face decodes the arrays of a ``fit`` / ``evaluate`` message or of a model."""
    serialize_ast_parse()
    return parameters_to_ndarrays(parameters)


def parameters_bytes(parameters: Parameters | None) -> int:
    """Bytes of the serialised arrays in a Parameters object (the tensors as they go on the wire)."""
    if parameters is None:
        return 0
    return sum(len(t) for t in parameters.tensors)


def node_of(proxy: ClientProxy) -> Node:
    """The core's :class:`Node` for a client proxy (Flower's proxies are named by their node id; any other name is
    kept as the node's name, its id then a checksum of it)."""
    cid = str(proxy.cid)
    try:
        node_id = int(cid)
    except ValueError:
        node_id = zlib.crc32(cid.encode())
    return Node(node_id, "" if cid == str(node_id) else cid)


class LegacyNodes:
    """A legacy ``ClientManager``'s clients as the core's :class:`~flowergraph.strategies.nodes.Federation`:
    queries are ``get_properties`` calls (at most ``max_parallel`` at once), the initial model a
    ``get_parameters`` call, an evaluation an ``evaluate`` call."""

    def __init__(self, client_manager: ClientManager, max_parallel: int = 16) -> None:
        self.client_manager = client_manager
        self.max_parallel = max_parallel
        self._proxies: dict[str, ClientProxy] = {}
        self._lock = threading.Lock()

    def proxy(self, node: Node) -> ClientProxy:
        with self._lock:
            known = self._proxies.get(node.cid)
        if known is None:
            self.nodes()
            known = self._proxies[node.cid]
        return known

    def nodes(self) -> list[Node]:
        proxies = list(self.client_manager.all().values())
        with self._lock:
            for proxy in proxies:
                self._proxies[str(proxy.cid)] = proxy
        return [node_of(p) for p in proxies]

    def wait_for(self, count: int, timeout: float) -> bool:
        return self.client_manager.wait_for(count, timeout=max(1, int(math.ceil(timeout))))

    def _calls(
        self, requests: Iterable[tuple[Node, Any]], call: Callable[[ClientProxy, Any], Any], workers: int
    ) -> Iterator[tuple[Node, Any]]:
        """``call`` each request in a pool of ``workers`` threads, each node's outcome as it completes; a lazy
        ``requests`` is drawn as a worker frees (at most ``workers`` payloads held)."""
        requests = iter(requests)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers))
        futures: dict[concurrent.futures.Future, Node] = {}

        def refill() -> None:
            while len(futures) < max(1, workers):
                try:
                    node, payload = next(requests)
                except StopIteration:
                    return
                futures[pool.submit(call, self.proxy(node), payload)] = node

        try:
            refill()
            while futures:
                done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    node = futures.pop(future)  # no reference kept: a large reply is freed once handled
                    try:
                        outcome = future.result()
                    except Exception as exc:  # noqa: BLE001 (the core's failure policy handles it)
                        outcome = exc
                    finally:
                        del future
                    yield node, outcome
                    del outcome
                refill()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def query(
        self, requests: Iterable[tuple[Node, dict[str, Any]]], timeout: float | None, group_id: int, max_parallel=None
    ) -> Iterator[tuple[Node, dict[str, Any] | BaseException]]:
        def call(proxy: ClientProxy, values: dict[str, Any]) -> dict[str, Any]:
            res = proxy.get_properties(
                GetPropertiesIns(config=wire.to_legacy(values)), timeout=timeout, group_id=group_id
            )
            if res.status.code != Code.OK:
                raise RuntimeError(res.status.message)
            return dict(res.properties)

        yield from self._calls(requests, call, max_parallel or self.max_parallel)

    def get_model(self, node: Node, timeout: float | None) -> list[np.ndarray]:
        res = self.proxy(node).get_parameters(GetParametersIns(config={}), timeout=timeout, group_id=0)
        if not res.parameters.tensors:
            raise RuntimeError(f"it returned no initial parameters: {res.status.message}")
        return to_ndarrays(res.parameters)

    def evaluate(
        self, requests: list[tuple[Node, Instruction]], timeout: float | None, group_id: int
    ) -> Iterator[tuple[Node, Reply | BaseException]]:
        def call(proxy: ClientProxy, ins: Instruction) -> Reply:
            res = proxy.evaluate(
                EvaluateIns(ndarrays_to_parameters(ins.arrays), dict(ins.config)), timeout=timeout, group_id=group_id
            )
            return Reply([], int(res.num_examples), dict(res.metrics), float(res.loss))

        yield from self._calls(requests, call, 16)


def _failures(failures: list) -> list[Failure]:
    """Flower's failures (``(proxy, res)`` with an error status, :class:`ClientFailure`, bare exceptions) as the
    core's (SecAgg+'s repeats of one failed message dropped)."""
    out = []
    for failure in distinct_failures(failures):
        if isinstance(failure, tuple):
            proxy, res = failure
            out.append(Failure(node_of(proxy), res.status.message))
        else:
            proxy = getattr(failure, "proxy", None)
            out.append(Failure(None if proxy is None else node_of(proxy), getattr(failure, "cause", failure)))
    return out


class LegacyStrategy(Strategy):
    """A core strategy as a legacy Flower ``Strategy`` (see the module docstring). Every other attribute is the
    core's (read and set through): records, checkpoints, ``finish()``, ``global_arrays``, the parts."""

    _OWN = ("core", "_nodes", "_serialised", "_lock")

    def __init__(self, core: Any) -> None:
        object.__setattr__(self, "core", core)
        object.__setattr__(self, "_nodes", None)
        object.__setattr__(self, "_serialised", {})  # id(arrays list) -> (that list, its Parameters)
        object.__setattr__(self, "_lock", threading.Lock())
        inner = _inner(core)
        if isinstance(getattr(inner, "initial_parameters", None), Parameters):
            inner.initial_parameters = to_ndarrays(inner.initial_parameters)

    def __getattr__(self, name: str) -> Any:
        core = self.__dict__.get("core")
        if core is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(core, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.core, name, value)

    def __repr__(self) -> str:
        return repr(self.core)

    # ------------------------------------------------------------------------------------- conversions
    def nodes_for(self, client_manager: ClientManager) -> LegacyNodes:
        """The client manager as the core's Federation (one per client manager)."""
        nodes = self._nodes
        if nodes is None or nodes.client_manager is not client_manager:
            parallel = getattr(getattr(_inner(self.core), "phases", None), "max_parallel", 16)
            nodes = LegacyNodes(client_manager, parallel)
            object.__setattr__(self, "_nodes", nodes)
        return nodes

    def parameters(self, arrays: list[np.ndarray]) -> Parameters:
        """``arrays`` serialised once per list object (a round sends one model to many clients)."""
        with self._lock:
            hit = self._serialised.get(id(arrays))
            if hit is not None and hit[0] is arrays:
                return hit[1]
            params = ndarrays_to_parameters(arrays)
            if len(self._serialised) > 64:
                self._serialised.clear()
            self._serialised[id(arrays)] = (arrays, params)
            return params

    def arrays(self, parameters: Parameters | None) -> list[np.ndarray] | None:
        """The arrays of ``parameters`` (the very list they were made from, when this adapter made them)."""
        if parameters is None:
            return None
        with self._lock:
            for arrays, params in self._serialised.values():
                if params is parameters:
                    return arrays
        return to_ndarrays(parameters)

    def _out(self, pairs, make) -> list:
        nodes = self._nodes
        return [(nodes.proxy(node), make(self.parameters(ins.arrays), ins.config)) for node, ins in pairs]

    # ---------------------------------------------------------------------------------------- Strategy API
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        arrays = self.core.initialize_parameters(self.nodes_for(client_manager))
        return None if arrays is None else self.parameters(arrays)

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        with self._lock:
            keep = {k: v for k, v in self._serialised.items() if v[1] is parameters}
            self._serialised.clear()
            self._serialised.update(keep)
        pairs = self.core.configure_fit(server_round, self.arrays(parameters), self.nodes_for(client_manager))
        return self._out(pairs, FitIns)

    def aggregate_fit(self, server_round: int, results: list, failures: list) -> tuple[Parameters | None, dict]:
        replies = []
        bad = []
        for proxy, res in results:
            try:
                arrays = to_ndarrays(res.parameters)
            except Exception as exc:  # noqa: BLE001 (an undecodable update fails its client)
                bad.append(Failure(node_of(proxy), f"undecodable update ({type(exc).__name__}: {exc})"))
                continue
            replies.append((node_of(proxy), Reply(arrays, int(res.num_examples), dict(res.metrics))))
        arrays, metrics = self.core.aggregate_fit(server_round, replies, _failures(failures) + bad)
        return (None if arrays is None else self.parameters(arrays)), metrics

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        pairs = self.core.configure_evaluate(server_round, self.arrays(parameters), self.nodes_for(client_manager))
        return self._out(pairs, EvaluateIns)

    def aggregate_evaluate(self, server_round: int, results: list, failures: list) -> tuple[float | None, dict]:
        replies = [
            (node_of(proxy), Reply([], int(res.num_examples), dict(res.metrics), float(res.loss)))
            for proxy, res in results
        ]
        return self.core.aggregate_evaluate(server_round, replies, _failures(failures))

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict] | None:
        return self.core.evaluate(server_round, self.arrays(parameters))

    def checkpoint_clients(self, server_round: int, client_manager: ClientManager) -> dict[str, Any] | None:
        return self.core.checkpoint_clients(server_round, self.nodes_for(client_manager))


def _inner(core: Any) -> Any:
    """The core strategy inside DP wrappers (held as ``strategy``)."""
    from ..strategies.base import FederatedStrategy

    while not isinstance(core, FederatedStrategy) and "strategy" in vars(core):
        core = vars(core)["strategy"]
    return core


def secagg_workflow(s: Any):
    """Flower's ``SecAggPlusWorkflow`` with the run's ``secagg-*`` settings (``secure-agg=secagg+``)."""
    from flwr.server.workflow import SecAggPlusWorkflow

    shares = s.secagg_num_shares
    threshold = s.secagg_reconstruction_threshold
    return SecAggPlusWorkflow(
        num_shares=int(shares) if shares > 1 else float(shares),
        reconstruction_threshold=int(threshold) if threshold > 1 else float(threshold),
        clipping_range=float(s.secagg_clipping_range),
        quantization_range=int(s.secagg_quantization_range),
        max_weight=s.secagg_weight_bound,
        timeout=s.round_timeout,
    )


def legacy_server(
    core: Any,
    *,
    start_round: int = 1,
    on_round_end: Callable[[int, list[np.ndarray] | None], None] | None = None,
    checkpointer: Any = None,
) -> "FlowergraphServer":
    """Flower's legacy server loop (:class:`FlowergraphServer`) running ``core`` through :class:`LegacyStrategy`;
    ``on_round_end(round, arrays)`` gets arrays; ``checkpointer`` (when given) is told the server's clients as
    its ``federation`` (the client-checkpoint phase)."""
    strategy = LegacyStrategy(core)
    hook = None if on_round_end is None else (lambda r, parameters: on_round_end(r, strategy.arrays(parameters)))
    server = FlowergraphServer(strategy=strategy, start_round=start_round, on_round_end=hook)
    if checkpointer is not None:
        checkpointer.federation = strategy.nodes_for(server.client_manager())
    return server


def run_legacy(
    grid: Any,
    core: Any,
    *,
    num_rounds: int,
    round_timeout: float | None,
    start_round: int = 1,
    on_round_end: Callable[[int, list[np.ndarray] | None], None] | None = None,
    checkpointer: Any = None,
    settings: Any = None,
) -> None:
    """Run ``core`` on ``grid`` with Flower's legacy stack (``start_grid``), each training round through
    Flower's ``SecAggPlusWorkflow`` when ``settings`` say ``secure-agg=secagg+``."""
    from flwr.server.compat import start_grid

    server = legacy_server(core, start_round=start_round, on_round_end=on_round_end, checkpointer=checkpointer)
    if settings is not None and settings.secure_agg == "secagg+":
        server.use_fit_workflow(secagg_workflow(settings), grid, num_rounds, round_timeout)
    start_grid(grid=grid, server=server, config=ServerConfig(num_rounds=num_rounds, round_timeout=round_timeout))


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
