"""The registry of tasks and methods (Flower-free at import time), and :class:`RunSettings`, a run's validated
values with the method and task they name.

Import order (``tests/test_layout.py`` checks it): this module imports only the settings' schema
(:mod:`flowergraph.settings.options`, :mod:`~flowergraph.settings.keys`, :mod:`~flowergraph.settings.choices`;
inside :class:`StrategyArgs`'s builders also the strategies' policy and aggregation, which import only the
schema's choices); parsing, the checks across keys, presets and the reference (the rest of
:mod:`flowergraph.settings`) sit above it.

A **task** (:class:`Task`) is a kind of graph learning problem with its data: ``node`` (node classification on
one graph cut across clients) and ``graph`` (graph classification, each client owning graphs). A task owns its
run-config keys (``node.*``, ``graph.*``), says which datasets are its own, checks them, builds a client's data
(:meth:`ClientArgs.data`), runs the launcher's fast data check (``preflight``), may evaluate a global model on the
server, and builds the generic client the baseline methods train (``baseline_client``: FedAvg, FedProx, FedPer and
GCFL run on every task that has one).

A **method** (:class:`Method`) is a strategy module, a client module and one registration that says:

* its ``name`` (the run-config value ``method=...``), a one-line ``summary`` and the ``tasks`` it supports;
* its own run-config keys (``options``, each named ``<name>.<key>``) and a ``check`` of combinations across keys;
* how its strategy is built from validated settings (``build_strategy(StrategyArgs)``) and how its client is
  built from the settings, the node's identity, its data and its persistent state (``build_client(ClientArgs)``);
* what its clients send and what its server holds (``update_kind``: ``weights``, ``gradients`` or ``partial``;
  ``model_scope``: ``global``, ``per-group`` or ``per-client``; ``summable_updates``): the settings refuse secure
  aggregation, central DP, server-side evaluation and robust rules where they cannot apply;
* what it needs besides: a CKKS key file on the data owners (``needs_key_file``), clients whose
  ``context.state`` must survive a checkpoint (``stateful_clients``: a bool, or a function of the settings),
  one client holding the whole graph (``whole_graph``: the centralized reference), and its own server-side
  evaluation or data check where the task's do not fit (``server_evaluate``, ``preflight``).

The ServerApp, the ClientApp, the launchers and the settings look tasks and methods up here and never branch on
a name. Built-in registrations: :mod:`flowergraph.methods.node` (the node task, ``centralized``),
:mod:`flowergraph.methods.graph` (the graph task), :mod:`flowergraph.methods.baselines` (``fedavg``,
``fedprox``, ``fedper``, ``gcfl``), :mod:`flowergraph.methods.fedgcn`, :mod:`flowergraph.methods.fedstar`,
:mod:`flowergraph.methods.asfgnn` (``asfgnn``, ``asfgnn-cm``). Other
packages add tasks and methods without touching this package:

* an installed package declares an entry point in the group ``flowergraph.methods`` whose object is a
  :class:`Method` or a :class:`Task` (or a module that calls :func:`register` / :func:`register_task`)::

      [project.entry-points."flowergraph.methods"]
      mymethod = "mypackage.method:METHOD"

* or, for a quick experiment, the environment variable ``FLOWERGRAPH_PLUGINS`` names modules to import
  (comma-separated) in every process of the run; a module's ``TASK``/``TASKS``/``METHOD``/``METHODS`` are
  registered (or it registers its own when imported).

Registration modules must stay cheap to import: import Flower, torch and the strategy/client modules inside
the builder functions, not at module level (the settings import every registration).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Union

from ..errors import ConfigError
from ..settings.choices import MODEL_SCOPES, UPDATE_KINDS
from ..settings.keys import COMMON_OPTIONS
from ..settings.options import Option

if TYPE_CHECKING:  # pragma: no cover
    Strategy = Any  # a core strategy (flowergraph.strategies.FederatedStrategy; not imported: the registry is a leaf)
    from ..strategies.policy import FederationPolicy


class Client(Protocol):
    """What a method's client answers, as plain values (:class:`flowergraph.clients.base.Client` is the base every
    flowergraph client extends; declared here structurally so the registry imports no client)."""

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]: ...

    def get_parameters(self, config: dict[str, Any]) -> list[Any]: ...

    def fit(self, parameters: list[Any], config: dict[str, Any]) -> tuple[list[Any], int, dict[str, Any]]: ...

    def evaluate(self, parameters: list[Any], config: dict[str, Any]) -> tuple[float, int, dict[str, Any]]: ...


TASKS = ("node", "graph", "link")  # the built-in tasks (plugins may register more: tasks())
ENTRY_POINT_GROUP = "flowergraph.methods"
PLUGINS_ENV = "FLOWERGRAPH_PLUGINS"
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
# The framework's own registrations come first, in this order (the baselines every task has, then the
# tasks); every other folder of this package is one in-tree method (flowergraph/methods/<name>/: its registration
# in __init__.py) and is found by _builtin_modules(), in alphabetical order: adding a method in-tree is adding its
# folder (docs/extending.md's checklist).
_CORE_MODULES = ("baselines", "gcfl", "node", "graph", "link")
_NOT_REGISTRATIONS = ("registry",)


def _builtin_modules() -> tuple[str, ...]:
    """The modules of ``flowergraph.methods`` that register tasks and methods: the core ones, then the rest."""
    import pkgutil

    folder = [str(Path(__file__).resolve().parent)]
    found = sorted(
        m.name
        for m in pkgutil.iter_modules(folder)
        if not m.name.startswith("_") and m.name not in _CORE_MODULES + _NOT_REGISTRATIONS
    )
    return tuple(f"{__package__}.{name}" for name in (*_CORE_MODULES, *found))


_BUILTIN_MODULES = _builtin_modules()


@dataclass
class StrategyArgs:
    """What a method's ``build_strategy`` receives from the ServerApp."""

    settings: "RunSettings"
    recorder: Any = None  # flowergraph.storage.results.RunRecorder, or None
    initial_arrays: list[Any] | None = None  # a checkpoint's global model when resuming
    evaluate_fn: Callable[..., Any] | None = None  # server-side evaluation (server-eval=true)

    def policy(self) -> "FederationPolicy":
        """The :class:`~flowergraph.strategies.FederationPolicy` the run configuration sets."""
        from ..strategies.policy import FederationPolicy

        s = self.settings
        whole = s.method_info.whole_graph
        return FederationPolicy(
            num_clients=s.effective_num_clients,
            num_rounds=s.rounds,
            fused_eval=s.fused_eval,
            connect_timeout=s.connect_timeout,
            init_timeout=s.init_timeout,
            round_timeout=s.round_timeout,
            eval_every=s.eval_every,
            seed=s.seed,
            fraction_fit=1.0 if whole else s.fraction_fit,
            fraction_evaluate=1.0 if whole else s.fraction_evaluate,
            min_clients=None if whole else (s.min_clients or None),
            clients_per_round=1 if whole else None,
            stateful_clients=s.method_info.is_stateful(s),
            secure_agg=s.secure_agg,
            min_secure_clients=s.min_secure_clients,
            max_update_norm=s.max_update_norm,
            secagg_clipping_range=s.secagg_clipping_range if s.secure_agg == "secagg+" else None,
        )

    def common(self) -> dict[str, Any]:
        """Keyword arguments of :class:`flowergraph.strategies.FederatedStrategy` that every method takes from
        the run configuration: ``policy``, ``aggregator``, ``recorder``, ``evaluate_fn``, ``initial_parameters``, and
        ``metrics`` where the task aggregates its own (a method passes them on and adds its own)."""
        s = self.settings
        aggregator = None  # the strategy's own weighted mean
        if s.aggregator != "mean":
            from ..strategies.aggregation import make_aggregator

            aggregator = make_aggregator(
                s.aggregator,
                weighting=s.weighting,
                trim=s.aggregator_trim,
                malicious=s.aggregator_malicious,
                keep=s.aggregator_keep,
            )
        common = dict(
            policy=self.policy(),
            evaluate_fn=self.evaluate_fn,
            recorder=self.recorder,
            initial_parameters=self.initial_arrays,
            aggregator=aggregator,
        )
        task = s.task_info
        if task.metrics is not None:  # the task's own metrics (link: AUC, Hits@K), also summary.json's finals
            metrics = task.metrics(s)
            common["metrics"] = metrics
            if self.recorder is not None:
                server = [f"server_{name}" for name in metrics.server] if self.evaluate_fn is not None else []
                self.recorder.report_final([*metrics.names, *server])
        return common


