"""The benchmark-only methods: a library method's messages with clients that do no work, the floor a benchmark
measures that method's per-round time against. They are not flowergraph's methods: a benchmark registers them
through flowergraph's plugin mechanism (``FLOWERGRAPH_PLUGINS=benchmarks.noop_methods``, docs/extending.md) by
calling :func:`enable` before it starts a run.

* ``noop`` (node task): fedavg's strategy; clients that return what they receive (the node model's arrays):
  Flower's own per-round cost (``round_overhead.py``, ``message_api.py``, ``deployment_overhead.py``,
  ``privacy_cost.py``);
* ``fedstar-noop`` (graph task): FedStar's strategy, checks and messages; clients that return the arrays FedStar's
  clients would send (``fedstar_speed.py``);
* ``flagcns-noop`` (node task): FL-AGCNS's strategy, schedule and messages; clients that load, train and evaluate
  nothing (``FLAGCNSNoOpClient``; ``flagcns.py``'s speed cells).

Cheap to import, as every registration module (the settings import them): the clients, torch and the data are
imported inside the client builders."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from flowergraph.errors import ConfigError
from flowergraph.methods import PLUGINS_ENV, ClientArgs, Method, register
from flowergraph.methods.baselines import FEDAVG
from flowergraph.methods.fedstar import FEDSTAR, task_spec
from flowergraph.methods.flagcns import FLAGCNS, client_kwargs
from flowergraph.methods.node import model_kwargs

if TYPE_CHECKING:  # pragma: no cover
    from flwr.client import NumPyClient

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "benchmarks.noop_methods"  # this module as FLOWERGRAPH_PLUGINS names it (the repository on the path)


def _noop_client(args: ClientArgs) -> "NumPyClient":
    """The node model's initial arrays, returned as received."""
    from flowergraph.clients import NoOpClient
    from flowergraph.tasks.models import build_node_model, get_weights

    s = args.settings
    graph = args.data()
    model = build_node_model(in_dim=graph.num_features, num_classes=graph.num_classes, seed=s.seed, **model_kwargs(s))
    return NoOpClient(get_weights(model), args.partition_id)


def _fedstar_noop_client(args: ClientArgs) -> "NumPyClient":
    """Clients that return what they receive, with the arrays FedStar's clients would send: the federation's own
    cost for FedStar's messages."""
    from flowergraph.methods.fedstar.client import VARIANTS, shared_keys
    from flowergraph.clients import NoOpClient
    from flowergraph.tasks.graphcls import build_graph_model
    from flowergraph.tasks import module_arrays

    s = args.settings
    kind, part, _ = VARIANTS[s["fedstar.variant"]]
    spec = task_spec(s)
    if len(spec.datasets) == 1 and part in ("all", "all-but-classifier"):
        raise ConfigError("fedstar-noop mirrors the arrays of a cross-dataset federation; give several datasets")
    g = s.of("graph")
    model = build_graph_model(kind, 1, 2, spec.structure_dim, hidden=g.hidden, layers=g.layers, seed=s.seed)
    keys = shared_keys(model, part, cross_dataset=True)
    return NoOpClient(list(module_arrays(model, keys).values()), args.partition_id)


def _flagcns_noop_client(args: ClientArgs) -> "NumPyClient":
    from flowergraph.methods.flagcns.client import FLAGCNSNoOpClient

    return FLAGCNSNoOpClient(args.data(), **client_kwargs(args))


NOOP = Method(
    name="noop",
    summary="clients that return what they receive: Flower's own per-round cost, for benchmarks",
    tasks=("node",),
    build_strategy=FEDAVG.build_strategy,
    build_client=_noop_client,
    benchmark_only=True,
)
FEDSTAR_NOOP = Method(
    name="fedstar-noop",
    summary="FedStar's messages with clients that do no work: the floor for FedStar's per-round time (benchmarks)",
    tasks=("graph",),
    build_strategy=FEDSTAR.build_strategy,
    build_client=_fedstar_noop_client,
    check=FEDSTAR.check,
    preflight=FEDSTAR.preflight,
    benchmark_only=True,
)
FLAGCNS_NOOP = Method(
    name="flagcns-noop",
    summary="FL-AGCNS's messages with clients that do no work: the floor for FL-AGCNS's per-round time (benchmarks)",
    tasks=("node",),
    build_strategy=FLAGCNS.build_strategy,
    build_client=_flagcns_noop_client,
    check=FLAGCNS.check,
    stateful_clients=FLAGCNS.stateful_clients,
    fixed_rounds=FLAGCNS.fixed_rounds,
    update_kind=FLAGCNS.update_kind,
    server_evaluate=FLAGCNS.server_evaluate,
    benchmark_only=True,
)
METHODS = (NOOP, FEDSTAR_NOOP, FLAGCNS_NOOP)  # what flowergraph's plugin loader registers from this module


def _with(items: str, item: str, sep: str) -> str:
    """``items`` (joined by ``sep``) with ``item`` added at the end unless it is there."""
    parts = [p for p in items.split(sep) if p]
    return sep.join(parts if item in parts else [*parts, item])


def enable() -> None:
    """Register the methods here in this process, and in every process it starts from now on (the launchers',
    Ray's workers, SuperNodes and their ClientApp processes): this module joins ``FLOWERGRAPH_PLUGINS`` and the
    repository ``PYTHONPATH`` (and this process's path, where the registry imports the plugins it names)."""
    os.environ[PLUGINS_ENV] = _with(os.environ.get(PLUGINS_ENV, ""), PLUGIN, ",")
    os.environ["PYTHONPATH"] = _with(os.environ.get("PYTHONPATH", ""), str(REPO), os.pathsep)
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    for method in METHODS:
        register(method, replace=True)
