"""FedGCN (Yao et al., NeurIPS 2023): registration, for node classification and link prediction. Strategy:
:mod:`flowergraph.methods.fedgcn.server`; clients: :mod:`flowergraph.methods.fedgcn.client`; the maths:
:mod:`flowergraph.methods.fedgcn.maths` (on links: :mod:`flowergraph.methods.fedgcn.links`)."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING, Any, Callable

from ...errors import ConfigError
from ...settings.options import Options, option, options_of
from ..node import model_kwargs, train_config
from ..registry import Client, ClientArgs, Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings


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


def _check_link(s: "RunSettings") -> None:
    o, k = s.of("fedgcn"), s.of("link")
    if o.hops > 0 and (k.encoder != "gcn" or k.layers != 2):
        raise ConfigError(
            f"method 'fedgcn' on task=link trains a 2-layer GCN encoder; got link.encoder={k.encoder!r} "
            f"link.layers={k.layers} (valid: link.encoder='gcn', link.layers=2)"
        )
    if o.hops > 0 and k.cross_known_fraction == 0:
        raise ConfigError(
            f"fedgcn.hops={o.hops} on task=link aggregates over the cross-client edges the silos know, and "
            f"link.cross-known-fraction=0 leaves none (every cross-client edge is a test edge): it would be fedavg. "
            f"Set link.cross-known-fraction in (0, 1), or fedgcn.hops=0"
        )


def _check(s: "RunSettings") -> None:
    o = s.of("fedgcn")
    if o.he and o.hops == 0:
        raise ConfigError("fedgcn.he=true needs fedgcn.hops=1 or 2 (hops=0 has no communication phase)")
    if s.task_info.name == "link":
        return _check_link(s)
    n = s.of("node")
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


def _strategy(args: StrategyArgs) -> "Strategy":
    from .server import FedGCNStrategy

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNStrategy(hops=o.hops, he=o.he, weighting=s.weighting, **args.common())


def _link_client(args: ClientArgs) -> "Client":
    from .client import FedGCNLinkClient
    from .. import link

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNLinkClient(
        args.data(),
        link.train_config(s),
        link.model_kwargs(s),
        seed=s.seed,
        k=link.o(s).hits_k,
        neg_ratio=link.o(s).neg_ratio,
        hops=o.hops,
        state=args.state,
        key_file=s.key_file if o.he else None,
    )


def _client(args: ClientArgs) -> "Client":
    from .client import FedGCNClient

    s = args.settings
    if s.task_info.name == "link":
        return _link_client(args)
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


def _server_evaluate(s: "RunSettings") -> Callable[..., Any]:
    """The task's server-side evaluation; on links, every client embedded on its exchanged aggregations (the
    exchange computed in the server's process: :func:`flowergraph.methods.fedgcn.links.exchange`)."""
    from ..link import link_server_evaluate
    from ..node import node_server_evaluate

    if s.task_info.name != "link":
        return node_server_evaluate(s)
    from .links import encoders

    hops = s.of("fedgcn").hops
    return link_server_evaluate(s, encoders_of=(lambda clients: encoders(clients, hops)) if hops else None)


FEDGCN = register(
    Method(
        name="fedgcn",
        summary="FedGCN (Yao et al., NeurIPS 2023): one-shot exchange of neighbour aggregations "
        "(0/1/2-hop), optionally summed under CKKS, then federated GCN training",
        tasks=("node", "link"),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        server_evaluate=_server_evaluate,
        needs_key_file=lambda s: bool(s["fedgcn.he"]),
        stateful_clients=True,
        paper="Yao et al., FedGCN, NeurIPS 2023, arXiv:2201.12433",
    )
)
