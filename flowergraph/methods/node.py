"""The node-classification task (one graph cut across clients) and its built-in method ``centralized``: the
task's keys (``node.*``), its datasets, data, launcher check and server-side evaluation, and the generic client of
the baseline methods on it (:mod:`flowergraph.methods.baselines`). The specs of a run's graph
and partition, ``graph_spec(s)`` and ``partition_spec(s)``, are :mod:`flowergraph.data`'s (named here too, as the
task's toolkit)."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING, Any, Callable

from ..data import graph_spec as graph_spec, node_graph, partition_spec as partition_spec  # the task's toolkit
from ..errors import ConfigError
from ..settings.options import Options, at_least, option, options_of, right_open, within
from ..tasks.models import MODELS
from ..tasks.partition import PARTITIONERS
from ..tasks.synthetic import CSBMParams
from ..tasks.training import OPTIMIZERS, TrainConfig
from .baselines import averaging_strategy, baseline_client_for
from .registry import Client, ClientArgs, Method, register, register_task, Sharing, Task

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings
    from types import SimpleNamespace

    from ..tasks.federated_graph import ClientGraph

# Defaults of the Flower-free building blocks are the run-config defaults (one source of truth).
_CSBM = CSBMParams()
_TRAIN = TrainConfig()
NODE_DATASETS = ("Cora", "CiteSeer", "PubMed", "synthetic")


@dataclass(kw_only=True, eq=False)
class NodeTask(Options):
    """The node-classification task's settings (one graph cut across clients): the run-config keys ``node.*``; a
    method's Strategy class takes them as ``task=NodeTask(...)``."""

    split: str = option(
        "auto",
        "Split preset: `public`, `random[:0.6/0.2/0.2]`, `per-class[:20/500/1000]`, "
        "`first-per-class[:20/500/1000]` (the first nodes of each class train, as the FL-AGCNS authors' code), "
        "`auto` (public for Planetoid, random 60/20/20 otherwise).",
    )
    partitioner: str = option("dirichlet", "Node partitioner.", PARTITIONERS)
    beta: float = option(
        10000.0, "Dirichlet concentration (10000 ~ IID, 1 strongly non-IID).", check=at_least(0, False)
    )
    min_partition_size: int = option(10, "Dirichlet: minimum nodes per client.", check=at_least(1))
    model: str = option("gcn", "Node classifier.", MODELS)
    hidden: int = option(16, "Hidden units per layer.", check=at_least(1))
    layers: int = option(2, "Graph convolution layers.", check=at_least(1))
    dropout: float = option(0.5, "Dropout after hidden layers.", check=right_open(0.0, 1.0))
    input_dropout: float = option(
        0.0, "Dropout on input features (Kipf & Welling use 0.5).", check=right_open(0.0, 1.0)
    )
    heads: int = option(8, "GAT attention heads in hidden layers.", check=at_least(1))
    local_steps: int = option(
        _TRAIN.local_steps, "Full-batch local steps (= local epochs) per round.", check=at_least(1)
    )
    optimizer: str = option(_TRAIN.optimizer, "Local optimizer (re-created each round).", OPTIMIZERS)
    lr: float = option(_TRAIN.lr, "Learning rate.", check=at_least(0.0, False))
    weight_decay: float = option(_TRAIN.weight_decay, "L2 weight decay.", check=at_least(0.0))
    momentum: float = option(_TRAIN.momentum, "SGD momentum (restarts each round).", check=right_open(0.0, 1.0))
    synthetic_nodes: int = option(_CSBM.num_nodes, "Synthetic CSBM: nodes.", check=at_least(2))
    synthetic_classes: int = option(_CSBM.num_classes, "Synthetic CSBM: classes.", check=at_least(2))
    synthetic_p_in: float = option(
        _CSBM.p_in, "Synthetic CSBM: edge probability within a class.", check=within(0.0, 1.0)
    )
    synthetic_p_out: float = option(
        _CSBM.p_out, "Synthetic CSBM: edge probability across classes.", check=within(0.0, 1.0)
    )
    synthetic_features: int = option(_CSBM.num_features, "Synthetic CSBM: feature dimension.", check=at_least(1))
    synthetic_signal: float = option(_CSBM.signal, "Synthetic CSBM: class-mean norm / noise norm.", check=at_least(0.0))


OPTIONS = options_of(NodeTask, "node")


def _accepts(dataset: str) -> bool:
    from ..tasks.datasets import dataset_info

    if "," in dataset:
        return False
    try:
        return dataset_info(dataset).task == "node"
    except ConfigError:
        return False


def _normalize(value: str) -> str:
    from ..tasks.datasets import canonical_name

    return canonical_name(value)


def o(s: "RunSettings") -> "SimpleNamespace":
    """The node task's keys of the run, without their prefix (``o(s).hidden``)."""
    return s.of("node")


