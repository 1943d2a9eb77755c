"""The graph-classification task (each client owns graphs: one dataset per client across datasets and domains, or
one dataset split across clients): its keys (``graph.*``), its datasets (TU datasets and FedStar's settings), its
data, the launcher's check, and the generic client of the baseline methods on it (a GIN:
:mod:`flowergraph.methods.baselines`). Data, models and training: :mod:`flowergraph.tasks.graphcls`."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..settings.options import Options, at_least, option, options_of, right_open
from .registry import Client, ClientArgs, register_task, Sharing, Task

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import RunSettings
    from ..tasks.graphcls.data import ClientGraphData, GraphTaskSpec
    from ..tasks.graphcls.training import GraphTrainConfig


@dataclass(kw_only=True, eq=False)
class GraphTask(Options):
    """The graph-classification task's settings (each client owns graphs): the run-config keys ``graph.*``; a method's
    Strategy class takes them as ``task=GraphTask(...)``."""

    hidden: int = option(64, "Hidden units of every layer.", check=at_least(1))
    layers: int = option(3, "Graph convolution layers (per channel).", check=at_least(1))
    dropout: float = option(
        0.5, "Dropout after the GIN layers and the hidden classifier layer.", check=right_open(0.0, 1.0)
    )
    lr: float = option(
        0.001, "Adam learning rate (the optimizer is created once per client and persists).", check=at_least(0.0, False)
    )
    weight_decay: float = option(0.0005, "Adam weight decay.", check=at_least(0.0))
    batch_size: int = option(128, "Graphs per mini-batch.", check=at_least(1))
    local_epochs: int = option(1, "Local epochs per round.", check=at_least(1))
    split: str = option(
        "paper",
        "Train/val/test split of every client's graphs, 80/10/10 stratified by label: `paper` "
        "(the FedStar authors' code: scikit-learn's train_test_split twice) or `per-class` (a per-class shuffle: "
        "flowergraph's before; the test sets differ, which moves the mean accuracy by ~3 points).",
        ("paper", "per-class"),
    )
    split_seed: int = option(
        123,
        "Seed of every client's train/val/test split (fixed while `seed` varies the model and "
        "training, as in the authors' code).",
        check=at_least(0),
    )
    min_graphs: int = option(
        10, "One dataset split across clients (Dirichlet `graph.beta`): fewest graphs per client.", check=at_least(1)
    )
    beta: float = option(
        10000.0,
        "One dataset split across clients: Dirichlet concentration over labels (10000 ~ IID).",
        check=at_least(0, False),
    )
    baseline_share: str = option(
        "convs",
        "What FedAvg and FedProx share on graph classification: `convs` (the GIN "
        "convolutions, as the FedStar authors' server model holds) or `all` (every layer whose shape does not "
        "depend on the dataset: the hidden FC too; flowergraph's before).",
        ("convs", "all"),
    )


OPTIONS = options_of(GraphTask, "graph")


def _settings_names() -> tuple[str, ...]:
    from ..tasks.graphcls.data import SETTINGS

    return tuple(SETTINGS)


def _accepts(dataset: str) -> bool:
    if "," in dataset or dataset in _settings_names():
        return True
    from ..tasks.datasets import dataset_info

    try:
        return dataset_info(dataset).task == "graph"
    except ConfigError:
        return False


def _datasets() -> str:
    from ..tasks.datasets import GRAPH_DATASETS

    return (
        f"settings {', '.join(_settings_names())}, TU datasets {', '.join(GRAPH_DATASETS)}, or a "
        f"comma-separated list of them"
    )


def _normalize(value: str) -> str:
    """``chem`` -> ``CHEM``; ``mutag,bzr`` -> ``MUTAG,BZR``; ``mutag`` -> ``MUTAG``."""
    from ..tasks.graphcls.data import parse_graph_datasets

    text = str(value).strip()
    setting = next((k for k in _settings_names() if k.lower() == text.lower()), None)
    if setting is not None:
        return setting
    return ",".join(parse_graph_datasets(text))


def task_spec(s: "RunSettings", structure: str = "dse+rwse", dse_dim: int = 16, rwse_dim: int = 16) -> "GraphTaskSpec":
    """The :class:`~flowergraph.tasks.graphcls.data.GraphTaskSpec` of the run (the structure embedding is a
    FedStar setting: its client passes its own; ConfigError for bad input)."""
    from ..tasks.graphcls.data import GraphTaskSpec

    g = s.of("graph")
    return GraphTaskSpec(
        datasets=s.dataset,
        data_dir=s.data_dir,
        split_seed=g.split_seed,
        split_method=g.split,
        num_clients=s.num_clients,
        beta=g.beta,
        min_graphs=g.min_graphs,
        structure=structure,  # type: ignore[arg-type]
        dse_dim=dse_dim,
        rwse_dim=rwse_dim,
    )


def train_config(s: "RunSettings", mu: float = 0.0) -> "GraphTrainConfig":
    from ..tasks.graphcls.training import GraphTrainConfig

    g = s.of("graph")
    return GraphTrainConfig(
        local_epochs=g.local_epochs, batch_size=g.batch_size, lr=g.lr, weight_decay=g.weight_decay, mu=mu
    )


def model_kwargs(s: "RunSettings") -> dict[str, Any]:
    g = s.of("graph")
    return {"hidden": g.hidden, "layers": g.layers, "dropout": g.dropout}


def _natural_num_clients(dataset: str) -> int | None:
    from ..tasks.graphcls.data import parse_graph_datasets

    names = parse_graph_datasets(dataset)
    return len(names) if len(names) > 1 else None


def _check(s: "RunSettings") -> None:
    from ..tasks.graphcls.data import parse_graph_datasets

    names = parse_graph_datasets(s.dataset)
    if len(names) > 1 and s.num_clients != len(names):
        raise ConfigError(
            f"num-clients={s.num_clients} but dataset={s.dataset!r} has {len(names)} datasets "
            f"({', '.join(names)}) and each client owns one: set num-clients={len(names)} (the "
            f"launcher does when --num-clients is not given)"
        )
    if s.partition_dir:
        raise ConfigError(
            f"partition-dir={s.partition_dir!r}: partition files hold node-level data; graph-level "
            f"method {s.method!r} reads each client's own datasets (data-dir)"
        )
    spec = task_spec(s)
    if len(spec.datasets) == 1 and s.num_clients < 2:
        raise ConfigError(
            f"method {s.method!r} with one dataset ({spec.datasets[0]}) splits its graphs across "
            f"num-clients >= 2 clients; got num-clients={s.num_clients}"
        )


def graph_data(args: ClientArgs, spec: "GraphTaskSpec | None" = None) -> "ClientGraphData":
    """This node's graphs (memoised per process)."""
    from ..tasks.graphcls.data import client_graph_data

    return client_graph_data(spec or task_spec(args.settings), args.partition_id)


