"""The inline simulation engine (``simulation-engine=inline``): Flower's own Simulation Engine with a backend that
runs the ClientApp in the engine's worker thread instead of a Ray actor.

What runs is Flower's: the ServerApp runs in a thread on Flower's ``InMemoryGrid`` over an in-memory
``LinkState`` (what :func:`flwr.simulation.run_simulation._main_loop` builds), the nodes are registered and their
contexts kept by the engine's own functions (private: :mod:`flowergraph._flower`), and
messages move between the link state and the backend through ``vce_api.run_api`` (its extractor, worker and
injector threads). Only the Simulation Engine's ``Backend`` is ours:
:class:`InlineBackend` calls the ClientApp (flowergraph's real one, every mod included) in the calling thread.

Every boundary is serialised: the message and the node's ``context`` (with ``context.state``) go into the
ClientApp as Flower protobuf bytes (``message_to_proto`` / ``context_to_proto``, ``SerializeToString``) and come
back the same way, so the ClientApp never holds an object the server or the engine holds. We use Flower's
protobuf serde, not pickle as Ray does: it is what a deployment carries (gRPC between SuperLink, SuperNode and
``flwr-clientapp``, context included), and it is the stricter of the two: anything protobuf carries, pickle
carries, not the other way round (a Python object smuggled into a record would pickle but fails here as it
fails in a deployment).

The run configuration is the run's: the app's ``pyproject.toml`` defaults (``[tool.flwr.app.config]``, written by
:func:`flowergraph.app.generator.app_pyproject`) fused with the overrides Flower reads from a ``--run-config``
TOML file, by Flower's own functions, as ``flwr-simulation`` does (``flwr.simulation.run_simulation`` would pass
an empty one).

One worker thread, one process: messages are handled one at a time in node order (so every client's training
sees the same torch RNG and thread settings as in its own Ray actor), there is no process isolation and no
resource limit. The launcher runs it in one child process (``python -m flowergraph.app.inline``), see
:func:`flowergraph.simulation.run_simulation`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any, Callable

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.client_app import ClientAppException, LoadClientAppError
from flwr.common.serde import context_from_proto, context_to_proto, message_from_proto, message_to_proto
from flwr.proto.message_pb2 import Context as ProtoContext  # pylint: disable=no-name-in-module
from flwr.proto.message_pb2 import Message as ProtoMessage  # pylint: disable=no-name-in-module

from .. import _flower
from flwr.serverapp import ServerApp

ENGINES = ("ray", "inline")
Backend, BackendConfig = _flower.simulation_backend()  # Flower's Simulation Engine's backend base class


def wire_message(message: Message) -> Message:
    """``message`` through Flower's protobuf bytes and back: a new Message sharing nothing with the old one."""
    data = message_to_proto(message).SerializeToString()
    proto = ProtoMessage()
    proto.ParseFromString(data)
    return message_from_proto(proto)


def _wire_context(context: Context) -> Context:
    data = context_to_proto(context).SerializeToString()
    proto = ProtoContext()
    proto.ParseFromString(data)
    return context_from_proto(proto)


