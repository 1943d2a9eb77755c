"""FedGCN (Yao et al., NeurIPS 2023): registration. Strategy: :mod:`flowergraph.strategies.fedgcn`; client:
:mod:`flowergraph.clients.fedgcn`; the maths: :mod:`flowergraph.tasks.fedgcn`."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..settings.options import Options, option, options_of
from .node import model_kwargs, train_config
from .registry import Client, ClientArgs, Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from flwr.server.strategy import Strategy

    from ..settings import RunSettings


@dataclass(kw_only=True, eq=False)
class FedGCNOptions(Options):
    """FedGCN's hyper-parameters: the run-config keys ``fedgcn.*`` and the keyword arguments of
    :class:`flowergraph.serverapp.FedGCN`."""

    hops: int = option(
        2,
        "Neighbour-aggregation hops exchanged before training (0 = FedAvg on local "
        "subgraphs, 1 = own nodes, 2 = own nodes and their 1-hop neighbours: exact for a 2-layer GCN).",
        (0, 1, 2),
    )
    he: bool = option(
        False,
        "Sum the aggregations under CKKS homomorphic encryption (TenSEAL); the server "
        "holds no key, the data owners hold `key-file`.",
    )


OPTIONS = options_of(FedGCNOptions, "fedgcn")


def _check(s: "RunSettings") -> None:
    o, n = s.of("fedgcn"), s.of("node")
    if o.hops > 0 and (n.model != "gcn" or n.layers != 2):
        raise ConfigError(
            f"method 'fedgcn' trains a 2-layer GCN; got node.model={n.model!r} node.layers={n.layers} "
            f"(valid: node.model='gcn', node.layers=2)"
        )
    if o.hops > 0 and n.input_dropout > 0:
        raise ConfigError(
            f"node.input-dropout={n.input_dropout} with fedgcn: features arrive pre-aggregated, so "
            f"node.input-dropout must be 0"
        )
    if o.he and o.hops == 0:
        raise ConfigError("fedgcn.he=true needs fedgcn.hops=1 or 2 (hops=0 has no communication phase)")


def _strategy(args: StrategyArgs) -> "Strategy":
    from ..strategies.fedgcn import FedGCNStrategy

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNStrategy(hops=o.hops, he=o.he, weighting=s.weighting, **args.common())


def _client(args: ClientArgs) -> "Client":
    from ..clients.fedgcn import FedGCNClient

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNClient(
        args.data(),
        train_config(s),
        model_kwargs(s),
        seed=s.seed,
        hops=o.hops,
        state=args.state,
        key_file=s.key_file if o.he else None,
    )


FEDGCN = register(
    Method(
        name="fedgcn",
        summary="FedGCN (Yao et al., NeurIPS 2023): one-shot exchange of neighbour aggregations "
        "(0/1/2-hop), optionally summed under CKKS, then federated GCN training",
        tasks=("node",),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        needs_key_file=lambda s: bool(s["fedgcn.he"]),
        stateful_clients=True,
        paper="Yao et al., FedGCN, NeurIPS 2023, arXiv:2201.12433",
    )
)