@dataclass
class ClientArgs:
    """What a method's ``build_client`` receives from the ClientApp for one node and one message."""

    settings: "RunSettings"
    partition_id: int
    num_partitions: int
    context: Any  # flwr.app.Context of the node (run config, node config, persistent state)
    state: Any  # flowergraph.clients.ClientState over context.state
    partition_file: str = ""  # node config: this data owner's own partition file
    cache: Any = None  # flowergraph.clients.cache.ProcessCache for this run and node (never checkpointed)

    @property
    def task(self) -> "Task":
        """The run's task (the one its dataset belongs to)."""
        task: Task = self.settings.task_info
        return task

    def data(self) -> Any:
        """This node's data for the run's task (node task: its part of the federated graph, from its own
        partition file or cut out of the global graph; graph task: its own graphs). Memoised per process."""
        if self.task.build_data is None:
            raise ConfigError(f"task {self.task.name!r} builds no client data")
        return self.task.build_data(self)


def _check_names(kind: str, name: str, options: tuple[Option, ...]) -> None:
    """A registration's name is lowercase letters, digits and '-'; its keys are ``<name>.<key>``."""
    if not _NAME.match(name or ""):
        raise ValueError(f"{kind} name {name!r} must be lowercase letters, digits and '-', starting with a letter")
    for option in options:
        if not option.key.startswith(f"{name}."):
            raise ValueError(
                f"{kind} {name!r}: option {option.key!r} must be named '{name}.<key>' (a {kind}'s keys "
                f"live in its own namespace)"
            )


