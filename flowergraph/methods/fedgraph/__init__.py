"""FedGraph (Chen et al., IEEE TPDS): registration. Strategy: :mod:`flowergraph.methods.fedgraph.server`; client:
:mod:`flowergraph.methods.fedgraph.client`; wire: :mod:`flowergraph.methods.fedgraph.wire`; the maths (cross-client
convolution, sampling, eq. 8/9, the DDPG agent, the data synthesis): :mod:`flowergraph.methods.fedgraph.maths`.

The model is the node task's GCN (``node.hidden``, ``node.layers`` = K convolutions, ``node.dropout``; the paper:
16, 2, 0.5); local training is FedGraph's own (Adam, ``fedgraph.lr``, ``fedgraph.weight-decay``,
``fedgraph.local-steps``). The clients' data is ``fedgraph.data``: the paper's overlapping synthesis
(``fedgraph.var``) or a partitioner (``metis``, ``louvain``, ...; ``node.beta`` / ``node.min-partition-size`` as
for the node task); ``node.partitioner`` is not used. A node whose node config names its own ``partition-file``
reads it instead (``fedgraph.data`` must then be a partitioner). The DDPG agent's reward needs the server's test set:
the dataset's test nodes, loaded by the ServerApp (``data-dir`` on the server); ``fedgraph.agent=fixed`` needs no
data on the server.

Public (``__all__``): the registration :data:`FEDGRAPH`, its keys :class:`FedGraphOptions`, and
:func:`client_graph_of`: a client's graph for a run's settings under ``fedgraph.data``, as its client builds it (for
code that drives the core, :mod:`flowergraph.methods.fedgraph.maths`, with a run's data)."""

from __future__ import annotations

from dataclasses import dataclass

import functools
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ...settings.options import Options, at_least, left_open, option, options_of, within
from ...tasks.partition import PARTITIONERS
from ..node import graph_spec
from ..registry import Client, ClientArgs, Method, register, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings

SHARING = ("fedgraph", "allshare", "nonshare")
SAMPLING = ("fedgraph", "full", "graphsage", "fastgcn")
AGENTS = ("ddpg", "fixed")
AGENT_UPDATES = ("ddpg", "td3")  # the keys of flowergraph.methods.fedgraph.maths.UPDATE_RULES
DATA = ("synthesis",) + tuple(p for p in PARTITIONERS if p != "none")
STALENESS = ("same-round", "one-round")
CUT_NORMS = ("local", "global")
ROUND_TIMES = ("server", "slowest-client", "work", "parallel")
EXCHANGES = ("round", "iteration")
NETWORKS = ("lan", "wan")  # the keys of flowergraph.methods.fedgraph.maths.NETWORKS


