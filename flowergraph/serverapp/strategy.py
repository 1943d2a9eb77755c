"""The base of flowergraph's Strategy classes: :class:`GraphStrategy`, a ``flwr.serverapp.strategy.Strategy``
whose constructor takes typed keyword arguments (the federation's, the task's, the method's), as Flower's
``FedAvg(fraction_train=...)`` does.

Each argument is declared once, as a field of an options dataclass (:class:`~flowergraph.settings.keys.
FederationOptions`, the method's, the task's :class:`~flowergraph.methods.node.NodeTask` /
:class:`~flowergraph.methods.graph.GraphTask`); the run-config keys of flowergraph's launchers derive from the same
fields, so ``FedGCN(hops=1)`` and ``--set fedgcn.hops=1`` are one setting. A subclass names its method
(``method = "fedgcn"``) and inherits its options dataclass; its constructor and its docstring's Parameters section
are made from the fields.

What the server decides travels to the clients in every message (the ConfigRecord ``fg.settings``): a user's
ServerApp alone configures a run, and the run config may hold anything the user's app wants. ``num_rounds`` of
:meth:`GraphStrategy.start` is the run's only round count.
"""

from __future__ import annotations

import dataclasses
import io
import time
from logging import INFO
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Union, dataclass_transform

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from ..errors import ConfigError
from ..methods.graph import GraphTask
from ..methods.link import LinkTask
from ..methods.node import NodeTask
from ..settings.keys import FederationOptions
from ..settings.options import SPEC, check_fields, field_key, option

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings

TaskOptions = Union[NodeTask, GraphTask, LinkTask]
_TASK_PREFIX = {NodeTask: "node", GraphTask: "graph", LinkTask: "link"}


def field_default(name: str, value: Any) -> Any:
    """Federation field ``name`` with another default for one Strategy class (its help text and checks unchanged):
    ``dataset: str = field_default("dataset", "Cora")``."""
    f = FederationOptions.__dataclass_fields__[name]
    return dataclasses.field(default=value, metadata=f.metadata)


def _doc_of(cls: type) -> str:
    """The numpydoc Parameters section of ``cls``'s fields (each field's help text, its type and default)."""
    lines = ["", "Parameters", "----------"]
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(SPEC)
        help_text = spec.help if spec is not None else f.metadata.get("doc", "")
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        default = f"{f.default_factory.__name__}()" if f.default is dataclasses.MISSING else repr(f.default)  # type: ignore[union-attr]
        lines.append(f"{f.name} : {kind} (default: {default})")
        lines.append(f"    {help_text}")
    return "\n".join(lines)


def _strategy_dataclass(cls: type) -> type:
    """``cls`` as a keyword-only dataclass (no generated ``__eq__``: a strategy is compared by identity), with its
    docstring's Parameters section made from its fields."""
    cls = dataclasses.dataclass(cls, kw_only=True, eq=False)
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n" + _doc_of(cls)
    return cls


_FEDERATION_FIELDS = frozenset(f.name for f in dataclasses.fields(FederationOptions))


