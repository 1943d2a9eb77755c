"""Built-in node-classification methods: ``fedavg``, ``centralized`` and the benchmark floor ``noop``, and the
pieces every node-level method shares (model arguments, the launcher's data check, server-side evaluation)."""

from __future__ import annotations

from typing import Any

from .registry import ClientArgs, Method, StrategyArgs, register


def model_kwargs(s) -> dict[str, Any]:
    """:func:`flowergraph.tasks.models.build_node_model` keyword arguments from the run settings."""
    return {"kind": s.model, "hidden": s.hidden, "layers": s.layers, "dropout": s.dropout, "heads": s.heads,
            "input_dropout": s.input_dropout}


def node_preflight(s) -> dict[str, Any]:
    """The launcher's check before Flower starts: build the data once (bad input fails in seconds) and
    describe it. With ``partition-dir`` only the manifest is read (the launcher never loads the global graph)."""
    if s.partition_dir and not s.method_info.whole_graph:
        from ..tasks.partition_files import read_manifest

        manifest = read_manifest(s.partition_dir, dataset=s.dataset, num_clients=s.num_clients)
        sizes = [f["nodes"] for f in manifest["files"]]
        return {"summary": f"{s.dataset} ({manifest['num_global_nodes']} nodes, from partition files in "
                           f"{s.partition_dir})", "client_sizes": sizes}
    from ..tasks.federated_graph import load_global_graph, node_assignment

    import numpy as np

    data = load_global_graph(s.graph_spec())
    assignment = node_assignment(s.graph_spec(), s.partition_spec())
    sizes = np.bincount(assignment, minlength=s.partition_spec().num_clients).tolist()
    return {"summary": f"{s.dataset} ({int(data.num_nodes)} nodes)", "client_sizes": sizes,
            "num_nodes": int(data.num_nodes), "num_edges": int(data.num_edges)}


def node_server_evaluate(s):
    """Evaluate the global model on the global graph's test nodes (the server loads the dataset)."""
    from ..tasks.federated_graph import load_global_graph
    from ..tasks.models import build_node_model, set_weights
    from ..tasks.training import evaluate_masks

    data = load_global_graph(s.graph_spec())
    model = build_node_model(in_dim=data.num_features, num_classes=data.num_classes, **model_kwargs(s))

    def evaluate(server_round, arrays):
        set_weights(model, arrays)
        r = evaluate_masks(model, lambda: model(data.x, data.edge_index), data.y, {"test": data.test_mask})
        return r["test_loss"], {"accuracy": r["test_accuracy"]}

    return evaluate


def _averaging_strategy(args: StrategyArgs):
    from ..strategies.weighted import WeightedAveraging

    return WeightedAveraging(weighting=args.settings.weighting, **args.common())


def _node_client(args: ClientArgs):
    from ..clients.node import NodeClassificationClient

    s = args.settings
    return NodeClassificationClient(args.node_graph(), s.train_config(), model_kwargs(s), seed=s.seed)


def _noop_client(args: ClientArgs):
    from ..clients.node import NoOpClient
    from ..tasks.models import build_node_model, get_weights

    s = args.settings
    graph = args.node_graph()
    model = build_node_model(in_dim=graph.num_features, num_classes=graph.num_classes, seed=s.seed,
                             **model_kwargs(s))
    return NoOpClient(get_weights(model), args.partition_id)


_NODE = dict(task="node", preflight=node_preflight, server_evaluate=node_server_evaluate)

FEDAVG = register(Method(
    name="fedavg", summary="sample-weighted federated averaging of a GCN/GraphSAGE/GAT node classifier (FedGCN's "
    "0-hop); cross-client edges are dropped", build_strategy=_averaging_strategy, build_client=_node_client,
    **_NODE))
CENTRALIZED = register(Method(
    name="centralized", summary="the same model and steps on the whole graph (one client holds everything): the "
    "reference upper bound", build_strategy=_averaging_strategy, build_client=_node_client, whole_graph=True,
    **_NODE))
NOOP = register(Method(
    name="noop", summary="clients that return what they receive: Flower's own per-round cost, for benchmarks",
    build_strategy=_averaging_strategy, build_client=_noop_client, benchmark_only=True, **_NODE))
