"""The link-prediction task (``task=link``: one graph cut across clients, links split across silos) and its method
``local`` (every silo alone): the task's keys (``link.*``), its datasets (the node task's), data, launcher check,
server-side evaluation of the cross-client test set and the generic client of the baseline methods
(:mod:`flowergraph.methods.baselines`). The Flower-free core is :mod:`flowergraph.tasks.link`; docs/tasks/link.md.

``task=auto`` never picks this task (a node dataset's default task is node classification): a run asks for it by
name. The graph and its cut are the node task's, but its keys are its own (``link.partitioner``, ...: the settings
refuse a task's keys on a run of another task), declared from the node task's fields where they are the same
setting, so both share one declaration (help, default, check)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ConfigError
from ..settings.options import Options, at_least, option, options_of, right_open
from ..tasks.link.data import LinkSpec
from ..tasks.link.metrics import DEFAULT_K
from ..tasks.link.model import ENCODERS
from ..tasks.training import TrainConfig
from .node import NODE_DATASETS, NodeTask, _accepts as _node_accepts, _normalize as _node_normalize
from .baselines import averaging_strategy, baseline_client_for
from .registry import Client, ClientArgs, Method, register, register_task, Sharing, Task

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings
    from ..tasks.federated_graph import GraphSpec, PartitionSpec
    from ..tasks.link import ClientLinkData

_SPLIT = LinkSpec()


def _node_field(name: str) -> Any:
    """The node task's field ``name`` (its default, help, choices and check) as a field of :class:`LinkTask`: the
    same setting, declared once."""
    f = NodeTask.__dataclass_fields__[name]
    return dataclasses.field(default=f.default, metadata=f.metadata)


@dataclass(kw_only=True, eq=False)
class LinkTask(Options):
    """The link-prediction task's settings: the run-config keys ``link.*``. The graph's cut and the synthetic graph
    are the node task's settings under this task's names."""

    val_fraction: float = option(
        _SPLIT.val_fraction, "Fraction of each client's own edges held out for validation.", check=right_open(0.0, 1.0)
    )
    test_fraction: float = option(
        _SPLIT.test_fraction,
        "Fraction of each client's own edges held out for testing (with val-fraction: sum < 1). Every "
        "cross-client edge is held out as the federation's cross-client test set.",
        check=right_open(0.0, 1.0),
    )
    neg_ratio: float = option(
        _SPLIT.neg_ratio,
        "Negatives per positive: validation, test, cross-client test and each epoch's training negatives.",
        check=lambda v: None if 0.0 < v <= 100.0 else "must be in (0, 100]",
    )
    cross_known_fraction: float = option(
        _SPLIT.cross_known_fraction,
        "Fraction of the cross-client edges both owners know exist (picked by a seeded hash of the edge, so owners "
        "agree): never in a client's message-passing graph and not test edges; FedGCN's exchange aggregates over "
        "them. The rest form the cross-client test set.",
        check=right_open(0.0, 1.0),
    )
    hits_k: int = option(
        DEFAULT_K, "K of Hits@K (OGB's: positives scored above the K-th best negative).", check=at_least(1)
    )
    encoder: str = option("gcn", "Node encoder (the decoder is the inner product).", ENCODERS)
    hidden: int = option(128, "Hidden units per layer.", check=at_least(1))
    out: int = option(64, "Embedding width.", check=at_least(1))
    layers: int = option(2, "Graph convolution layers.", check=at_least(1))
    dropout: float = option(0.0, "Dropout between layers.", check=right_open(0.0, 1.0))
    lr: float = option(0.01, "Adam learning rate (the optimizer is re-created each round).", check=at_least(0.0, False))
    weight_decay: float = option(0.0, "Adam weight decay.", check=at_least(0.0))
    local_steps: int = option(1, "Full-batch local epochs per round (fresh negatives each).", check=at_least(1))
    partitioner: str = _node_field("partitioner")
    beta: float = _node_field("beta")
    min_partition_size: int = _node_field("min_partition_size")
    synthetic_nodes: int = _node_field("synthetic_nodes")
    synthetic_classes: int = _node_field("synthetic_classes")
    synthetic_p_in: float = _node_field("synthetic_p_in")
    synthetic_p_out: float = _node_field("synthetic_p_out")
    synthetic_features: int = _node_field("synthetic_features")
    synthetic_signal: float = _node_field("synthetic_signal")


OPTIONS = options_of(LinkTask, "link")


def o(s: "RunSettings") -> Any:
    """The link task's keys of the run, without their prefix (``o(s).hidden``)."""
    return s.of("link")