@dataclass_transform(kw_only_default=True, field_specifiers=(dataclasses.field, option))
@_strategy_dataclass
class GraphStrategy(FederationOptions, Strategy):
    """A flowergraph method as a Flower Message-API strategy: use a subclass (:class:`~flowergraph.serverapp.
    FedGCN`, ...). A method another package registers gets its class the same way: ``class MyMethod(GraphStrategy,
    MyOptions): method = "mymethod"`` (docs/extending.md).

    The constructor checks every argument (its type, choices and range, and the method's checks across keys) and
    raises :class:`~flowergraph.errors.ConfigError` naming the argument, the value and the valid choices.
    :meth:`start` runs the method on a Flower ``Grid`` and returns Flower's ``Result``; it also writes flowergraph's
    records (``config.json``, ``rounds.jsonl``, ``summary.json``) and progress lines, and checkpoints and resumes
    (``out_dir``, ``checkpoint_every``, ``resume_from``).
    """

    method: ClassVar[str] = ""
    prefix: ClassVar[str | None] = None  # the run-config namespace of the method's own keys (default: its name)

    task: TaskOptions | None = dataclasses.field(
        default=None,
        metadata={
            "doc": "The task's settings (model, local training, split, partition): a NodeTask, a GraphTask or a "
            "LinkTask (link prediction on a node dataset); None: the defaults of the task the dataset decides."
        },
    )
    num_clients: int | None = dataclasses.field(
        default=None,
        metadata={
            "doc": "How many clients (SuperNodes) take part; None: every node connected when start() runs "
            "(at least one, waiting up to connect_timeout)."
        },
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _strategy_dataclass(cls)

    def __post_init__(self) -> None:
        if not type(self).method:
            raise ConfigError(
                f"{type(self).__name__} names no method (class attribute `method`); use one of flowergraph.serverapp's "
                f"classes"
            )
        check_fields(self, owner=type(self).__name__)
        if self.task is not None and not isinstance(self.task, tuple(_TASK_PREFIX)):
            raise ConfigError(
                f"{type(self).__name__}(task={self.task!r}): expected a NodeTask, a GraphTask or a LinkTask "
                f"(flowergraph.serverapp), or None"
            )
        if self.task is not None:
            check_fields(self.task, owner=type(self.task).__name__)
        if self.num_clients is not None and (isinstance(self.num_clients, bool) or int(self.num_clients) < 1):
            raise ConfigError(f"{type(self).__name__}(num_clients={self.num_clients!r}): must be >= 1, or None")
        self._face: Any = None
        # every check across keys, now, with the clients' number when it is known (else the dataset's natural one)
        from ..settings import natural_num_clients

        s = self.settings(
            num_clients=self.num_clients or natural_num_clients(type(self).method, self.dataset), num_rounds=None
        )
        if self.task is not None and _TASK_PREFIX[type(self.task)] != s.task_info.name:
            raise ConfigError(
                f"{type(self).__name__}(task={type(self.task).__name__}(...)) with dataset={self.dataset!r}, whose "
                f"task is {s.task_info.name!r}: pass a {s.task_info.name.capitalize()}Task, or another dataset"
            )

    # ------------------------------------------------------------------------------------------ settings
    def run_config(self, *, num_clients: int | None = None, num_rounds: int | None = None) -> dict[str, Any]:
        """These arguments as flowergraph's run-config keys (what ``python -m flowergraph.simulation --set`` takes):
        the federation's, the task's and the method's, with ``num-clients`` / ``rounds`` when given."""
        method = type(self).method
        config: dict[str, Any] = {"method": method}
        prefix = type(self).prefix or method
        for f in dataclasses.fields(self):
            spec = f.metadata.get(SPEC)
            if spec is None:
                continue
            key = spec.key or field_key(f.name, None if f.name in _FEDERATION_FIELDS else prefix)
            config[key] = getattr(self, f.name)
        if self.task is not None:
            task_prefix = _TASK_PREFIX[type(self.task)]
            if isinstance(self.task, LinkTask):  # a node dataset's task is node classification unless told
                config["task"] = "link"
            for f in dataclasses.fields(self.task):
                config[field_key(f.name, task_prefix)] = getattr(self.task, f.name)
        if num_clients is not None:
            config["num-clients"] = int(num_clients)
        if num_rounds is not None:
            config["rounds"] = int(num_rounds)
        return config

    def settings(self, *, num_clients: int | None, num_rounds: int | None) -> "RunSettings":
        """The validated settings of a run with ``num_clients`` clients and ``num_rounds`` rounds (None: the keys'
        defaults; the method's own number where its schedule fixes the rounds)."""
        return self._parse(self.run_config(num_clients=num_clients, num_rounds=num_rounds))

    def _parse(self, config: dict[str, Any]) -> "RunSettings":
        """``config`` validated (the launchers' checks and messages, headed by this class's name)."""
        from ..settings import parse_run_config

        try:
            return parse_run_config(config)
        except ConfigError as exc:
            raise ConfigError(f"{type(self).__name__}: {exc}") from None

    def client_settings(self, s: "RunSettings") -> dict[str, Any]:
        """What the clients are told in every message (``fg.settings``): the run's keys that differ from their
        defaults (a client fills in the same defaults)."""
        from ..settings import option_by_key

        defaults = {k: o.default for k, o in option_by_key().items()}
        return {k: v for k, v in s.as_dict().items() if k in defaults and v != defaults[k]}

    # ---------------------------------------------------------------------------------------- the run
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
        *,
        out_dir: str | None = None,
        checkpoint_every: int = 0,
        resume_from: str | None = None,
    ) -> Result:
        """Run the method for ``num_rounds`` rounds on ``grid``'s nodes; returns Flower's ``Result`` (the final
        model, each round's training and evaluation metrics).

        Parameters
        ----------
        grid : Grid
            The Grid the ServerApp was given.
        initial_arrays : ArrayRecord, optional
            The initial global model; None: one client's (every client builds the same seeded model).
        num_rounds : int, optional
            Training rounds, the run's only round count (default 3; a method whose schedule fixes its rounds,
            such as FL-AGCNS's search and retraining, computes them and refuses another number, naming its own).
        timeout : float (default: 3600)
            Seconds to wait for replies where ``round_timeout`` is not set lower.
        train_config, evaluate_config : ConfigRecord, optional
            Extra keys sent with every train / evaluate message (the method's own keys take precedence).
        evaluate_fn : Callable[[int, ArrayRecord], MetricRecord | None], optional
            Centralised evaluation of the global model, before round 1 and after each round.
        out_dir : str, optional
            Where flowergraph writes its records (``config.json``, ``rounds.jsonl``, ``summary.json``), with one
            progress line per round, and its checkpoints; None: no files (as Flower's own strategies).
        checkpoint_every : int (default: 0)
            Write a checkpoint (server state, then every client's state) into ``out_dir`` every this many rounds
            and after the last; 0: none.
        resume_from : str, optional
            A checkpoint file or a run folder: the run continues after its round, with the same results (the
            records go on in ``out_dir``).
        """
        from ..app.message_server import FlowergraphStrategy
        from ..app.server_app import ServerRun, serve

        nodes = self._wait_for_nodes(grid)
        rounds = self._num_rounds(nodes, num_rounds)
        if (checkpoint_every or resume_from) and not out_dir:
            raise ConfigError(
                f"{type(self).__name__}.start(checkpoint_every={checkpoint_every}, resume_from={resume_from!r}): "
                f"checkpoints live in the run's folder: pass out_dir too"
            )
        config = self.run_config(num_clients=nodes, num_rounds=rounds)
        config.update({"flower-api": "message", "out-dir": str(out_dir or ""), "checkpoint-every": checkpoint_every})
        if resume_from:
            config["resume-from"] = str(resume_from)
        s = self._parse(config)
        told = self.client_settings(s)
        start = dict(
            num_rounds=rounds,
            timeout=timeout,
            train_config=train_config,
            evaluate_config=evaluate_config,
            evaluate_fn=evaluate_fn,
        )
        if not out_dir:  # no files: the method's core, run by the Message-API face (Flower's strategies write none)
            from ..app.run_strategy import build_strategy

            self._face = FlowergraphStrategy(build_strategy(s), client_settings=told)
            return self._face.start(grid, initial_arrays, **start)
        result: list[Result] = []

        def launch(run: ServerRun) -> None:  # flowergraph's ServerApp's run: records, checkpoints
            self._face = FlowergraphStrategy(run.strategy, client_settings=told)
            run.on_round_end.federation = self._face.nodes_for(grid)
            result.append(
                self._face.start(
                    grid, initial_arrays, start_round=run.start_round, on_round_end=run.on_round_end, **start
                )
            )

        serve(s, launch)
        return result[0]

    def _num_rounds(self, nodes: int, num_rounds: int | None) -> int:
        """``num_rounds``, or the method's own count where its schedule fixes the rounds (another count refused,
        naming that one), else 3 (Flower's default)."""
        s = self.settings(num_clients=nodes, num_rounds=None)
        fixed = s.method_info.fixed_rounds
        if fixed is not None:
            computed = int(fixed(s))
            if num_rounds is not None and int(num_rounds) != computed:
                raise ConfigError(
                    f"{type(self).__name__}: num_rounds={num_rounds}, but its schedule fixes the rounds at "
                    f"{computed} (from its arguments); leave num_rounds out or pass {computed}"
                )
            return computed
        rounds = 3 if num_rounds is None else num_rounds
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(f"{type(self).__name__}.start(num_rounds={num_rounds!r}): must be an integer >= 1")
        return rounds

    def _wait_for_nodes(self, grid: Grid) -> int:
        """The number of clients: ``num_clients`` once that many nodes are connected, else every node connected
        (at least one), waiting up to ``connect_timeout`` seconds."""
        need = self.num_clients or 1
        deadline = time.monotonic() + float(self.connect_timeout)
        while True:
            count = len(list(grid.get_node_ids()))
            if count >= need:
                return int(self.num_clients or count)
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"{type(self).__name__}: {count} node(s) connected within connect_timeout="
                    f"{self.connect_timeout:g} s, {need} needed (num_clients={self.num_clients})"
                )
            time.sleep(0.2)

    # ------------------------------------------------------------------- Flower's Strategy methods
    def _running(self) -> Any:
        if self._face is None:
            raise RuntimeError(
                f"{type(self).__name__}: call start(grid=...) to run it; its rounds are configured inside start()"
            )
        return self._face

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        return self._running().configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies: "list[Message]"):
        return self._running().aggregate_train(server_round, replies)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        return self._running().configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: "list[Message]"):
        return self._running().aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        text = io.StringIO(repr(self))
        for line in text:
            log(INFO, "\t├── %s", line.rstrip())