class RunConfigMemo:
    """The run configs :func:`wire_context` has already carried through protobuf, by content: each node's context
    carries the run's whole run config (flowergraph's app: ~190 keys), and carrying it both ways was ~0.8 ms of
    every message at 1,000 clients (ten times the rest of the context). A run config equal to one carried before,
    key by key with the same value *and type* (``1``, ``1.0`` and ``True`` are three configs), comes out as a new
    dict of what protobuf gave that time: the values are Flower's scalars (bool, int, float, str, bytes:
    immutable), so the copy shares nothing mutable with either side, and anything protobuf refuses is still
    refused on the config's first trip (a value that cannot be keyed, e.g. a list, always takes the full trip).
    Bounded: the ``size`` most recent configs."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._wired: dict[tuple, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(run_config) -> tuple | None:
        try:
            key = tuple((k, type(v), v) for k, v in run_config.items())
            hash(key)
        except TypeError:
            return None
        return key

    def get(self, key: tuple) -> dict[str, Any] | None:
        with self._lock:
            wired = self._wired.get(key)
        return None if wired is None else dict(wired)

    def put(self, key: tuple, wired) -> None:
        with self._lock:
            self._wired.pop(key, None)
            while len(self._wired) >= self.size:
                self._wired.pop(next(iter(self._wired)))
            self._wired[key] = dict(wired)


_RUN_CONFIGS = RunConfigMemo()


def wire_context(context: Context, memo: RunConfigMemo | None = _RUN_CONFIGS) -> Context:
    """``context`` (node config, run config, ``state``) through Flower's protobuf bytes and back. With ``memo``
    (default: this process's), a run config that already made the trip is not serialised again
    (:class:`RunConfigMemo`); ``memo=None``: everything makes the trip."""
    key = memo.key(context.run_config) if memo is not None else None
    wired = memo.get(key) if key is not None else None
    if wired is None:
        out = _wire_context(context)
        if key is not None:
            memo.put(key, out.run_config)
        return out
    out = _wire_context(dataclasses.replace(context, run_config={}))  # every other field makes the trip
    out.run_config = wired
    return out


class InlineBackend(Backend):
    """A Simulation Engine backend that runs the ClientApp in the engine's worker thread, with the message and the
    context serialised both ways (:func:`wire_message`, :func:`wire_context`). One worker: messages are handled
    one after another. ``backend_config`` is accepted and ignored (no resources to give)."""

    def __init__(self, backend_config: BackendConfig | None = None) -> None:
        super().__init__(backend_config or {})
        self.app_fn: Callable[[], ClientApp] | None = None
        self.messages = 0
        self._busy = threading.Lock()

    def build(self, app_fn: Callable[[], ClientApp]) -> None:
        self.app_fn = app_fn

    @property
    def num_workers(self) -> int:
        return 1

    def is_worker_idle(self) -> bool:
        return not self._busy.locked()

    def wait_idle(self) -> None:
        """Return once no message is being handled (the one under way, if any, finished)."""
        with self._busy:
            pass

    def process_message(self, message: Message, context: Context) -> tuple[Message, Context]:
        if self.app_fn is None:
            raise ValueError("InlineBackend.build() was not called")
        with self._busy:
            message, context = wire_message(message), wire_context(context)  # what a Ray actor / a node receives
            try:
                app = self.app_fn()
                reply = app(message=message, context=context)
            except LoadClientAppError:
                raise
            except Exception as ex:  # as Flower's Ray actor reports it
                raise ClientAppException(str(ex)) from ex
            self.messages += 1
            return wire_message(reply), wire_context(context)  # what goes back to the engine

    def terminate(self) -> None:
        self.app_fn = None


class StopOrWake(threading.Event):
    """The engine's stop event (``f_stop``), which :meth:`wake` also ends the engine's idle wait with.

    Flower's extractor (``vce_api.add_messages_to_queue``) looks in the link state for new messages, then waits
    ``f_stop.wait(0.1)``: a message the ServerApp pushes waited up to 0.1 s to be picked up, at every exchange of
    a round. The grid calls :meth:`wake` after each push, so the extractor looks again at once. ``set()`` stops
    the engine as before; nothing else of the engine waits on this event."""

    def __init__(self) -> None:
        super().__init__()
        self._woken = threading.Event()

    def wake(self) -> None:
        self._woken.set()

    def set(self) -> None:
        super().set()
        self._woken.set()

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            self._woken.wait(timeout)
            self._woken.clear()
        return self.is_set()


class PushedNodes:
    """The node ids Flower's extractor asks the link state about, and the messages it looks among: those pushed to
    each node and not yet handed out, not every node and every stored message.

    Flower's extractor (``vce_api.add_messages_to_queue``, as read in flwr 1.42) loops ``for node_id in
    nodes_mapping.keys(): state.get_message_ins(node_id=node_id, limit=1)``, and the in-memory link state's
    ``get_message_ins`` scans the whole message store: every pass cost (nodes x stored messages), and a round
    took a pass per push (816,500 look-ups a round at 1,000 clients). ``run_api`` hands its ``nodes_mapping``
    argument to the extractor only (the worker finds contexts by the message's ``dst_node_id``), so the engine
    gets this object there: :meth:`keys` lists each node that has messages pushed to it not yet handed out, in
    the order the nodes were registered (the order Flower's own passes take them). The extractor's state is
    :class:`PushedMessageIns`, whose ``get_message_ins`` looks only among the node's pushed messages (1,000
    look-ups a round at 1,000 clients instead of ~500,000: ~1.2 s of a ~5 s round). A node with more messages
    than the ``limit`` is listed again on the next pass, which is woken at once. :meth:`pushed` is called after a
    push stored its messages (and before the wake), so none is missed: a message the state refused only costs a
    look-up that finds nothing."""

    def __init__(self, nodes_mapping: dict[int, int], stop: StopOrWake) -> None:
        self._rank = {node_id: i for i, node_id in enumerate(nodes_mapping)}
        self._pending: dict[int, list[str]] = {}
        self._lock = threading.Lock()
        self._stop = stop

    def pushed(self, messages: list[tuple[int, str]]) -> None:
        """``(node id, message id)`` of each message a push stored (a message without an id was not stored)."""
        with self._lock:
            for node_id, message_id in messages:
                if message_id:
                    self._pending.setdefault(node_id, []).append(message_id)
        self._stop.wake()

    def keys(self) -> list[int]:
        with self._lock:
            return sorted(self._pending, key=lambda n: self._rank.get(n, len(self._rank)))

    def take(self, node_id: int) -> list[str]:
        """The ids of the messages pushed to ``node_id`` and not yet taken, in push order (now taken)."""
        with self._lock:
            return self._pending.pop(node_id, [])

    def put_back(self, node_id: int, message_ids: list[str]) -> None:
        """Ids :meth:`take` gave that were not looked at (the look-up's limit was reached): first in line again,
        and the extractor woken for its next pass."""
        if message_ids:
            with self._lock:
                self._pending[node_id] = message_ids + self._pending.get(node_id, [])
            self._stop.wake()


class PushedMessageIns:
    """The engine's link state (``state``) as its extractor sees it: ``get_message_ins(node_id, limit)`` is the
    state's own answer, looked up among the messages :class:`PushedNodes` holds for the node (Flower's checks,
    order and delivered mark: :func:`flowergraph._flower.take_message_ins`); everything else is the state's."""

    def __init__(self, state: Any, pushed: PushedNodes) -> None:
        self._state = state
        self._pushed = pushed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    def get_message_ins(self, node_id: int, limit: int | None, *, run_id: int | None = None) -> list[Message]:
        if run_id is not None:  # not what the extractor asks: the state's own scan
            return self._state.get_message_ins(node_id=node_id, limit=limit, run_id=run_id)
        taken, rest = _flower.take_message_ins(self._state, node_id, self._pushed.take(node_id), limit)
        self._pushed.put_back(node_id, rest)
        return taken


class _PushedStateFactory:
    """The state factory ``run_api`` gets: its ``state()`` (the extractor's and injector's) is the run's state seen
    through :class:`PushedMessageIns`."""

    def __init__(self, state: Any, pushed: PushedNodes) -> None:
        self._state = PushedMessageIns(state, pushed)

    def state(self) -> Any:
        return self._state


def fused_run_config(app_dir: str | Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """The run config Flower gives a run of the app in ``app_dir``: its pyproject defaults with ``overrides``
    (Flower refuses a key the pyproject lacks, as ``flwr run`` does)."""
    from flwr.common.config import get_fused_config_from_dir

    return dict(get_fused_config_from_dir(Path(app_dir), dict(overrides)))


def run_inline(
    server_app: ServerApp,
    client_app: ClientApp,
    *,
    num_supernodes: int,
    app_dir: str | Path,
    overrides: dict[str, Any] | None = None,
    backend: InlineBackend | None = None,
) -> Context:
    """Run ``server_app`` against ``num_supernodes`` simulated nodes running ``client_app``, on Flower's
    InMemoryGrid, link state and Simulation Engine (``run_api``) with :class:`InlineBackend`; returns the
    ServerApp's context. Raises what the ServerApp raised (the run failed), or RuntimeError when the engine
    crashed. ``app_dir``: a Flower app folder whose pyproject gives the run config's defaults."""
    from flwr.common.constant import RUN_ID_NUM_BYTES, SUPERLINK_NODE_ID, TASK_ID_NUM_BYTES
    from flwr.proto.task_pb2 import Task  # pylint: disable=no-name-in-module

    engine = _flower.simulation_engine()
    VceMetrics, run_api, LinkStateFactory = engine["VceMetrics"], engine["run_api"], engine["LinkStateFactory"]
    RunRecord, generate_rand_int_from_bytes = engine["RunRecord"], engine["generate_rand_int_from_bytes"]
    from flwr.simulation.run_simulation import run_serverapp_th
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid import InMemoryGrid

    backend = backend or InlineBackend()
    run_config = fused_run_config(app_dir, overrides or {})
    run_id = generate_rand_int_from_bytes(RUN_ID_NUM_BYTES)
    run = Run.create_empty(run_id=run_id)
    run.primary_task_id = generate_rand_int_from_bytes(TASK_ID_NUM_BYTES)
    run.federation_id = NOOP_FEDERATION_ID
    run.override_config = dict(overrides or {})
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, SUPERLINK_NODE_ID

    state_factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
    state = state_factory.state()
    state.run_ids[run_id] = RunRecord(run=run)  # as _main_loop pre-registers the run and its primary task
    state.task_store[run.primary_task_id] = Task(task_id=run.primary_task_id, run_id=run_id)
    # Flower's own node registration (private: flowergraph._flower); each node's context: node config
    # partition-id / num-partitions, run config fused from app_dir + overrides
    nodes_mapping, node_info_stores = _flower.register_simulated_nodes(num_supernodes, state_factory, run, str(app_dir))

    f_stop = StopOrWake()
    pushed = PushedNodes(nodes_mapping, f_stop)

    class WakingGrid(InMemoryGrid):  # Flower's grid; a push wakes the extractor for the nodes pushed to
        def push_messages(self, messages):
            messages = list(messages)
            try:
                return super().push_messages(messages)
            finally:  # the messages stored before a refused one still reach their nodes
                pushed.pushed([(m.metadata.dst_node_id, m.metadata.message_id) for m in messages])

    grid = WakingGrid(state_factory=state_factory)
    grid.set_run(run)
    server_context = Context(run_id=run_id, node_id=0, node_config={}, state=RecordDict(), run_config=run_config)
    errors: Queue[BaseException] = Queue()
    contexts: Queue[Context] = Queue()
    server_thread = run_serverapp_th(
        server_app_attr=None,
        server_app=server_app,
        server_app_context=server_context,
        grid=grid,
        app_dir=str(app_dir),
        f_stop=f_stop,
        exception_queue=errors,
        enable_tf_gpu_growth=False,
        ctx_queue=contexts,
    )
    engine_errors: list[BaseException] = []

    def engine() -> None:
        try:
            run_api(
                lambda: client_app,
                lambda: backend,
                pushed,  # type: ignore[arg-type]  # the extractor's node list (PushedNodes); nothing else reads it
                _PushedStateFactory(state, pushed),  # type: ignore[arg-type]  # the extractor's look-ups (above)
                node_info_stores,
                f_stop,
                VceMetrics(),
            )
        except BaseException as exc:  # noqa: BLE001 (the engine crashed; the ServerApp's error, if any, comes first)
            engine_errors.append(exc)
            f_stop.set()

    # Flower's engine threads wait on their queues with a 1 s timeout before they look at f_stop again, so
    # run_api returns up to 1 s after the ServerApp ended. Nothing is left for them then (every reply the ServerApp
    # waited for is in the link state): run_inline returns once the ServerApp has ended and the ClientApp is not
    # handling a message; the engine's threads end on their own within that second.
    engine_thread = threading.Thread(target=engine, name="flowergraph-inline-engine", daemon=True)
    engine_thread.start()
    try:
        server_thread.join()
    finally:
        f_stop.set()
        backend.wait_idle()
    engine_error = engine_errors[0] if engine_errors else None
    try:
        raise errors.get_nowait()
    except Empty:
        pass
    if engine_error is not None:
        raise engine_error
    try:
        return contexts.get_nowait()
    except Empty:
        return server_context


def load_components(app_dir: str | Path) -> tuple[ServerApp, ClientApp]:
    """The ServerApp and ClientApp the app folder's pyproject names (``[tool.flwr.app.components]``), loaded
    with Flower's own loader, as ``flwr-simulation`` loads them."""
    from flwr.common.config import get_project_config
    from flwr.serverapp.server_app import LoadServerAppError
    from flwr.supercore.object_ref import load_app

    components = get_project_config(app_dir)["tool"]["flwr"]["app"]["components"]
    server_app = load_app(components["serverapp"], LoadServerAppError, app_dir)
    client_app = load_app(components["clientapp"], LoadClientAppError, app_dir)
    return server_app, client_app


def main(argv: list[str] | None = None) -> int:
    """``python -m flowergraph.app.inline --app-dir DIR --num-supernodes N [--run-config FILE.toml]``: run the
    Flower app in DIR (flowergraph's ServerApp and ClientApp for the launcher, or any app whose pyproject names
    its components) on the inline engine: the simulation launcher's child process. Exit status 0 when the
    ServerApp finished, 1 when the run failed. Flower's log goes to stdout."""
    parser = argparse.ArgumentParser(prog="python -m flowergraph.app.inline")
    parser.add_argument("--app-dir", required=True)
    parser.add_argument("--num-supernodes", type=int, required=True)
    parser.add_argument("--run-config", default=None, help="a TOML file, as `flwr run --run-config FILE` reads it")
    args = parser.parse_args(argv)
    from logging import ERROR, INFO

    from flwr.common.config import parse_config_args
    from flwr.common.logger import log

    log(INFO, "flowergraph: inline simulation engine, %d node(s), one process", args.num_supernodes)
    try:
        overrides = parse_config_args([args.run_config]) if args.run_config else {}
        server_app, client_app = load_components(args.app_dir)
        run_inline(
            server_app, client_app, num_supernodes=args.num_supernodes, app_dir=args.app_dir, overrides=overrides
        )
    except Exception as exc:  # noqa: BLE001 (the ServerApp logged its own reason)
        log(ERROR, "flowergraph: the inline run failed: %s: %s", type(exc).__name__, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