@dataclass(kw_only=True, eq=False)
class FedGraphOptions(Options):
    """FedGraph's hyper-parameters: the run-config keys ``fedgraph.*`` and the keyword arguments of
    :class:`flowergraph.serverapp.FedGraph`."""

    sharing: str = option(
        "fedgraph",
        "Cross-client convolution: `fedgraph` (remote neighbours' h W from the second "
        "convolution on, the paper), `allshare` (from the first on: owners send x W^(0)), `nonshare` (cross-client "
        "edges ignored).",
        SHARING,
    )
    sampling: str = option(
        "fedgraph",
        "Local sampling: `fedgraph` (each client's policy: mini-batch kappa and one "
        "neighbour probability per convolution, eq. 7), `full` (full batch), `graphsage` (fan-outs 25, 10), "
        "`fastgcn` (layer size 256).",
        SAMPLING,
    )
    agent: str = option(
        "ddpg",
        "Who sets the policies: `ddpg` (the server's agent, per client and round) or `fixed` "
        "(kappa = fedgraph.batch-size, p = fedgraph.prob for every client).",
        AGENTS,
    )
    staleness: str = option(
        "same-round",
        "Remote rows: `same-round` (owners compute them with the model of the round, "
        "an exchange phase before training) or `one-round` (computed after the owner's local training of the "
        "previous round, riding on its fit reply; no exchange phase).",
        STALENESS,
    )
    exchange: str = option(
        "round",
        "Cadence of the cross-client rows: `round` (owners send the rows of all their "
        "boundary nodes once per round, constants for the round) or `iteration` (the paper's: every local "
        "iteration each client asks for the rows of exactly the remote neighbours in its current sample, and the "
        "owners compute them with their current local weights; relayed by the server, 2 x local-steps + 1 "
        "message round trips per round; sharing=fedgraph with node.layers=2, staleness=same-round).",
        EXCHANGES,
    )
    data: str = option("synthesis", "Clients' data: the paper's overlapping synthesis, or a partitioner.", DATA)
    parts_per_client: int = option(
        1,
        "fedgraph.data=metis: METIS cuts the graph into num-clients x this many parts, dealt at "
        "random to the clients, this many each (1: METIS into num-clients parts). More parts, more cross-client "
        "edges: 16 gives ~31% on Cora, 64 ~37% on CiteSeer.",
        check=at_least(1),
    )
    var: float = option(
        0.1, "Synthesis: variance of xi_i ~ Normal(0.8, var) (the paper: 0.1, 0.5, 1).", check=at_least(0.0)
    )
    cut_norm: str = option(
        "local",
        "Normalisation of non-sharing convolutions: `local` (the client's own subgraph's "
        "GCN) or `global` (eq. 2 literally: the whole graph's weights, remote terms dropped).",
        CUT_NORMS,
    )
    batch_size: int = option(
        256,
        "Mini-batch size of the fixed policy and of the graphsage/fastgcn baselines (the paper: 256).",
        check=at_least(1),
    )
    prob: float = option(
        1.0, "Neighbour sampling probability of the fixed policy (every convolution).", check=left_open(0.0, 1.0)
    )
    local_steps: int = option(3, "Local iterations per round (each a fresh sample).", check=at_least(1))
    lr: float = option(0.01, "Local Adam learning rate (the paper: 0.01).", check=at_least(0.0, False))
    weight_decay: float = option(5e-4, "Local Adam weight decay.", check=at_least(0.0))
    episode_rounds: int = option(30, "DDPG: rounds T per episode.", check=at_least(1))
    episode_reset: bool = option(
        True,
        "DDPG: a new episode restarts federated training from the initial model "
        "(Algorithm 4); false: training goes on and only the episode restarts.",
    )
    agent_update: str = option(
        "ddpg",
        "DDPG: the agent's update rule: `ddpg` (the paper's) or `td3` (twin critics, "
        "delayed actor updates, target policy smoothing; not in the paper: a test of DDPG's late relapses).",
        AGENT_UPDATES,
    )
    noise_min: float = option(
        0.02, "DDPG: floor of the exploration noise's sigma (0.2 at first, x 0.98 per episode).", check=at_least(0.0)
    )
    pca_components: int = option(20, "DDPG: PCA dimensions per model in the state (the paper: 20).", check=at_least(1))
    kappa_min: int = option(32, "DDPG: smallest mini-batch size an action maps to.", check=at_least(1))
    kappa_max: int = option(512, "DDPG: largest mini-batch size an action maps to.", check=at_least(1))
    p_min: float = option(
        0.1, "DDPG: smallest neighbour sampling probability an action maps to (largest: 1).", check=left_open(0.0, 1.0)
    )
    target_accuracy: float = option(0.8, "Eq. 9: target accuracy Lambda (a fraction).", check=within(0.0, 1.0))
    omega: float = option(128.0, "Eq. 9: base Omega of the accuracy term (the paper: 128).", check=at_least(1.0, False))
    alpha: float = option(
        -1.0,
        "Eq. 9: time penalty alpha; -1: profiled, 1 / (round 1's time - beta), so the penalty "
        "is about 1 (the paper); 0: no time penalty (runs repeat exactly).",
        check=at_least(-1.0),
    )
    beta: float = option(0.0, "Eq. 9: time offset beta (in fedgraph.round-time's unit).", check=at_least(0.0))
    round_time: str = option(
        "server",
        "Eq. 9: how the round's time delta is measured: `server` (the paper's: the "
        "server's clock, exchange to aggregation; in a one-process simulation the clients' training adds up), "
        "`slowest-client` (the largest local training time a client reports: a deployment with parallel "
        "clients) or `work` (the largest number of a client's forward multiply-adds this round, in billions: "
        "deterministic, no machine noise in the reward) or `parallel` (a model of the round on one machine "
        "per client: the largest client's work times fedgraph.seconds-per-mac, plus the largest client's bytes "
        "over fedgraph.network's bandwidth, plus the message round trips times its round-trip time, plus the "
        "server's CPU time).",
        ROUND_TIMES,
    )
    network: str = option(
        "lan",
        "The parallel clock's network: `lan` (1 Gbit/s, 1 ms round trip) or `wan` (50 Mbit/s, "
        "30 ms). Every round record holds the clock on both; this one feeds the reward (fedgraph.round-time="
        "parallel).",
        NETWORKS,
    )
    seconds_per_mac: float = option(
        0.0,
        "The parallel clock's seconds per multiply-add of a client's work (forward and backward "
        "of the local iterations, and the rows it computes for others); 0: the calibrated constant of this "
        "project's machine (flowergraph.methods.fedgraph.maths.SECONDS_PER_MAC, docs/results/fedgraph_clock.md).",
        check=at_least(0.0),
    )
    seconds_per_step: float = option(
        -1.0,
        "The parallel clock's fixed seconds per local iteration beside seconds-per-mac; -1: the "
        "calibrated constant (flowergraph.methods.fedgraph.maths.SECONDS_PER_STEP, with SECONDS_PER_ROWS per rows "
        "computation); 0: the proportional model max_i(c x work_i), no fixed cost per iteration or rows "
        "computation.",
        check=lambda v: None if v == -1 or v >= 0 else "must be -1 (the calibrated constant) or >= 0",
    )


