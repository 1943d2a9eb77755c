"""Every use flowergraph makes of Flower's private names and internal behaviour, in one place.

Flower's public API (``flwr.app``, ``flwr.serverapp``, ``flwr.clientapp``, the CLI) is enough to run every method;
these reach further, each to make something faster or to reuse Flower's own machinery, and each falls back to
Flower's public behaviour where it can. They are what a Flower upgrade breaks first (the reason the dependency
stops at the last release checked): :data:`RELIANCES` lists them with what each relies on, what flowergraph does
with it and what happens without it; ``tests/test_flower_private.py`` probes each in the installed Flower and fails
naming the one a release removed, and fails when any other module of the package names a private Flower name.
docs/architecture.md ("Private Flower names") has the same table.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Reliance:
    """One private Flower name or internal behaviour flowergraph relies on."""

    name: str  # what, in Flower
    users: str  # flowergraph's modules that use it (through this module)
    does: str  # what flowergraph does with it
    fallback: str  # what happens where it is gone
    probe: Callable[[], str | None]  # None where the installed Flower has it as relied on, else what is missing


def _has(module: str, *names: str) -> str | None:
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        return f"no module {module} ({exc})"
    missing = [n for n in names if not hasattr(mod, n)]
    return f"{module} lacks {', '.join(missing)}" if missing else None


# ------------------------------------------------------------------------------------- the task's identity
def task_identity() -> tuple[int | None, int | None, int | None]:
    """The (task, run, node) ids Flower set for this process's message (``TaskIdentity``'s private fields: its
    public properties raise while one is unset, and a process that serves no Flower task has none)."""
    from flwr.supercore.task_identity import TaskIdentity

    return (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)


def _probe_task_identity() -> str | None:
    from flwr.supercore.task_identity import TaskIdentity

    missing = [n for n in ("_task_id", "_run_id", "_node_id") if n not in vars(TaskIdentity)]
    return f"TaskIdentity lacks {', '.join(missing)}" if missing else None


# ------------------------------------------------------------------------------ the simulation engine's nodes
def register_simulated_nodes(num_supernodes: int, state_factory: Any, run: Any, app_dir: str) -> tuple[dict, dict]:
    """Flower's own registration of ``num_supernodes`` simulated nodes in its engine (``vce_api._register_nodes``)
    and their contexts (``_register_node_info_stores``: node config ``partition-id`` / ``num-partitions``, the run
    config fused from ``app_dir``): ``(nodes_mapping, node_info_stores)``, as Flower's ``run_simulation`` builds
    them."""
    from flwr.server.superlink.fleet.vce import vce_api

    nodes_mapping = vce_api._register_nodes(num_nodes=num_supernodes, state_factory=state_factory)
    stores = vce_api._register_node_info_stores(nodes_mapping=nodes_mapping, run=run, app_dir=app_dir)
    return nodes_mapping, stores


def _probe_register() -> str | None:
    return _has("flwr.server.superlink.fleet.vce.vce_api", "_register_nodes", "_register_node_info_stores")


def _probe_extractor() -> str | None:
    from flwr.server.superlink.fleet.vce import vce_api

    problem = _has("flwr.server.superlink.fleet.vce.vce_api", "run_api", "add_messages_to_queue")
    if problem:
        return problem
    source = inspect.getsource(vce_api.add_messages_to_queue)
    if "nodes_mapping.keys()" not in source or "get_message_ins" not in source:
        return "vce_api.add_messages_to_queue no longer asks get_message_ins for each of nodes_mapping.keys()"
    return None


def take_message_ins(state: Any, node_id: int, message_ids: list[str], limit: int | None) -> tuple[list, list]:
    """What the in-memory link state's ``get_message_ins(node_id, limit)`` returns, looked up among
    ``message_ids`` (in order) instead of the whole message store: under the state's lock, each is checked by the
    state's own ``_check_stored_messages`` (expired, or a node left the federation: deleted), kept if stored, for
    ``node_id`` and not yet delivered, and those taken are marked delivered, as Flower's method does. Returns
    (messages taken, ids not looked at because ``limit`` was reached)."""
    from flwr.supercore.date import now

    taken: list = []
    rest: list[str] = []
    with state.lock:
        for i, msg_id in enumerate(message_ids):
            if limit and len(taken) == limit:
                rest = message_ids[i:]
                break
            state._check_stored_messages({msg_id})
            msg = state.message_ins_store.get(msg_id)
            if msg is not None and msg.metadata.dst_node_id == node_id and msg.metadata.delivered_at == "":
                taken.append(msg)
    delivered_at = now().isoformat()
    for msg in taken:
        msg.metadata.delivered_at = delivered_at
    return taken, rest


def _probe_message_ins() -> str | None:
    from flwr.server.superlink.linkstate.in_memory_linkstate import InMemoryLinkState

    source = inspect.getsource(InMemoryLinkState.get_message_ins)
    needed = ("self.lock", "self.message_ins_store", "self._check_stored_messages", 'delivered_at == ""')
    missing = [n for n in needed if n not in source]
    return f"InMemoryLinkState.get_message_ins no longer uses {', '.join(missing)}" if missing else None


# ---------------------------------------------------------------------------------- the SuperNode's loop
def supernode_loop() -> Any:
    """The module of Flower's SuperNode loop (``flwr.supernode.start_client_internal``)."""
    from flwr.supernode import start_client_internal

    return start_client_internal


