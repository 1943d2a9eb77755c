"""The method registry: one registration per federated method (Flower-free at import time).

A method is a strategy module, a client module and one :class:`Method` registration that says:

* its ``name`` (the run-config value ``method=...``), a one-line ``summary`` and its ``task`` (``node`` or
  ``graph``: which datasets it accepts);
* its own run-config keys (``options``, each named ``<name>.<key>``, with default, type, check and help; the
  README lists them under the method's name) and a ``check`` of combinations across keys;
* how its strategy is built from validated settings (``build_strategy(StrategyArgs)``) and how its client is
  built from the settings, the node's identity and its persistent state (``build_client(ClientArgs)``);
* what it needs besides: a CKKS key file on the data owners (``needs_key_file``), clients whose
  ``context.state`` must survive a checkpoint (``stateful_clients``), training updates that may be aggregated
  securely because only their sum is used (``summable_updates``), one client holding the whole graph
  (``whole_graph``: the centralized reference), a server-side evaluation on the global data
  (``server_evaluate``), and the launcher's fast pre-check of the data (``preflight``).

The ServerApp, the ClientApp, the launchers and the configuration code look a method up here and never
branch on its name. Built-in methods register in :mod:`flowergraph.methods.node` and
:mod:`flowergraph.methods.fedgcn`. Other packages add methods without touching this package:

* an installed package declares an entry point in the group ``flowergraph.methods`` whose object is a
  :class:`Method` (or a module that calls :func:`register` when imported)::

      [project.entry-points."flowergraph.methods"]
      mymethod = "mypackage.method:METHOD"

* or, for a quick experiment, the environment variable ``FLOWERGRAPH_PLUGINS`` names modules to import
  (comma-separated) in every process of the run.

Registration modules must stay cheap to import: import Flower, torch and the strategy/client modules inside
the builder functions, not at module level (the configuration code imports every registration).
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConfigError
from ..settings.options import Option

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings

TASKS = ("node", "graph")
ENTRY_POINT_GROUP = "flowergraph.methods"
PLUGINS_ENV = "FLOWERGRAPH_PLUGINS"
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_BUILTIN_MODULES = ("flowergraph.methods.node", "flowergraph.methods.fedgcn", "flowergraph.methods.fedstar")


@dataclass
class StrategyArgs:
    """What a method's ``build_strategy`` receives from the ServerApp."""

    settings: "RunSettings"
    recorder: Any = None  # flowergraph.storage.results.RunRecorder, or None
    initial_arrays: list | None = None  # a checkpoint's global model when resuming
    evaluate_fn: Callable | None = None  # server-side evaluation (server-eval=true)

    def common(self) -> dict[str, Any]:
        """Keyword arguments of :class:`flowergraph.strategies.FederatedStrategy` that every method takes from
        the run configuration (a method passes them on and adds its own)."""
        s = self.settings
        whole = s.method_info.whole_graph
        aggregator = None  # the strategy's own weighted mean
        if s.aggregator != "mean":
            from ..strategies.aggregation import make_aggregator

            aggregator = make_aggregator(s.aggregator, weighting=s.weighting, trim=s.aggregator_trim,
                                         malicious=s.aggregator_malicious, keep=s.aggregator_keep)
        return dict(num_clients=s.effective_num_clients, num_rounds=s.rounds, evaluate_fn=self.evaluate_fn,
                    recorder=self.recorder, fused_eval=s.fused_eval, connect_timeout=s.init_timeout,
                    init_timeout=s.init_timeout, round_timeout=s.round_timeout, eval_every=s.eval_every,
                    seed=s.seed, initial_parameters=self.initial_arrays,
                    fraction_fit=1.0 if whole else s.fraction_fit,
                    fraction_evaluate=1.0 if whole else s.fraction_evaluate,
                    min_clients=None if whole else (s.min_clients or None),
                    clients_per_round=1 if whole else None,
                    stateful_clients=s.method_info.stateful_clients, aggregator=aggregator,
                    secure_agg=s.secure_agg)


@dataclass
class ClientArgs:
    """What a method's ``build_client`` receives from the ClientApp for one node and one message."""

    settings: "RunSettings"
    partition_id: int
    num_partitions: int
    context: Any  # flwr.app.Context of the node (run config, node config, persistent state)
    state: Any  # flowergraph.clients.ClientState over context.state
    partition_file: str = ""  # node config: this data owner's own partition file

    def node_graph(self):
        """This node's part of the federated graph: from its own partition file when the node has one
        (node config ``partition-file``, or run config ``partition-dir``), else cut out of the global graph
        (see :mod:`flowergraph.data`). Memoised per process."""
        from ..data import node_graph

        return node_graph(self.settings, self.partition_id, self.partition_file or None)


