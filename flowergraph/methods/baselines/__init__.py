"""The baseline methods FedAvg, FedProx and FedPer, registered once for every task that has a generic client
(``Task.baseline_client``):

* ``fedavg``: sample-weighted federated averaging of the whole shared model (McMahan et al., 2017);
* ``fedprox``: FedAvg with the proximal term ``mu/2 ||w - w_global||^2`` in local training (Li et al., 2020);
* ``fedper``: FedAvg of all but the output layer, which stays on each client (Arivazhagan et al., 2019);

On node classification the model is the node task's GCN/GraphSAGE/GAT (``node.*``); on link prediction the link
task's GCN/GraphSAGE encoder with an inner-product decoder (``link.*``); on graph classification it
is FedStar's GIN baseline (``graph.*``), so ``method=fedprox`` on CHEM is FedStar's FedProx row. (The old spelling
``method=fedstar`` with ``fedstar.variant=fedavg|fedprox|fedper|gcfl`` was removed in 0.3: it is refused naming the
method.)
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING, Any, Callable

from ...settings.options import Options, at_least, option, options_of
from ..registry import Client, ClientArgs, Method, register, Sharing, StrategyArgs

if TYPE_CHECKING:  # pragma: no cover
    from ...strategies.base import FederatedStrategy as Strategy

    from ...settings import RunSettings

BASELINES = ("fedavg", "fedprox", "fedper", "gcfl")
TASKS = ("node", "graph", "link")


def baseline_client_for(baseline: str) -> Callable[[ClientArgs], "Client"]:
    """The client builder of a baseline on any task with a generic client (``Task.baseline_client``): the task's
    client with the baseline's sharing (also gcfl's, centralized's and local's builder)."""

    def build(args: ClientArgs) -> "Client":
        task = args.task
        if task.baseline_client is None:
            from ...errors import ConfigError

            raise ConfigError(
                f"method {baseline!r} needs the task's generic client, which task {task.name!r} does not provide"
            )
        mu = args.settings["fedprox.mu"] if baseline == "fedprox" else 0.0
        return task.baseline_client(args, Sharing(baseline, mu))

    return build


def generic_stateful(s: "RunSettings") -> bool:
    return bool(s.task_info.baseline_stateful)


def averaging_strategy(args: StrategyArgs) -> "Strategy":
    """Weighted averaging with the run's weighting (every averaging method's server side)."""

    from ...strategies.weighted import WeightedAveraging

    return WeightedAveraging(weighting=args.settings.weighting, **args.common())


def _no_server_model(s: "RunSettings") -> Callable[..., Any]:
    from ...errors import ConfigError

    raise ConfigError(
        "server-eval=true: fedper's server holds no output layer (it stays on each client), so there is "
        "no global model to evaluate; set server-eval=false"
    )


@dataclass(kw_only=True, eq=False)
class FedProxOptions(Options):
    """FedProx's hyper-parameter: the run-config key ``fedprox.mu`` and the keyword argument of
    :class:`flowergraph.serverapp.FedProx`."""

    mu: float = option(0.01, "Proximal weight mu.", check=at_least(0.0))


FEDAVG = register(
    Method(
        name="fedavg",
        summary="sample-weighted federated averaging of the whole model (node classification: the "
        "node task's GCN/GraphSAGE/GAT, FedGCN's 0-hop, cross-client edges dropped; graph classification: a GIN)",
        tasks=TASKS,
        build_strategy=averaging_strategy,
        build_client=baseline_client_for("fedavg"),
        stateful_clients=generic_stateful,
        paper="McMahan et al., FedAvg, AISTATS 2017, arXiv:1602.05629",
    )
)
FEDPROX = register(
    Method(
        name="fedprox",
        summary="FedAvg with a proximal term mu/2 ||w - w_global||^2 in local training",
        tasks=TASKS,
        build_strategy=averaging_strategy,
        build_client=baseline_client_for("fedprox"),
        stateful_clients=generic_stateful,
        options=options_of(FedProxOptions, "fedprox"),
        paper="Li et al., FedProx, MLSys 2020, arXiv:1812.06127",
    )
)
FEDPER = register(
    Method(
        name="fedper",
        summary="FedAvg of all but the output layer, which stays on each client",
        tasks=TASKS,
        build_strategy=averaging_strategy,
        build_client=baseline_client_for("fedper"),
        stateful_clients=True,
        server_evaluate=_no_server_model,
        paper="Arivazhagan et al., FedPer, arXiv:1912.00818",
    )
)
