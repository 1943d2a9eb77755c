"""FedStar (Tan et al., AAAI 2023) and its baselines: registration. Strategy: :mod:`flowergraph.strategies.fedstar`;
client: :mod:`flowergraph.clients.fedstar`; data, structure embeddings, models and training:
:mod:`flowergraph.tasks.graphcls`."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..settings.options import Option, at_least, right_open
from .registry import ClientArgs, Method, StrategyArgs, register

VARIANT_CHOICES = ("fedstar", "local", "local-decoupled", "fedavg", "fedprox", "fedper", "gcfl", "share-all",
                   "share-feature")
STRUCTURE_CHOICES = ("dse+rwse", "dse", "rwse", "ones")


def _opt(key, default, text, choices=None, check=None):
    return Option(f"fedstar.{key}", default, text, choices, check, group="fedstar")


OPTIONS = (
    _opt("variant", "fedstar", "Algorithm: `fedstar` (share the structure encoder), the baselines `local` (GIN, "
         "no sharing), `local-decoupled` (FedStar's model, no sharing), `fedavg`, `fedprox`, `fedper`, `gcfl` (GIN; "
         "GCFL: clusters of clients by update similarity, one model per cluster), or the ablations `share-all` / "
         "`share-feature` (FedStar's model sharing both encoders / the feature encoder).", VARIANT_CHOICES),
    _opt("structure", "dse+rwse", "Structure embedding: degree one-hot (DSE) + random-walk return probabilities "
         "(RWSE), one of them, or `ones` (an all-ones vector: the paper's 'without' ablation).", STRUCTURE_CHOICES),
    _opt("dse-dim", 16, "DSE width (degrees clipped to [1, dse-dim]).", check=at_least(1)),
    _opt("rwse-dim", 16, "RWSE width (random-walk steps 1..rwse-dim).", check=at_least(1)),
    _opt("hidden", 64, "Hidden units of every layer.", check=at_least(1)),
    _opt("layers", 3, "Graph convolution layers (per channel).", check=at_least(1)),
    _opt("dropout", 0.5, "Dropout after the GIN layers and the hidden classifier layer.", check=right_open(0.0, 1.0)),
    _opt("lr", 0.001, "Adam learning rate (the optimizer is created once per client and persists).",
         check=at_least(0.0, False)),
    _opt("weight-decay", 0.0005, "Adam weight decay.", check=at_least(0.0)),
    _opt("batch-size", 128, "Graphs per mini-batch.", check=at_least(1)),
    _opt("local-epochs", 1, "Local epochs per round.", check=at_least(1)),
    _opt("mu", 0.01, "FedProx proximal weight (variant `fedprox` only).", check=at_least(0.0, False)),
    _opt("gcfl-eps1", 0.07, "GCFL (variant `gcfl`): a cluster may split when the norm of its clients' mean update "
         "is below this (the authors' values: CHEM 0.07, BIO-CHEM 0.07, BIO-CHEM-SN 0.08; the presets set them).",
         check=at_least(0.0, False)),
    _opt("gcfl-eps2", 0.28, "GCFL: ... and its largest client update norm is above this (the authors' values: CHEM "
         "0.28, BIO-CHEM 0.35, BIO-CHEM-SN 0.4).", check=at_least(0.0, False)),
    _opt("gcfl-warmup", 20, "GCFL: no cluster splits in rounds 1..gcfl-warmup (the authors' 20).", check=at_least(0)),
    _opt("split-seed", 123, "Seed of every client's stratified 80/10/10 train/val/test split (fixed while `seed` "
         "varies the model and training, as in the authors' code).", check=at_least(0)),
    _opt("min-graphs", 10, "One dataset split across clients (Dirichlet `beta`): fewest graphs per client.",
         check=at_least(1)),
)


def task_spec(s):
    """The :class:`~flowergraph.tasks.graphcls.data.GraphTaskSpec` of the run (ConfigError for bad input)."""
    from ..tasks.graphcls.data import GraphTaskSpec

    o = s.of("fedstar")
    return GraphTaskSpec(datasets=s.dataset, data_dir=s.data_dir, split_seed=o.split_seed, num_clients=s.num_clients,
                         beta=s.beta, min_graphs=o.min_graphs, structure=o.structure, dse_dim=o.dse_dim,
                         rwse_dim=o.rwse_dim)


def _check(s) -> None:
    from ..tasks.graphcls.data import parse_graph_datasets

    names = parse_graph_datasets(s.dataset)
    if len(names) > 1 and s.num_clients != len(names):
        raise ConfigError(f"num-clients={s.num_clients} but dataset={s.dataset!r} has {len(names)} datasets "
                          f"({', '.join(names)}) and each client owns one: set num-clients={len(names)} (the "
                          f"launcher does when --num-clients is not given)")
    variant = s["fedstar.variant"]
    if variant in ("local", "local-decoupled") and (s.secure_agg != "none" or s.dp != "none"):
        raise ConfigError(f"fedstar.variant={variant!r} shares nothing, so secure-agg={s.secure_agg!r} / "
                          f"dp={s.dp!r} have no update to protect; set them to 'none' for this variant")
    if variant == "gcfl" and (s.secure_agg != "none" or s.dp in ("central-server", "central-client")):
        raise ConfigError(f"fedstar.variant='gcfl' clusters the clients by their individual updates and keeps one "
                          f"model per cluster, which secure-agg={s.secure_agg!r} / dp={s.dp!r} (one global model, "
                          f"updates summed or clipped against it) cannot serve; valid with gcfl: secure-agg='none' "
                          f"and dp='none' or 'local'")
    spec = task_spec(s)
    if len(spec.datasets) == 1 and s.num_clients < 2:
        raise ConfigError(f"method 'fedstar' with one dataset ({spec.datasets[0]}) splits its graphs across "
                          f"num-clients >= 2 clients; got num-clients={s.num_clients}")


def _preflight(s) -> dict[str, Any]:
    from ..tasks.graphcls.data import client_graph_data

    spec = task_spec(s)
    clients = [client_graph_data(spec, k) for k in range(spec.client_count)]  # loads and embeds every dataset
    return {"summary": f"{s.dataset} ({', '.join(c.name for c in clients)})",
            "client_sizes": [c.num_train for c in clients]}


def _train_config(s):
    from ..tasks.graphcls.training import GraphTrainConfig

    o = s.of("fedstar")
    return GraphTrainConfig(local_epochs=o.local_epochs, batch_size=o.batch_size, lr=o.lr,
                            weight_decay=o.weight_decay, mu=o.mu)


def _strategy(args: StrategyArgs):
    from ..strategies.fedstar import FedStarStrategy

    s = args.settings
    if s["fedstar.variant"] == "gcfl":
        from ..strategies.gcfl import GCFLStrategy

        o = s.of("fedstar")
        return GCFLStrategy(eps1=o.gcfl_eps1, eps2=o.gcfl_eps2, warmup=o.gcfl_warmup, weighting=s.weighting,
                            **args.common())
    return FedStarStrategy(variant=s["fedstar.variant"], weighting=s.weighting, **args.common())


def _client(args: ClientArgs):
    from ..clients.fedstar import FedStarClient
    from ..tasks.graphcls.data import client_graph_data

    s = args.settings
    o = s.of("fedstar")
    spec = task_spec(s)
    return FedStarClient(client_graph_data(spec, args.partition_id), partition_id=args.partition_id,
                         variant=o.variant, train=_train_config(s), seed=s.seed, state=args.state,
                         model_kwargs={"hidden": o.hidden, "layers": o.layers, "dropout": o.dropout},
                         cross_dataset=len(spec.datasets) > 1)


FEDSTAR = register(Method(
    name="fedstar", summary="FedStar (Tan et al., AAAI 2023): graph classification across datasets and domains, "
    "sharing only the structure encoder; its baselines and ablations via `fedstar.variant`", task="graph",
    build_strategy=_strategy, build_client=_client, options=OPTIONS, check=_check, stateful_clients=True,
    preflight=_preflight, paper="../shared/papers/004_e019150eeaa39ae3.txt"))


def _noop_client(args: ClientArgs):
    """Clients that return what they receive, with the arrays FedStar's clients would send: the federation's own
    cost for FedStar's messages (the benchmark floor)."""
    from ..clients.fedstar import VARIANTS, shared_keys
    from ..clients.node import NoOpClient
    from ..tasks.graphcls.models import build_graph_model
    from ..tasks.torch_state import module_arrays

    s = args.settings
    o = s.of("fedstar")
    kind, part, _ = VARIANTS[o.variant]
    spec = task_spec(s)
    if len(spec.datasets) == 1 and part in ("all", "all-but-classifier"):
        raise ConfigError("fedstar-noop mirrors the arrays of a cross-dataset federation; give several datasets")
    model = build_graph_model(kind, 1, 2, spec.structure_dim, hidden=o.hidden, layers=o.layers, seed=s.seed)
    keys = shared_keys(model, part, cross_dataset=True)
    return NoOpClient(list(module_arrays(model, keys).values()), args.partition_id)


FEDSTAR_NOOP = register(Method(
    name="fedstar-noop", summary="FedStar's messages with clients that do no work: the floor for FedStar's "
    "per-round time (benchmarks)", task="graph", build_strategy=_strategy, build_client=_noop_client, check=_check,
    preflight=_preflight, benchmark_only=True))
