"""FedGCN (Yao et al., NeurIPS 2023): registration. Strategy: :mod:`flowergraph.strategies.fedgcn`; client:
:mod:`flowergraph.clients.fedgcn`; the maths: :mod:`flowergraph.tasks.fedgcn`."""

from __future__ import annotations

from ..errors import ConfigError
from ..settings.options import Option
from .node import model_kwargs, node_preflight, node_server_evaluate
from .registry import ClientArgs, Method, StrategyArgs, register

OPTIONS = (
    Option("fedgcn.hops", 2, "Neighbour-aggregation hops exchanged before training (0 = FedAvg on local "
           "subgraphs, 1 = own nodes, 2 = own nodes and their 1-hop neighbours: exact for a 2-layer GCN).",
           (0, 1, 2), group="fedgcn"),
    Option("fedgcn.he", False, "Sum the aggregations under CKKS homomorphic encryption (TenSEAL); the server "
           "holds no key, the data owners hold `key-file`.", group="fedgcn"),
)


def _check(s) -> None:
    o = s.of("fedgcn")
    if o.hops > 0 and (s.model != "gcn" or s.layers != 2):
        raise ConfigError(f"method 'fedgcn' trains a 2-layer GCN; got model={s.model!r} layers={s.layers} "
                          f"(valid: model='gcn', layers=2)")
    if o.hops > 0 and s.input_dropout > 0:
        raise ConfigError(f"input-dropout={s.input_dropout} with fedgcn: features arrive pre-aggregated, so "
                          f"input-dropout must be 0")
    if o.he and o.hops == 0:
        raise ConfigError("fedgcn.he=true needs fedgcn.hops=1 or 2 (hops=0 has no communication phase)")


def _strategy(args: StrategyArgs):
    from ..strategies.fedgcn import FedGCNStrategy

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNStrategy(hops=o.hops, he=o.he, weighting=s.weighting, **args.common())


def _client(args: ClientArgs):
    from ..clients.fedgcn import FedGCNClient

    s = args.settings
    o = s.of("fedgcn")
    return FedGCNClient(args.node_graph(), s.train_config(), model_kwargs(s), seed=s.seed, hops=o.hops,
                        state=args.state, key_file=s.key_file if o.he else None)


FEDGCN = register(Method(
    name="fedgcn", summary="FedGCN (Yao et al., NeurIPS 2023): one-shot exchange of neighbour aggregations "
    "(0/1/2-hop), optionally summed under CKKS, then federated GCN training", task="node",
    build_strategy=_strategy, build_client=_client, options=OPTIONS, check=_check,
    needs_key_file=lambda s: bool(s["fedgcn.he"]), stateful_clients=True, preflight=node_preflight,
    server_evaluate=node_server_evaluate, paper="../shared/papers/002_85c67b9db6cfb8f1.txt"))