def graph_preflight(s: "RunSettings", spec: "GraphTaskSpec | None" = None) -> dict[str, Any]:
    """Load and embed every client's datasets once (bad input fails in seconds) and describe them."""
    from ..tasks.graphcls.data import client_graph_data

    spec = spec or task_spec(s)
    clients = [client_graph_data(spec, k) for k in range(spec.client_count)]
    return {
        "summary": f"{s.dataset} ({', '.join(c.name for c in clients)})",
        "client_sizes": [c.num_train for c in clients],
    }


def graph_baseline_client(args: ClientArgs, sharing: Sharing) -> "Client":
    """The GIN the baseline methods train on graph classification (FedStar's code, its variant of the same name):
    FedAvg and FedProx share the GIN convolutions (``graph.baseline-share=convs``, the authors' server model) or
    every layer whose shape does not depend on the dataset (``all``), FedPer all but the classifier, GCFL the GIN
    convolutions; the rest, and Adam's moments, stay in the client's state."""
    from .fedstar.client import FedStarClient

    s = args.settings
    spec = task_spec(s)
    part = "convs" if sharing.baseline in ("fedavg", "fedprox") and s["graph.baseline-share"] == "convs" else None
    return FedStarClient(
        args.data(),
        partition_id=args.partition_id,
        variant=sharing.baseline,
        train=train_config(s, sharing.mu),
        seed=s.seed,
        state=args.state,
        model_kwargs=model_kwargs(s),
        cross_dataset=len(spec.datasets) > 1,
        part=part,
    )


GRAPH = register_task(
    Task(
        name="graph",
        summary="graph classification: each client owns graphs (one dataset per client, across "
        "datasets and domains, or one dataset split across clients)",
        description="graph classification",
        accepts=_accepts,
        datasets=_datasets,
        normalize=_normalize,
        options=OPTIONS,
        check=_check,
        build_data=graph_data,
        preflight=graph_preflight,
        baseline_client=graph_baseline_client,
        baseline_stateful=True,
        natural_num_clients=_natural_num_clients,
    )
)
