"""flowergraph: federated graph learning as Flower Strategies and clients over PyTorch Geometric.

The layers (docs/architecture.md): launchers (:mod:`flowergraph.simulation`, :mod:`flowergraph.deployment`,
:mod:`flowergraph.partition`, :mod:`flowergraph.plot`); the Flower apps (:mod:`flowergraph.app`); the method and
task registry (:mod:`flowergraph.methods`) and the settings (:mod:`flowergraph.settings`); strategies and clients
(:mod:`flowergraph.strategies`, :mod:`flowergraph.clients`) meeting only through the wire modules
(:mod:`flowergraph.wire`); and the Flower-free core (:mod:`flowergraph.tasks`, :mod:`flowergraph.privacy`,
:mod:`flowergraph.storage`, :mod:`flowergraph.data`).

**The public API** is declared here, once: :data:`PUBLIC_API` names the public modules (docs/api.md mirrors it). A
module's public names are its ``__all__`` (where it has none, its names without a leading underscore); every other
module, and every other name, is internal and may change in any release. Reproductions (reproductions/) import
nothing else (``tests/test_reproductions_api.py``).
"""


def _version() -> str:
    """The version ``pyproject.toml`` declares (its one place): the installed distribution's, else (a checkout on
    ``PYTHONPATH``, not installed) the checkout's ``pyproject.toml``'s."""
    from importlib import metadata
    from pathlib import Path

    try:
        return metadata.version("flowergraph")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib

        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (OSError, KeyError, ValueError):
        return "0+unknown"


__version__ = _version()

# module -> what it offers. The launchers' command lines (python -m flowergraph.simulation, .deployment, .partition,
# .plot, .privacy.ckks keygen) are public too, as documented in docs/running.md and docs/deployment.md.
PUBLIC_API: dict[str, str] = {
    "flowergraph": "__version__ and this table",
    "flowergraph.serverapp": "the method classes: one Message-API Strategy per method, NodeTask, GraphTask",
    "flowergraph.simulation": "the launcher: run_simulation, run_in_process (a run in this process), load_preset",
    "flowergraph.deployment": "a deployment from Python: LoopbackDeployment, run_deployment, ...",
    "flowergraph.plot": "accuracy plots of runs (plot_runs)",
    "flowergraph.data": "a run's data: graphs, partitions and partition files, graph-classification data",
    "flowergraph.storage": "what a run leaves on disk: results, checkpoints, the .npz format",
    "flowergraph.settings": "run configurations and presets (parse_run_config, RunSettings, load_preset)",
    "flowergraph.methods": "registering tasks and methods: Method, Task, the option dataclasses, look-ups",
    "flowergraph.methods.node": "the node task's toolkit for a method (model_kwargs, train_config, node_data, ...)",
    "flowergraph.methods.graph": "the graph task's toolkit for a method (task_spec, graph_data, ...)",
    "flowergraph.methods.fedgraph": "FedGraph's readings of a run's settings (client_graph_of: a client's graph)",
    "flowergraph.methods.flagcns": "FL-AGCNS's readings of a run's settings (space_of, schedule_of, client_kwargs)",
    "flowergraph.errors": "the exceptions flowergraph raises",
    "flowergraph.strategies": "the core strategies' framework (Flower-free): FederatedStrategy, its types and parts",
    "flowergraph.clients": "the client templates, TrainConfig, ClientState and the client wrappers",
    "flowergraph.wire": "what travels: message keys, phases, named arrays",
    "flowergraph.app.message_server": "the Message-API face of a core you build (FlowergraphStrategy)",
    "flowergraph.app.message_client": "the ClientApp handlers (train, evaluate, query, client_app, initial_arrays)",
    "flowergraph.app.legacy": "the legacy face's client adapter (legacy_client)",
    "flowergraph.app.loop": "the legacy face's server adapter (LegacyStrategy: a core strategy as a legacy Strategy)",
    "flowergraph.app.runtime": "process helpers: processes by PID and tag, Flower's environment, app folders",
    "flowergraph.privacy": "the CKKS parameters and key files",
    "flowergraph.tasks": "the Flower-free core's shared parts: torch set-up, named arrays, training settings",
    "flowergraph.tasks.link": "the link task's core (docs/tasks/link.md)",
    "flowergraph.tasks.graphcls": "FedStar's core: graph-classification data, structure embeddings, models",
    "flowergraph.methods.fedgraph.maths": "FedGraph's core (each module's docstring states its equations)",
    "flowergraph.methods.flagcns.maths": "FL-AGCNS's core: the search space, SuperNet, evolution, federated training",
    "flowergraph.methods.asfgnn.maths": "ASFGNN's core: its client splits, hyper-parameters and reference loops",
}
__all__ = ["PUBLIC_API", "__version__"]
