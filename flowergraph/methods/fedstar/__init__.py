"""FedStar (Tan et al., AAAI 2023), its Local baselines and its ablations: registration (FedAvg, FedProx, FedPer and
GCFL are methods of their own: :mod:`flowergraph.methods.baselines`). Strategy:
:mod:`flowergraph.methods.fedstar.server`;
client: :mod:`flowergraph.methods.fedstar.client`; data, structure embeddings, models and training:
:mod:`flowergraph.tasks.graphcls`."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...settings.options import Options, at_least, option, options_of
from ..graph import graph_preflight, model_kwargs, train_config
from ..graph import task_spec as graph_task_spec
from ..registry import Client, ClientArgs, Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings
    from ...tasks.graphcls.data import GraphTaskSpec

VARIANT_CHOICES = ("fedstar", "local", "local-decoupled", "share-all", "share-feature")
# Variants that became methods of their own (flowergraph.methods.baselines); 0.3 removed fedstar.variant=<one>
BASELINE_VARIANTS = ("fedavg", "fedprox", "fedper", "gcfl")
STRUCTURE_CHOICES = ("dse+rwse", "dse", "rwse", "ones")


def _variant(value: str) -> str:
    """``fedstar.variant``: a baseline that became a method of its own is refused naming the method (0.3 removed
    the old spelling ``method=fedstar`` with ``fedstar.variant=fedavg|fedprox|fedper|gcfl``)."""
    if value in BASELINE_VARIANTS:
        raise ConfigError(
            f"fedstar.variant={value!r}: {value} is a method of its own (on every task); use "
            f"method={value!r} without fedstar.variant (0.3 removed the old spelling)"
        )
    return value


@dataclass(kw_only=True, eq=False)
class FedStarOptions(Options):
    """FedStar's hyper-parameters: the run-config keys ``fedstar.*`` and the keyword arguments of
    :class:`flowergraph.serverapp.FedStar`."""

    variant: str = option(
        "fedstar",
        "Algorithm: `fedstar` (share the structure encoder), the baselines `local` (GIN, "
        "no sharing) and `local-decoupled` (FedStar's model, no sharing), or the ablations `share-all` / "
        "`share-feature` (FedStar's model sharing both encoders / the feature encoder). FedAvg, FedProx, FedPer and "
        "GCFL are methods of their own (`method=fedavg` on a graph dataset is FedStar's FedAvg row).",
        VARIANT_CHOICES,
        normalize=_variant,
    )
    structure: str = option(
        "dse+rwse",
        "Structure embedding: degree one-hot (DSE) + random-walk return probabilities "
        "(RWSE), one of them, or `ones` (an all-ones vector: the paper's 'without' ablation).",
        STRUCTURE_CHOICES,
    )
    dse_dim: int = option(16, "DSE width (degrees clipped to [1, dse-dim]).", check=at_least(1))
    rwse_dim: int = option(16, "RWSE width (random-walk steps 1..rwse-dim).", check=at_least(1))
    pool_order: str = option(
        "per-node",
        "Where the decoupled model applies its first classifier layer FC(2h, h): to "
        "every node before the sum pooling (`per-node`, the authors' code) or after it (`pooled`, the paper's "
        "Table 9); they differ in the bias only (added once per node or once per graph).",
        ("per-node", "pooled"),
    )


OPTIONS = options_of(FedStarOptions, "fedstar")


def task_spec(s: "RunSettings") -> "GraphTaskSpec":
    """The :class:`~flowergraph.tasks.graphcls.data.GraphTaskSpec` of the run, with FedStar's structure
    embedding (ConfigError for bad input)."""
    o = s.of("fedstar")
    return graph_task_spec(s, structure=o.structure, dse_dim=o.dse_dim, rwse_dim=o.rwse_dim)


def _check(s: "RunSettings") -> None:
    variant = s["fedstar.variant"]
    if variant in ("local", "local-decoupled") and (s.secure_agg != "none" or s.dp != "none"):
        raise ConfigError(
            f"fedstar.variant={variant!r} shares nothing, so secure-agg={s.secure_agg!r} / "
            f"dp={s.dp!r} have no update to protect; set them to 'none' for this variant"
        )


def _preflight(s: "RunSettings") -> dict[str, Any]:
    return graph_preflight(s, task_spec(s))


def _strategy(args: StrategyArgs) -> "Strategy":
    from .server import FedStarStrategy

    s = args.settings
    return FedStarStrategy(variant=s["fedstar.variant"], weighting=s.weighting, **args.common())


def _client(args: ClientArgs) -> "Client":
    from .client import FedStarClient
    from ...tasks.graphcls.data import client_graph_data

    s = args.settings
    spec = task_spec(s)
    return FedStarClient(
        client_graph_data(spec, args.partition_id),
        partition_id=args.partition_id,
        variant=s["fedstar.variant"],
        train=train_config(s),
        seed=s.seed,
        state=args.state,
        model_kwargs={**model_kwargs(s), "pool_order": s["fedstar.pool-order"]},
        cross_dataset=len(spec.datasets) > 1,
    )


FEDSTAR = register(
    Method(
        name="fedstar",
        summary="FedStar (Tan et al., AAAI 2023): graph classification across datasets and domains, "
        "sharing only the structure encoder; its Local baselines and ablations via `fedstar.variant`",
        tasks=("graph",),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        stateful_clients=True,
        preflight=_preflight,
        paper="Tan et al., FedStar, AAAI 2023, doi:10.1609/aaai.v37i8.26187, arXiv:2211.13009",
    )
)