def model_kwargs(s: "RunSettings") -> dict[str, Any]:
    """:func:`flowergraph.tasks.models.build_node_model` keyword arguments from the run settings."""
    k = o(s)
    return {
        "kind": k.model,
        "hidden": k.hidden,
        "layers": k.layers,
        "dropout": k.dropout,
        "heads": k.heads,
        "input_dropout": k.input_dropout,
    }


def train_config(s: "RunSettings") -> TrainConfig:
    k = o(s)
    return TrainConfig(
        local_steps=k.local_steps, optimizer=k.optimizer, lr=k.lr, weight_decay=k.weight_decay, momentum=k.momentum
    )


def _check(s: "RunSettings") -> None:
    from ..tasks.datasets import dataset_info
    from ..tasks.splits import parse_split

    parse_split(s["node.split"], dataset_info(s.dataset).family)
    if s.dataset == "synthetic":
        graph_spec(s).synthetic.validate()


def node_data(args: ClientArgs) -> "ClientGraph":
    """This node's part of the federated graph (its own partition file, or cut out of the global graph)."""
    return node_graph(args.settings, args.partition_id, args.partition_file or None)


def node_preflight(s: "RunSettings") -> dict[str, Any]:
    """The launcher's check before Flower starts: build the data once (bad input fails in seconds) and
    describe it. With ``partition-dir`` only the manifest is read (the launcher never loads the global graph)."""
    if s.partition_dir and not s.method_info.whole_graph:
        from ..tasks.partition_files import read_manifest

        manifest = read_manifest(s.partition_dir, dataset=s.dataset, num_clients=s.num_clients)
        sizes = [f["nodes"] for f in manifest["files"]]
        return {
            "summary": f"{s.dataset} ({manifest['num_global_nodes']} nodes, from partition files in {s.partition_dir})",
            "client_sizes": sizes,
        }
    import numpy as np

    from ..tasks.federated_graph import load_global_graph, node_assignment

    data = load_global_graph(graph_spec(s))
    assignment = node_assignment(graph_spec(s), partition_spec(s))
    sizes = np.bincount(assignment, minlength=partition_spec(s).num_clients).tolist()
    return {
        "summary": f"{s.dataset} ({int(data.num_nodes)} nodes)",
        "client_sizes": sizes,
        "num_nodes": int(data.num_nodes),
        "num_edges": int(data.num_edges),
    }


def node_server_evaluate(s: "RunSettings") -> Callable[[int, list[Any]], tuple[float, dict[str, Any]]]:
    """Evaluate the global model on the global graph's test nodes (the server loads the dataset)."""
    from ..tasks.federated_graph import load_global_graph
    from ..tasks.models import build_node_model, set_weights
    from ..tasks.training import evaluate_masks

    data = load_global_graph(graph_spec(s))
    model = build_node_model(in_dim=data.num_features, num_classes=data.num_classes, **model_kwargs(s))

    def evaluate(server_round: int, arrays: list[Any]) -> tuple[float, dict[str, Any]]:
        set_weights(model, arrays)
        r = evaluate_masks(model, lambda: model(data.x, data.edge_index), data.y, {"test": data.test_mask})
        return r["test_loss"], {"accuracy": r["test_accuracy"]}

    return evaluate


def node_baseline_client(args: ClientArgs, sharing: Sharing) -> "Client":
    """The node classifier the baseline methods train (FedAvg: everything shared; FedProx: with the proximal
    term; FedPer: the output layer stays on the client; GCFL: everything, per cluster)."""
    from ..clients.node import NodeClassificationClient

    s = args.settings
    return NodeClassificationClient(
        args.data(),
        train_config(s),
        model_kwargs(s),
        seed=s.seed,
        personal_output=sharing.baseline == "fedper",
        prox_mu=sharing.mu,
        state=args.state,
    )


NODE = register_task(
    Task(
        name="node",
        summary="node classification on one graph whose nodes are split across clients "
        "(cross-client edges are known to their endpoints' owners)",
        description="node classification",
        accepts=_accepts,
        datasets=lambda: ", ".join(NODE_DATASETS),
        normalize=_normalize,
        options=OPTIONS,
        check=_check,
        build_data=node_data,
        preflight=node_preflight,
        server_evaluate=node_server_evaluate,
        baseline_client=node_baseline_client,
        baseline_stateful=False,
    )
)


CENTRALIZED = register(
    Method(
        name="centralized",
        summary="the same model and steps on the whole graph (one client holds everything): the reference upper bound",
        tasks=("node", "link"),
        build_strategy=averaging_strategy,
        build_client=baseline_client_for("fedavg"),  # the task's generic client, whole model, on the whole graph
        whole_graph=True,
    )
)