@dataclass(frozen=True)
class Method:
    """A registered federated method (see the module docstring)."""

    name: str
    summary: str
    task: str
    build_strategy: Callable[[StrategyArgs], Any]
    build_client: Callable[[ClientArgs], Any]
    options: tuple[Option, ...] = ()
    check: Callable[["RunSettings"], None] | None = None
    needs_key_file: Callable[["RunSettings"], bool] | None = None
    stateful_clients: bool = False
    summable_updates: bool = True  # its training updates may be securely aggregated (only their sum is needed)
    whole_graph: bool = False
    server_evaluate: Callable[["RunSettings"], Callable] | None = None
    # The launcher's fast data check: {"summary": str, "client_sizes": [per client: its number of training
    # examples, or an upper bound of it]}; the launcher prints both and bounds SecAgg+'s weights by the largest size.
    preflight: Callable[["RunSettings"], dict] | None = None
    benchmark_only: bool = False
    paper: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name or ""):
            raise ValueError(f"method name {self.name!r} must be lowercase letters, digits and '-', starting with "
                             f"a letter")
        if self.task not in TASKS:
            raise ValueError(f"method {self.name!r}: unknown task {self.task!r}; valid choices: {', '.join(TASKS)}")
        for option in self.options:
            if not option.key.startswith(f"{self.name}."):
                raise ValueError(f"method {self.name!r}: option {option.key!r} must be named '{self.name}.<key>' "
                                 f"(a method's keys live in its own namespace)")

    def key_file_needed(self, settings: "RunSettings") -> bool:
        return bool(self.needs_key_file and self.needs_key_file(settings))


_REGISTRY: dict[str, Method] = {}
_LOCK = threading.RLock()
_loaded = False
_plugin_errors: dict[str, str] = {}


def register(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to the registry (its option keys must not collide with any other key). Returns it."""
    from ..settings import COMMON_OPTIONS

    with _LOCK:
        if method.name in _REGISTRY and not replace and _REGISTRY[method.name] is not method:
            raise ValueError(f"a method named {method.name!r} is already registered")
        taken = {o.key for o in COMMON_OPTIONS}
        for other in _REGISTRY.values():
            if other.name != method.name:
                taken.update(o.key for o in other.options)
        clash = [o.key for o in method.options if o.key in taken]
        if clash:
            raise ValueError(f"method {method.name!r}: option key(s) {', '.join(clash)} already exist")
        _REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method (tests)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def _load_plugins() -> None:
    """Import the built-in registrations, entry points and ``FLOWERGRAPH_PLUGINS`` modules, once."""
    global _loaded
    with _LOCK:
        if _loaded:
            return
        _loaded = True
        for module in _BUILTIN_MODULES:
            importlib.import_module(module)
        sources: list[tuple[str, Callable[[], Any]]] = []
        try:
            from importlib.metadata import entry_points

            for ep in entry_points(group=ENTRY_POINT_GROUP):
                sources.append((f"entry point {ep.name} = {ep.value}", ep.load))
        except Exception as exc:  # noqa: BLE001 (a broken environment must not stop the built-in methods)
            _plugin_errors["entry points"] = f"{type(exc).__name__}: {exc}"
        for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
            sources.append((f"{PLUGINS_ENV} module {module}",
                            lambda module=module: importlib.import_module(module)))
        for label, load in sources:
            try:
                obj = load()
                if isinstance(obj, Method):
                    register(obj, replace=True)
            except Exception as exc:  # noqa: BLE001 (reported when that method is asked for)
                _plugin_errors[label] = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"flowergraph: could not load method plugin ({label}): {exc}", RuntimeWarning,
                              stacklevel=2)


def methods(*, include_benchmark: bool = True) -> dict[str, Method]:
    """Every registered method by name (built-in first, then plugins, in registration order)."""
    _load_plugins()
    return {name: m for name, m in _REGISTRY.items() if include_benchmark or not m.benchmark_only}


def get_method(name: str) -> Method:
    """The method called ``name``; ConfigError naming the valid choices (and plugins that failed to load)."""
    registry = methods()
    if name in registry:
        return registry[name]
    hint = ""
    if _plugin_errors:
        hint = "; plugins that failed to load: " + "; ".join(f"{k}: {v}" for k, v in _plugin_errors.items())
    raise ConfigError(f"unknown method {name!r}; valid choices: {', '.join(registry)}{hint}")