@dataclass(frozen=True)
class Sharing:
    """What a baseline method's generic client shares (a task's ``baseline_client`` builds it):
    ``baseline`` is the method (``fedavg``, ``fedprox``, ``fedper``, ``gcfl``); ``mu`` FedProx's proximal weight."""

    baseline: str
    mu: float = 0.0


@dataclass(frozen=True)
class Task:
    """A registered task (see the module docstring).

    ``accepts(dataset)``: whether a (normalised) dataset value is this task's; ``datasets()``: the valid values,
    for messages; ``normalize(value)``: the canonical spelling of this task's dataset values (None: as given);
    ``options``: its keys, each ``<name>.<key>``; ``check(settings)``: its checks; ``build_data(ClientArgs)``: a
    node's data; ``preflight(settings)``: the launcher's fast data check (``{"summary": str, "client_sizes":
    [...]}``); ``server_evaluate(settings)``: a server-side evaluation of a global model, if the task has one;
    ``baseline_client(ClientArgs, Sharing)``: the generic client of the baseline methods; ``baseline_stateful``:
    whether those clients keep state (e.g. Adam's moments); ``natural_num_clients(dataset)``: the number of
    clients a dataset implies (None: no opinion); ``description``: what the task does, for messages (``node
    classification``); ``metrics(settings)``: how its clients' evaluation metrics become a round's (a
    :class:`~flowergraph.strategies.evaluation.MetricAggregation`; None: accuracy and loss), whose aggregates
    ``summary.json`` also reports as ``final_<name>``; ``auto``: whether ``task=auto`` (the default) picks it for its
    datasets (False: a task a run asks for by name, ``task=link``, on another task's datasets)."""

    name: str
    summary: str
    description: str
    accepts: Callable[[str], bool]
    datasets: Callable[[], str]
    options: tuple[Option, ...] = ()
    normalize: Callable[[str], str] | None = None
    check: Callable[["RunSettings"], None] | None = None
    build_data: Callable[[ClientArgs], Any] | None = None
    preflight: Callable[["RunSettings"], dict[str, Any]] | None = None
    server_evaluate: Callable[["RunSettings"], Callable[..., Any]] | None = None
    baseline_client: Callable[[ClientArgs, Sharing], "Client"] | None = None
    baseline_stateful: bool = False
    natural_num_clients: Callable[[str], Union[int, None]] | None = None
    metrics: Callable[["RunSettings"], Any] | None = None
    auto: bool = True

    def __post_init__(self) -> None:
        _check_names("task", self.name, self.options)