def supernode_pull(module: Any) -> Callable[..., Any] | None:
    """The loop's private pull of the next message (``_pull_and_store_message``), or None where it is gone."""
    return getattr(module, "_pull_and_store_message", None)


def set_supernode_pull(module: Any, pull: Callable[..., Any], clock: Any) -> None:
    """Replace the loop's pull (``_pull_and_store_message``) and the ``time`` module it sleeps with."""
    module._pull_and_store_message = pull
    module.time = clock


def _probe_supernode_loop() -> str | None:
    import time

    problem = _has("flwr.supernode.start_client_internal", "_pull_and_store_message", "time")
    if problem is None and supernode_loop().time is not time:
        return "flwr.supernode.start_client_internal.time is not the time module"
    return problem


def heartbeat_modules() -> tuple[Any, ...]:
    """The modules whose ``HEARTBEAT_DEFAULT_INTERVAL`` the SuperNode announces (its connection) and beats at."""
    from flwr.supercore import heartbeat
    from flwr.supernode import fleet_http_connection

    return (fleet_http_connection, heartbeat)


def set_heartbeat(modules: tuple[Any, ...], interval: float) -> None:
    for module in modules:
        module.HEARTBEAT_DEFAULT_INTERVAL = interval


def _probe_heartbeat() -> str | None:
    lacking = [m.__name__ for m in heartbeat_modules() if not hasattr(m, "HEARTBEAT_DEFAULT_INTERVAL")]
    return f"{', '.join(lacking)} lack HEARTBEAT_DEFAULT_INTERVAL" if lacking else None


# ------------------------------------------------------------------------------------ message-object pulls
PULL_KEYS = ("initial_backoff", "backoff_cap", "max_tries_per_object")


def object_pull_functions() -> list[tuple[Callable[..., Any], dict[str, Any]]] | None:
    """Flower's two pulls of a message's objects (``flwr.supercore.inflatable.inflatable_utils.pull_objects`` and
    ``pull_and_inflate_object_from_tree``) with their keyword defaults, or None where they lack the retry keywords
    ``initial_backoff``, ``backoff_cap``, ``max_tries_per_object``."""
    try:
        from flwr.supercore.inflatable import inflatable_utils
    except ImportError:
        return None
    out = []
    for name in ("pull_objects", "pull_and_inflate_object_from_tree"):
        fn = getattr(inflatable_utils, name, None)
        kw = getattr(fn, "__kwdefaults__", None)
        if not isinstance(kw, dict) or not all(isinstance(kw.get(k), (int, float)) for k in PULL_KEYS):
            return None
        out.append((fn, kw))
    return out


def set_object_pull_defaults(fn: Callable[..., Any], **defaults: float) -> None:
    """Set retry keyword defaults of one of :func:`object_pull_functions` (for every later call in this process)."""
    fn.__kwdefaults__.update(defaults)  # type: ignore[union-attr]


def _probe_object_pulls() -> str | None:
    return (
        None
        if object_pull_functions() is not None
        else "flwr.supercore.inflatable.inflatable_utils.pull_objects / pull_and_inflate_object_from_tree lack "
        "the keyword defaults initial_backoff, backoff_cap, max_tries_per_object"
    )