OPTIONS = options_of(FedGraphOptions, "fedgraph")


def _check(s: "RunSettings") -> None:
    o, n = s.of("fedgraph"), s.of("node")
    if n.model != "gcn":
        raise ConfigError(f"method 'fedgraph' trains a GCN; got node.model={n.model!r} (valid: node.model='gcn')")
    if o.agent == "ddpg" and o.sampling != "fedgraph":
        raise ConfigError(
            f"fedgraph.agent='ddpg' chooses FedGraph sampling policies, but fedgraph.sampling="
            f"{o.sampling!r}; set fedgraph.agent='fixed' for the {o.sampling} baseline"
        )
    if o.kappa_min > o.kappa_max:
        raise ConfigError(f"fedgraph.kappa-min={o.kappa_min} exceeds fedgraph.kappa-max={o.kappa_max}")
    if s.fraction_fit < 1.0:
        raise ConfigError(
            f"fraction-fit={s.fraction_fit}: FedGraph needs every client in every round (owners send "
            f"their rows, the agent's state has a slot per client); set fraction-fit=1.0"
        )
    if s.aggregator != "mean":
        raise ConfigError(
            f"aggregator={s.aggregator!r}: FedGraph aggregates by eq. 8 (weighted by mini-batch "
            f"size); valid with it: aggregator='mean'"
        )
    if s.dp != "none":
        raise ConfigError(
            f"dp={s.dp!r} would cover the training updates only, not the embedding rows FedGraph "
            f"exchanges every round; valid: dp='none'"
        )
    if o.exchange == "iteration":
        if o.sharing != "fedgraph":
            raise ConfigError(
                f"fedgraph.exchange='iteration' relays the rows of the remote neighbours in every local sample, "
                f"but fedgraph.sharing={o.sharing!r} "
                + (
                    "exchanges nothing (the same run as fedgraph.exchange='round')"
                    if o.sharing == "nonshare"
                    else "also shares x W^(0), whose owners' h^(1) rows would need a second relay per iteration "
                    "(not built)"
                )
                + "; valid with it: fedgraph.sharing='fedgraph'"
            )
        if n.layers != 2:
            raise ConfigError(
                f"fedgraph.exchange='iteration' with node.layers={n.layers}: an owner's rows of convolution k >= 2 "
                f"need other owners' rows of its own neighbours (one more relay per convolution and iteration, not "
                f"built); valid with it: node.layers=2 (the paper's GCN)"
            )
        if o.staleness != "same-round":
            raise ConfigError(
                f"fedgraph.staleness={o.staleness!r} means rows computed after the owner's previous round; with "
                f"fedgraph.exchange='iteration' rows are computed in every local iteration with the owner's current "
                f"weights, so there is nothing one round old; valid with it: fedgraph.staleness='same-round'"
            )
    if o.network != "lan" and o.round_time != "parallel":
        raise ConfigError(
            f"fedgraph.network={o.network!r} chooses the parallel clock that feeds eq. 9, but "
            f"fedgraph.round-time={o.round_time!r} (every round record holds the clock on every network anyway); "
            f"valid with it: fedgraph.round-time='parallel'"
        )
    if o.parts_per_client != 1 and o.data != "metis":
        raise ConfigError(
            f"fedgraph.parts-per-client={o.parts_per_client} deals METIS parts to the clients, but "
            f"fedgraph.data={o.data!r}; valid with it: fedgraph.data='metis'"
        )


@functools.lru_cache(maxsize=32)
def _graph(
    gspec: Any,
    data: str,
    num_clients: int,
    var: float,
    seed: int,
    beta: float,
    min_size: int,
    partition_id: int,
    parts_per_client: int = 1,
) -> Any:
    from ...tasks.federated_graph import PartitionSpec, client_graph
    from .maths import dealt_metis_graph, synthesised_graph

    if data == "synthesis":
        return synthesised_graph(gspec, num_clients, var, seed).client(partition_id)
    if data == "metis" and parts_per_client > 1:
        return dealt_metis_graph(gspec, num_clients, parts_per_client, seed, partition_id)
    pspec = PartitionSpec(partitioner=data, num_clients=num_clients, beta=beta, min_size=min_size, seed=seed)
    return client_graph(gspec, pspec, partition_id)