@dataclass(frozen=True)
class Method:
    """A registered federated method (see the module docstring). ``tasks``: the tasks it supports (``task=``,
    one name, is accepted too)."""

    name: str
    summary: str
    task: str = ""
    build_strategy: Callable[[StrategyArgs], "Strategy"] | None = None
    build_client: Callable[[ClientArgs], "Client"] | None = None
    options: tuple[Option, ...] = ()
    check: Callable[["RunSettings"], None] | None = None
    needs_key_file: Callable[["RunSettings"], bool] | None = None
    stateful_clients: Union[bool, Callable[["RunSettings"], bool]] = False
    summable_updates: bool = True  # its training updates may be securely aggregated (only their sum is needed)
    update_kind: str = "weights"
    model_scope: str = "global"
    whole_graph: bool = False
    server_evaluate: Callable[["RunSettings"], Callable[..., Any]] | None = None
    # The launcher's fast data check (default: the task's): {"summary": str, "client_sizes": [per client: its
    # number of training examples, or an upper bound of it]}; the launcher bounds SecAgg+'s weights by the largest.
    preflight: Callable[["RunSettings"], dict[str, Any]] | None = None
    # The number of rounds its schedule fixes (a function of the settings), or None: a run that leaves ``rounds``
    # unset (or at its default) takes it; its ``check`` refuses any other explicit value, naming this number
    fixed_rounds: Callable[["RunSettings"], int] | None = None
    benchmark_only: bool = False
    paper: str = ""  # the citation: authors, name, venue, DOI and/or arXiv id
    tasks: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_names("method", self.name, self.options)
        tasks = tuple(self.tasks) or ((self.task,) if self.task else ())
        if not tasks:
            raise ValueError(f"method {self.name!r}: give the tasks it supports (tasks=('node',) or task='node')")
        if self.task and self.task not in tasks:
            raise ValueError(f"method {self.name!r}: task={self.task!r} is not among tasks={tasks}")
        for task in tasks:
            if not _NAME.match(task):
                raise ValueError(
                    f"method {self.name!r}: unknown task {task!r}; valid choices: {', '.join(_task_names())}"
                )
        object.__setattr__(self, "tasks", tasks)
        object.__setattr__(self, "task", self.task or tasks[0])
        if self.build_strategy is None or self.build_client is None:
            raise ValueError(f"method {self.name!r}: build_strategy and build_client are required")
        if self.update_kind not in UPDATE_KINDS:
            raise ValueError(
                f"method {self.name!r}: unknown update_kind {self.update_kind!r}; valid choices: "
                f"{', '.join(UPDATE_KINDS)}"
            )
        if self.model_scope not in MODEL_SCOPES:
            raise ValueError(
                f"method {self.name!r}: unknown model_scope {self.model_scope!r}; valid choices: "
                f"{', '.join(MODEL_SCOPES)}"
            )

    def key_file_needed(self, settings: "RunSettings") -> bool:
        return bool(self.needs_key_file and self.needs_key_file(settings))

    def is_stateful(self, settings: "RunSettings") -> bool:
        """Whether its clients keep state that checkpoints must save (for these settings)."""
        stateful = self.stateful_clients
        return bool(stateful(settings) if callable(stateful) else stateful)