# ------------------------------------------------------------------------------------- a refused object push
def object_push_errors() -> tuple[type[BaseException], ...]:
    """Flower's ``ObjectPushError`` (``flwr.supercore.inflatable.inflatable_utils``), which a grid's
    ``push_messages`` raises when the SuperLink refused one of the messages' objects after it had stored the
    messages; () where this Flower has none."""
    try:
        from flwr.supercore.inflatable.inflatable_utils import ObjectPushError
    except ImportError:
        return ()
    return (ObjectPushError,)


def _probe_object_push() -> str | None:
    return _has("flwr.supercore.inflatable.inflatable_utils", "ObjectPushError")


# ------------------------------------------------------------------------------------ the SuperLink's SQLite
def sqlite_pragmas() -> tuple | None:
    """The pragmas Flower's SQLite connections open with (``flwr.supercore.sql_mixin.SQLITE_PRAGMAS``)."""
    from flwr.supercore import sql_mixin

    return getattr(sql_mixin, "SQLITE_PRAGMAS", None)


def set_sqlite_pragmas(pragmas: tuple) -> None:
    from flwr.supercore import sql_mixin

    sql_mixin.SQLITE_PRAGMAS = pragmas


def _probe_sqlite() -> str | None:
    pragmas = sqlite_pragmas()
    if not pragmas or "busy_timeout" not in dict(pragmas):
        return "flwr.supercore.sql_mixin.SQLITE_PRAGMAS has no busy_timeout"
    return None


# ---------------------------------------------------------------------------------- the SuperNode's CLI folder
def supernode_cli_folder() -> Path:
    """The folder of Flower's ``flwr.supernode.cli`` package (its ``flwr_clientapp.py``), found without importing
    the package."""
    import flwr.supernode

    return Path(flwr.supernode.__file__).resolve().parent / "cli"


def _probe_cli() -> str | None:
    folder = supernode_cli_folder()
    missing = [n for n in ("__init__.py", "flwr_clientapp.py") if not (folder / n).is_file()]
    return f"{folder} lacks {', '.join(missing)}" if missing else None


# ------------------------------------------------------------------- Flower's legacy-stack and engine modules
# Not private names, but modules of Flower's server package (``flwr.server.*``, its legacy stack and simulation
# engine) that flowergraph's core reaches only through here: the core names no legacy Flower module
# (tests/test_legacy_confined.py), and a Flower release that moves these breaks this module first.
def aggregate_rule(name: str) -> Callable[..., Any]:
    """Flower's robust aggregation function called ``name`` (``median``, ``trimmed-mean``, ``krum``), from its
    legacy ``flwr.server.strategy.aggregate`` module: the Message API offers the rules only inside its strategy
    classes (``FedMedian``, ``FedTrimmedAvg``, ``Krum``), not as functions. Each takes ``[(arrays,
    num_examples), ...]`` (and the rule's own arguments) and returns the aggregated arrays."""
    from flwr.server.strategy import aggregate

    return {
        "median": aggregate.aggregate_median,
        "trimmed-mean": aggregate.aggregate_trimmed_avg,
        "krum": aggregate.aggregate_krum,
    }[name]


def simulation_backend() -> tuple[type, Any]:
    """``(Backend, BackendConfig)`` of Flower's Simulation Engine (``flwr.server.superlink.fleet.vce.backend``):
    the base class of flowergraph's inline backend."""
    from flwr.server.superlink.fleet.vce.backend import Backend, BackendConfig

    return Backend, BackendConfig


def simulation_engine() -> dict[str, Any]:
    """The Simulation Engine's pieces the inline engine runs (``run_api``, ``VceMetrics``, ``LinkStateFactory``,
    ``RunRecord``, ``generate_rand_int_from_bytes``), by name."""
    from flwr.server.superlink.fleet.vce.metrics import VceMetrics
    from flwr.server.superlink.fleet.vce.vce_api import run_api
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.server.superlink.linkstate.utils import generate_rand_int_from_bytes

    return {
        "VceMetrics": VceMetrics,
        "run_api": run_api,
        "LinkStateFactory": LinkStateFactory,
        "RunRecord": RunRecord,
        "generate_rand_int_from_bytes": generate_rand_int_from_bytes,
    }