def graph_spec(s: "RunSettings") -> "GraphSpec":
    """The global graph of a link run (``dataset``, ``data-dir``, ``seed``, ``link.synthetic-*``)."""
    from ..data import synthetic_params
    from ..tasks.federated_graph import GraphSpec

    return GraphSpec(dataset=s.dataset, data_dir=s.data_dir, seed=s.seed, synthetic=synthetic_params(o(s)))


def partition_spec(s: "RunSettings") -> "PartitionSpec":
    """The cut of a link run (one client holding everything for a method with ``whole_graph``)."""
    from ..tasks.federated_graph import PartitionSpec

    if s.method_info.whole_graph:
        return PartitionSpec(partitioner="none", num_clients=1, seed=s.seed)
    k = o(s)
    return PartitionSpec(
        partitioner=k.partitioner, num_clients=s.num_clients, beta=k.beta, min_size=k.min_partition_size, seed=s.seed
    )


def link_spec(s: "RunSettings") -> LinkSpec:
    """The edge split of a link run (ConfigError names a bad value and its valid range)."""
    k = o(s)
    return LinkSpec(
        val_fraction=k.val_fraction,
        test_fraction=k.test_fraction,
        neg_ratio=k.neg_ratio,
        seed=s.seed,
        cross_known_fraction=k.cross_known_fraction,
    )


def model_kwargs(s: "RunSettings") -> dict[str, Any]:
    """:class:`~flowergraph.tasks.link.LinkPredictor` keyword arguments from the run settings."""
    k = o(s)
    return {"encoder": k.encoder, "hidden": k.hidden, "out": k.out, "layers": k.layers, "dropout": k.dropout}


def train_config(s: "RunSettings") -> TrainConfig:
    k = o(s)
    return TrainConfig(local_steps=k.local_steps, optimizer="adam", lr=k.lr, weight_decay=k.weight_decay)


def link_metrics(s: "RunSettings") -> Any:
    """How a round's client evaluations aggregate: AUC, Hits@K and loss weighted by each client's test (validation)
    pairs, the unweighted mean client AUC; the server's cross-client evaluation adds ``cross_auc``, ``cross_hits@K``
    (recorded as ``server_cross_*``)."""
    from ..strategies.evaluation import MetricAggregation

    k = o(s).hits_k
    return MetricAggregation(
        weighted=(
            ("auc", "num_test"),
            (f"hits@{k}", "num_test"),
            ("loss", "num_test"),
            ("val_auc", "num_val"),
            (f"val_hits@{k}", "num_val"),
            ("val_loss", "num_val"),
        ),
        unweighted=(("mean_client_auc", "auc"),),
        server=("cross_auc", f"cross_hits@{k}"),
    )


def _check(s: "RunSettings") -> None:
    link_spec(s)  # val-fraction + test-fraction < 1
    if s.dataset == "synthetic":
        graph_spec(s).synthetic.validate()


def link_data(args: ClientArgs) -> "ClientLinkData":
    """This node's link data: its own edges split and its view of the cross-client test set (memoised per
    process); a data owner with its own partition file (node config ``partition-file``, or the run's
    ``partition-dir``) splits the edges of that file's graph the same way, and has no view of the cross-client set
    (it needs the global graph)."""
    from pathlib import Path

    from ..tasks.link import client_link_data, graph_link_data
    from ..tasks.partition_files import load_partition_file, partition_file_name

    s = args.settings
    file = args.partition_file or (
        str(Path(s.partition_dir).expanduser() / partition_file_name(args.partition_id)) if s.partition_dir else ""
    )
    if file and not s.method_info.whole_graph:
        graph = load_partition_file(file, dataset=s.dataset, num_clients=s.num_clients, client_id=args.partition_id)
        return graph_link_data(graph, link_spec(s))
    return client_link_data(graph_spec(s), partition_spec(s), link_spec(s), args.partition_id)