class RunSettings:
    """Validated run configuration (:func:`flowergraph.settings.parse_run_config` builds it); attribute names are
    the common keys with ``-`` replaced by ``_`` (``s.num_clients``); a task's or method's keys:
    ``s["node.hidden"]``, ``s["fedgcn.hops"]`` or ``s.of("fedgcn").hops``. It lives beside the registry because
    a run's settings name a registered method and task (:attr:`method_info`, :attr:`task_info`) and the
    registrations' functions take settings."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        key = name.replace("_", "-")
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"RunSettings({self._values!r})"

    def of(self, method: str | None = None) -> SimpleNamespace:
        """The keys of a method or task (default: the run's method) without their prefix, ``-`` as ``_``."""
        prefix = f"{method or self.method}."
        # the keys of each prefix found once per settings object (the values never change; every client message
        # asks several times, ~16 us each over ~190 keys); a new namespace every call, as before
        found = self.__dict__.setdefault("_of", {})
        items = found.get(prefix)
        if items is None:
            items = found[prefix] = {
                k[len(prefix) :].replace("-", "_"): v for k, v in self._values.items() if k.startswith(prefix)
            }
        return SimpleNamespace(**items)

    @property
    def method_info(self) -> Method:
        """The registered :class:`Method` of this run."""
        return get_method(self.method)

    @property
    def task_info(self) -> Task:
        """The registered :class:`Task` of this run: the key ``task``, or with ``task=auto`` (the default) the one
        its dataset belongs to."""
        name = self._values.get("task", "auto")
        return task_of_dataset(self.dataset) if name == "auto" else get_task(name)

    @property
    def task(self) -> str:
        return self.task_info.name

    @property
    def needs_key_file(self) -> bool:
        """Whether the data owners must hold a CKKS key file for this run (the method encrypts, or the training
        rounds are aggregated under CKKS)."""
        return self.method_info.key_file_needed(self) or self.secure_agg == "ckks"

    @property
    def secagg_weight_bound(self) -> float:
        """SecAgg+'s bound on a client's weight (Flower's ``max_weight``): ``secagg-max-weight``, or 1 with
        ``weighting=uniform``, else Flower's default 1000. A client whose weight exceeds it refuses the round
        (Flower would clip its scaled update silently)."""
        if self.secagg_max_weight > 0:
            return float(self.secagg_max_weight)
        return 1.0 if self.weighting == "uniform" else 1000.0

    @property
    def clients_per_round(self) -> int:
        """Clients sampled for training each round."""
        return max(1, int(round(self.fraction_fit * self.effective_num_clients)))

    @property
    def face(self) -> str:
        """Which of Flower's stacks runs the run (``flower-api``): ``"message"`` (the Message API), or
        ``"legacy"`` (flowergraph's legacy adapter: asked for, or ``auto`` with ``secure-agg=secagg+``, which
        Flower 1.42 offers only there)."""
        api = str(getattr(self, "flower_api", "auto"))
        if api == "auto":
            return "legacy" if self.secure_agg == "secagg+" else "message"
        return api

    @property
    def effective_num_clients(self) -> int:
        """Clients the federation has: 1 for a method where one client holds the whole graph (``centralized``)."""
        return 1 if self.method_info.whole_graph else int(self.num_clients)


_REGISTRY: dict[str, Method] = {}
_TASKS: dict[str, Task] = {}
_LOCK = threading.RLock()
_loaded = False
_plugin_errors: dict[str, str] = {}
_ORIGIN: dict[tuple[str, str], str] = {}  # (kind, name) -> the module that registered it


def _caller_module(depth: int) -> str:
    """The module whose code called the registration (``depth`` frames up)."""
    return str(sys._getframe(depth).f_globals.get("__name__", ""))


def _in_order(registry: dict[str, Any], kind: str) -> dict[str, Any]:
    """``registry`` with the built-in registrations first, in the order of ``_BUILTIN_MODULES`` (each module's in
    its registration order), then the rest (plugins) in registration order: the same order whichever module a
    process happened to import first (a test that imports ``flowergraph.methods.flagcns`` before the registry
    loads must not reorder the method list that the docs and the error messages show)."""
    rank = {module: i for i, module in enumerate(_BUILTIN_MODULES)}
    names = sorted(registry, key=lambda name: rank.get(_ORIGIN.get((kind, name), ""), len(rank)))
    return {name: registry[name] for name in names}


def _taken_keys(skip: str) -> set[str]:
    taken = {o.key for o in COMMON_OPTIONS}
    for other in list(_REGISTRY.values()) + list(_TASKS.values()):
        if other.name != skip:
            taken.update(o.key for o in other.options)
    return taken


def _add(registry: dict[str, Any], kind: str, item: Any, replace: bool) -> None:
    """Add a method or task to its registry; its option keys must not collide with any other key."""
    with _LOCK:
        if item.name in registry and not replace and registry[item.name] is not item:
            raise ValueError(f"a {kind} named {item.name!r} is already registered")
        clash = [o.key for o in item.options if o.key in _taken_keys(item.name)]
        if clash:
            raise ValueError(f"{kind} {item.name!r}: option key(s) {', '.join(clash)} already exist")
        registry[item.name] = item


def register(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to the registry (its option keys must not collide with any other key). Returns it."""
    _add(_REGISTRY, "method", method, replace)
    _ORIGIN[("method", method.name)] = _caller_module(2)
    return method


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Add ``task`` to the registry (its option keys must not collide with any other key). Returns it."""
    _add(_TASKS, "task", task, replace)
    _ORIGIN[("task", task.name)] = _caller_module(2)
    return task


def unregister(name: str) -> None:
    """Remove a method or a task (tests)."""
    with _LOCK:
        _REGISTRY.pop(name, None)
        _TASKS.pop(name, None)


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
            sources.append((f"{PLUGINS_ENV} module {module}", _importer(module)))
        for label, load in sources:
            try:
                _register_found(load())
            except Exception as exc:  # noqa: BLE001 (reported when that method is asked for)
                _plugin_errors[label] = f"{type(exc).__name__}: {exc}"
                warnings.warn(
                    f"flowergraph: could not load method plugin ({label}): {exc}", RuntimeWarning, stacklevel=2
                )


def _importer(module: str) -> Callable[[], Any]:
    return lambda: importlib.import_module(module)


def _register_found(obj: Any) -> None:
    """Register what a plugin source gave: a Task or a Method, or a module's ``TASK``/``TASKS``/``METHOD``/
    ``METHODS`` (a module may also have registered its own when imported)."""
    found = [obj]
    if not isinstance(obj, (Task, Method)):
        found = []
        for name in ("TASK", "TASKS", "METHOD", "METHODS"):
            value = getattr(obj, name, None)
            found += list(value) if isinstance(value, (list, tuple)) else [value] if value is not None else []
    for item in sorted(found, key=lambda x: not isinstance(x, Task)):  # tasks before the methods on them
        if isinstance(item, Task):
            register_task(item, replace=True)
        elif isinstance(item, Method):
            register(item, replace=True)


def preflight(settings: "RunSettings") -> dict[str, Any]:
    """The run's data check before Flower starts (the method's, else its task's): fails fast on impossible
    settings and warms the dataset cache; ``summary`` and ``client_sizes`` describe the data. Used by the
    launchers and by ``client-order`` (:func:`flowergraph.app.node_client.client_schedule`)."""
    check: Callable[["RunSettings"], dict[str, Any]] | None = (
        settings.method_info.preflight or settings.task_info.preflight
    )
    if check is None:
        return {"summary": settings.dataset}
    return check(settings)


def sizes_text(info: Mapping[str, Any], listed: int = 20) -> str:
    """The launchers' "; client sizes ..." suffix from :func:`preflight`'s ``info``: every size up to ``listed``
    clients, else their range and mean (a thousand sizes made one line of thousands of characters)."""
    sizes = list(info.get("client_sizes") or [])
    if not sizes:
        return ""
    if len(sizes) <= listed:
        return f"; client sizes {sizes}"
    return f"; client sizes {min(sizes)}-{max(sizes)} (mean {sum(sizes) / len(sizes):.1f} over {len(sizes)} clients)"


def methods(*, include_benchmark: bool = True) -> dict[str, Method]:
    """Every registered method by name (built-in first, then plugins, in registration order)."""
    _load_plugins()
    return {name: m for name, m in _in_order(_REGISTRY, "method").items() if include_benchmark or not m.benchmark_only}


def tasks() -> dict[str, Task]:
    """Every registered task by name."""
    _load_plugins()
    return _in_order(_TASKS, "task")


def _task_names() -> list[str]:
    """The registered tasks' names in the built-in order (as :func:`tasks` lists them), whichever module a process
    imported first; the built-in names before any is registered."""
    return list(_in_order(_TASKS, "task")) or list(TASKS)


def _plugin_hint() -> str:
    if not _plugin_errors:
        return ""
    return "; plugins that failed to load: " + "; ".join(f"{k}: {v}" for k, v in _plugin_errors.items())


def get_method(name: str) -> Method:
    """The method called ``name``; ConfigError naming the valid choices (and plugins that failed to load)."""
    registry = methods()
    if name in registry:
        return registry[name]
    raise ConfigError(
        f"unknown method {name!r}; valid choices: {', '.join(registry)}{suggest(name, registry)}{_plugin_hint()}"
    )


def get_task(name: str) -> Task:
    """The task called ``name``; ConfigError naming the valid choices."""
    registry = tasks()
    if name in registry:
        return registry[name]
    raise ConfigError(
        f"unknown task {name!r}; valid choices: {', '.join(registry)}{suggest(name, registry)}{_plugin_hint()}"
    )


def task_of_dataset(dataset: str) -> Task:
    """The task ``task=auto`` picks for ``dataset`` (normalised): the first whose datasets include it among the
    tasks with ``auto``; ConfigError listing every task's datasets."""
    for task in tasks().values():
        if task.auto and task.accepts(dataset):
            return task
    valid = "; ".join(f"{t.name}: {t.datasets()}" for t in tasks().values())
    raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {valid}")


def suggest(name: str, choices: Iterable[Any]) -> str:
    """``"; did you mean 'x'?"`` for a close match among ``choices`` ('' when there is none)."""
    from ..errors import did_you_mean

    return did_you_mean(name, choices)