# --------------------------------------------------------------------------------------------- the table
RELIANCES: tuple[Reliance, ...] = (
    Reliance(
        "flwr.supercore.task_identity.TaskIdentity._task_id / _run_id / _node_id",
        "app/worker.py",
        "reads the message's identity, possibly unset, to hand it to the node's warm worker",
        "a ClientApp that cannot read it runs the message in its own process (FLOWERGRAPH_NODE_WORKER=off)",
        _probe_task_identity,
    ),
    Reliance(
        "flwr.server.superlink.fleet.vce.vce_api._register_nodes / _register_node_info_stores",
        "app/inline.py",
        "registers the simulated nodes of the inline engine as Flower's run_simulation does",
        "simulation-engine=inline fails to start; simulation-engine=ray (Flower's own) is unaffected",
        _probe_register,
    ),
    Reliance(
        "vce_api.run_api hands nodes_mapping to the extractor only, which calls get_message_ins for each key",
        "app/inline.py",
        "passes the nodes pushed to (PushedNodes) instead of every node, so a push costs one look-up per message",
        "with another extractor the inline engine would miss messages: the probe fails first",
        _probe_extractor,
    ),
    Reliance(
        "InMemoryLinkState.get_message_ins: under self.lock, _check_stored_messages then message_ins_store, "
        "undelivered messages for the node, marked delivered",
        "app/inline.py",
        "answers the extractor's look-up for a node among the messages pushed to it, not the whole store",
        "simulation-engine=inline fails to start (the probe fails first); simulation-engine=ray is unaffected",
        _probe_message_ins,
    ),
    Reliance(
        "flwr.supernode.start_client_internal._pull_and_store_message and its time module",
        "deployment/supernode.py",
        "paces the SuperNode's polls (the next soon after a message, Flower's 3 s when idle)",
        "the SuperNode polls at Flower's own pace (a warning says so)",
        _probe_supernode_loop,
    ),
    Reliance(
        "HEARTBEAT_DEFAULT_INTERVAL of flwr.supernode.fleet_http_connection and flwr.supercore.heartbeat",
        "deployment/supernode.py",
        "announces and keeps a 10 s heartbeat (Flower's 30 s): a stopped SuperNode is noticed sooner",
        "the SuperNode keeps Flower's heartbeat (a warning says so)",
        _probe_heartbeat,
    ),
    Reliance(
        "keyword defaults of flwr.supercore.inflatable.inflatable_utils.pull_objects / "
        "pull_and_inflate_object_from_tree",
        "app/polling.py",
        "retries a pull of a message's not yet arrived arrays after 50 ms doubling to 0.5 s (Flower: 1 s to 10 s), "
        "with as many more tries, in the SuperNode, its ClientApp processes and the ServerApp's grid",
        "pulls wait at Flower's pace (a warning says so)",
        _probe_object_pulls,
    ),
    Reliance(
        "flwr.supercore.inflatable.inflatable_utils.ObjectPushError, raised by a grid's push_messages after the "
        "SuperLink stored the messages",
        "app/polling.py",
        "a push whose messages were stored but one of whose shared objects the SuperLink refused ('not "
        "pre-registered': seen when several messages carry the same arrays) waits for their replies",
        "such a push fails the clients it was sent to (the failure policy counts them)",
        _probe_object_push,
    ),
    Reliance(
        "flwr.supercore.sql_mixin.SQLITE_PRAGMAS (busy_timeout)",
        "deployment/superlink.py",
        "raises the SuperLink's SQLite busy timeout from 5 s to 120 s (large uploads on loaded machines)",
        "the SuperLink keeps Flower's 5 s (a warning says so)",
        _probe_sqlite,
    ),
    Reliance(
        "the files of flwr/supernode/cli (flwr_clientapp.py beside __init__.py)",
        "app/clientapp_entry.py",
        "imports Flower's flwr-clientapp command without the SuperNode's command line (faster message processes)",
        "the usual import of flwr.supernode.cli, package __init__ included",
        _probe_cli,
    ),
)


def problems() -> list[str]:
    """One line per reliance the installed Flower no longer satisfies (empty: all hold)."""
    import flwr

    out = []
    for r in RELIANCES:
        try:
            missing = r.probe()
        except Exception as exc:  # noqa: BLE001 (a probe that breaks is a missing reliance too)
            missing = f"{type(exc).__name__}: {exc}"
        if missing:
            out.append(f"Flower {flwr.__version__}: {r.name} ({r.users}: {r.does}): {missing}; {r.fallback}")
    return out