def link_preflight(s: "RunSettings") -> dict[str, Any]:
    """Build the cut and the cross-client test set once (bad input fails in seconds) and describe them; a client's
    size is its number of training edges (its weight in the average)."""
    import numpy as np

    from ..tasks.federated_graph import load_global_graph, node_assignment
    from ..tasks.link import cross_test_set
    from ..tasks.link.data import split_sizes

    gspec, pspec, lspec = graph_spec(s), partition_spec(s), link_spec(s)
    data = load_global_graph(gspec)
    owner = np.asarray(node_assignment(gspec, pspec), dtype=np.int64)
    src, dst = data.edge_index.numpy()
    own = (src < dst) & (owner[src] == owner[dst])
    edges = np.bincount(owner[src[own]], minlength=pspec.num_clients).tolist()
    cross = cross_test_set(gspec, pspec, lspec)
    return {
        "summary": f"{s.dataset} ({int(data.num_nodes)} nodes, {sum(edges)} own edges, "
        f"{cross.pos.size(1)} cross-client test edges)",
        "client_sizes": [split_sizes(e, lspec)[0] for e in edges],
        "num_nodes": int(data.num_nodes),
        "num_edges": int(data.num_edges),
    }


def link_server_evaluate(
    s: "RunSettings", encoders_of: Callable[[list[Any]], dict[int, Any]] | None = None
) -> Callable[[int, list[Any]], tuple[float, dict[str, Any]]]:
    """The cross-client test set scored with the global model: every owner's embeddings of its nodes on its own
    message-passing graph (what each client would compute and send), gathered by owner (the server loads the
    dataset and every client's split, as simulation and benchmarks can). ``encoders_of(clients)``: a method's
    own encoders by client id, where its clients embed on something else than their own graph (FedGCN: its
    exchanged aggregations, :func:`flowergraph.methods.fedgcn.links.encoders`)."""
    from ..tasks.link import LinkPredictor, client_link_data, cross_test_set, embed, evaluate_cross
    from ..tasks.models import set_weights

    gspec, pspec, lspec = graph_spec(s), partition_spec(s), link_spec(s)
    cross = cross_test_set(gspec, pspec, lspec)
    clients = [client_link_data(gspec, pspec, lspec, k) for k in range(pspec.num_clients)]
    encoders = encoders_of(clients) if encoders_of is not None else {}
    model = LinkPredictor(clients[0].num_features, **model_kwargs(s), seed=s.seed)
    k = o(s).hits_k

    def evaluate(server_round: int, arrays: list[Any]) -> tuple[float, dict[str, Any]]:
        set_weights(model, arrays)
        r = evaluate_cross(cross, {c.client_id: embed(model, c, encoders.get(c.client_id)) for c in clients}, k=k)
        loss = r["cross_loss"]
        return (0.0 if loss != loss else float(loss)), {
            "cross_auc": r["cross_auc"],
            f"cross_hits@{k}": r[f"cross_hits@{k}"],
            "num_cross": r["num_cross_pos"] + r["num_cross_neg"],
        }

    return evaluate


def link_baseline_client(args: ClientArgs, sharing: Sharing) -> "Client":
    """The link predictor the baseline methods train (FedAvg: the whole encoder shared; FedProx: with the proximal
    term; FedPer: the last convolution stays on the client; ``local``: nothing leaves the client's model)."""
    from ..clients.link import LinkClient

    s = args.settings
    k = o(s)
    return LinkClient(
        args.data(),
        train_config(s),
        model_kwargs(s),
        seed=s.seed,
        k=k.hits_k,
        neg_ratio=k.neg_ratio,
        personal=sharing.baseline if sharing.baseline in ("fedper", "local") else "",
        prox_mu=sharing.mu,
        state=args.state,
    )


LINK = register_task(
    Task(
        name="link",
        summary="link prediction on one graph whose nodes are split across clients: each client's own edges split "
        "into train/val/test, every cross-client edge held out as one cross-client test set (task=link)",
        description="link prediction",
        accepts=_node_accepts,
        datasets=lambda: ", ".join(NODE_DATASETS),
        normalize=_node_normalize,
        options=OPTIONS,
        check=_check,
        build_data=link_data,
        preflight=link_preflight,
        server_evaluate=link_server_evaluate,
        baseline_client=link_baseline_client,
        baseline_stateful=False,
        metrics=link_metrics,
        auto=False,
    )
)


def _no_server_model(s: "RunSettings") -> Callable[..., Any]:
    raise ConfigError(
        "server-eval=true: method 'local' trains one model per client and never uses the server's average, so "
        "there is no global model to evaluate; set server-eval=false"
    )


LOCAL = register(
    Method(
        name="local",
        summary="every client trains its own model on its own data and never takes the server's (the "
        "no-federation baseline; the server's average is computed but unused)",
        tasks=("link",),
        build_strategy=averaging_strategy,
        build_client=baseline_client_for("local"),
        stateful_clients=True,
        model_scope="per-client",
        summable_updates=False,
        server_evaluate=_no_server_model,
    )
)