def client_graph_of(s: "RunSettings", partition_id: int) -> Any:
    """Client ``partition_id``'s graph for the run (memoised per process)."""
    o, n = s.of("fedgraph"), s.of("node")
    return _graph(
        graph_spec(s),
        o.data,
        s.num_clients,
        float(o.var),
        s.seed,
        float(n.beta),
        int(n.min_partition_size),
        int(partition_id),
        int(o.parts_per_client),
    )


def _data(args: ClientArgs) -> Any:
    """This node's graph: its own partition file when its node config names one (a partition: ``fedgraph.data``
    must then name a partitioner, the one the files were exported with), else cut from the global dataset."""
    if args.partition_file:
        if args.settings["fedgraph.data"] == "synthesis":
            raise ConfigError(
                "this node holds a partition file, but fedgraph.data='synthesis' builds overlapping "
                "clients from the whole dataset; set fedgraph.data to the partitioner the files were "
                f"exported with (valid: {', '.join(DATA[1:])})"
            )
        from ..node import node_data

        return node_data(args)
    return client_graph_of(args.settings, args.partition_id)


def _preflight(s: "RunSettings") -> dict[str, Any]:
    sizes = [int(client_graph_of(s, k).num_train) for k in range(s.num_clients)]
    return {
        "summary": f"{s.dataset}, FedGraph data {s['fedgraph.data']!r} over {s.num_clients} clients",
        "client_sizes": sizes,
    }


def train_config_of(s: "RunSettings") -> Any:
    from ...tasks.training import TrainConfig

    o = s.of("fedgraph")
    return TrainConfig(local_steps=o.local_steps, optimizer="adam", lr=o.lr, weight_decay=o.weight_decay)


def ddpg_config_of(s: "RunSettings") -> Any:
    """The agent's :class:`~flowergraph.methods.fedgraph.maths.DDPGConfig` from a run's ``fedgraph.*`` keys."""
    from .maths import UPDATE_RULES, DDPGConfig

    o = s.of("fedgraph")
    return DDPGConfig(
        episode_rounds=o.episode_rounds,
        pca_components=o.pca_components,
        noise_min=o.noise_min,
        **UPDATE_RULES[o.agent_update],
    )


def _strategy(args: StrategyArgs) -> "Strategy":
    from .server import FedGraphStrategy
    from ..node import node_server_evaluate

    s = args.settings
    o, n = s.of("fedgraph"), s.of("node")
    ddpg = ddpg_config_of(s)
    return FedGraphStrategy(
        sharing=o.sharing,
        sampling=o.sampling,
        agent=o.agent,
        staleness=o.staleness,
        num_convs=n.layers,
        batch_size=o.batch_size,
        prob=o.prob,
        ddpg=ddpg,
        kappa_range=(o.kappa_min, o.kappa_max),
        p_min=o.p_min,
        episode_reset=o.episode_reset,
        target_accuracy=o.target_accuracy,
        omega=o.omega,
        alpha=o.alpha,
        beta=o.beta,
        round_time=o.round_time,
        test_fn=node_server_evaluate(s) if o.agent == "ddpg" else None,
        exchange=o.exchange,
        local_steps=o.local_steps,
        network=o.network,
        seconds_per_mac=o.seconds_per_mac or None,
        seconds_per_step=None if o.seconds_per_step < 0 else o.seconds_per_step,
        **args.common(),
    )


def _client(args: ClientArgs) -> "Client":
    from .client import FedGraphClient
    from ..node import model_kwargs

    s = args.settings
    o = s.of("fedgraph")
    return FedGraphClient(
        _data(args),
        partition_id=args.partition_id,
        train_config=train_config_of(s),
        model_kwargs=model_kwargs(s),
        seed=s.seed,
        cut_norm=o.cut_norm,
        state=args.state,
        cache=args.cache,
    )


FEDGRAPH = register(
    Method(
        name="fedgraph",
        summary="FedGraph (Chen et al., IEEE TPDS): cross-client graph convolution on hidden "
        "embeddings relayed by the server, per-client sampling policies chosen by a DDPG agent",
        tasks=("node",),
        build_strategy=_strategy,
        build_client=_client,
        options=OPTIONS,
        check=_check,
        stateful_clients=True,
        summable_updates=False,  # the agent observes every client's weights (its state is their PCA): no secure sums
        preflight=_preflight,
        paper="Chen et al., FedGraph, IEEE TPDS 2022, doi:10.1109/TPDS.2021.3125565, arXiv:2111.01370",
    )
)

__all__ = ["FEDGRAPH", "FedGraphOptions", "client_graph_of"]
