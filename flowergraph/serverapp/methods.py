"""One Strategy class per method: typed keyword arguments (the federation's, ``task=``, the method's own), Flower's
``start()``. Their arguments are documented in each class's docstring, made from the fields' help texts (the same
texts as the run-config keys in docs/configuration.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from flwr.serverapp.strategy import FedAvg as FlowerFedAvg, FedProx as FlowerFedProx

from ..methods.asfgnn import ASFGNNOptions
from ..methods.baselines import FedProxOptions, GCFLOptions
from ..methods.fedgcn import FedGCNOptions
from ..methods.fedgraph import FedGraphOptions
from ..methods.fedstar import FedStarOptions
from ..methods.flagcns import FLAGCNSOptions
from ..methods.link import LinkTask
from ..settings.keys import FederationOptions
from .strategy import GraphStrategy


def _default(name: str, value: Any) -> Any:
    """Federation field ``name`` with another default for one class (its help text and checks unchanged)."""
    f = FederationOptions.__dataclass_fields__[name]
    return dataclasses.field(default=value, metadata=f.metadata)


class _FlowerBase:
    """Flower's own strategy of the same method, initialised with the arguments both have, so that a flowergraph
    FedAvg is a Flower ``FedAvg`` to code that asks (``isinstance``) and reports Flower's attributes."""

    def _init_flower(self, flower_cls: type, **extra: Any) -> None:
        flower_cls.__init__(
            self,
            fraction_train=self.fraction_train,  # type: ignore[attr-defined]
            fraction_evaluate=self.fraction_evaluate,  # type: ignore[attr-defined]
            min_train_nodes=1,
            min_evaluate_nodes=1,
            min_available_nodes=1,
            **extra,
        )


class FedAvg(GraphStrategy, FlowerFedAvg, _FlowerBase):
    """Federated averaging (McMahan et al., AISTATS 2017) of the task's whole model: on node classification the
    node task's GCN/GraphSAGE/GAT on each client's subgraph (cross-client edges dropped), on graph classification
    a GIN. Updates are weighted by ``weighting`` and combined by ``aggregator`` (mean, or a robust rule).

    Example::

        strategy = FedAvg(fraction_train=0.5, task=NodeTask(lr=0.5))
        result = strategy.start(grid=grid, num_rounds=3)
    """

    method = "fedavg"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._init_flower(FlowerFedAvg)


class FedProx(GraphStrategy, FedProxOptions, FlowerFedProx, _FlowerBase):
    """FedProx (Li et al., MLSys 2020): FedAvg with the proximal term ``mu/2 ||w - w_global||^2`` in local
    training."""

    method = "fedprox"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._init_flower(FlowerFedProx, proximal_mu=self.mu)


class FedPer(GraphStrategy):
    """FedPer (Arivazhagan et al., 2019): FedAvg of all but the output layer, which stays on each client."""

    method = "fedper"


class GCFL(GraphStrategy, GCFLOptions):
    """GCFL (Xie et al., NeurIPS 2021): clients clustered by the similarity of their updates, one model per
    cluster; a cluster splits when its mean update is small (``eps1``) and its largest is large (``eps2``)."""

    method = "gcfl"


class Centralized(GraphStrategy):
    """The centralized reference: one client holds the whole graph and trains the task's model on it (node
    classification)."""

    method = "centralized"


class Local(GraphStrategy):
    """Each silo alone (link prediction): every client trains and keeps its own model; the server's average is
    not used by anyone. The baseline a federation has to beat. Use it with ``task=LinkTask(...)``."""

    method = "local"
    task: LinkTask | None = dataclasses.field(
        default_factory=LinkTask, metadata={"doc": "The link task's settings (the only task this method has)."}
    )


class FedGCN(GraphStrategy, FedGCNOptions):
    """FedGCN (Yao et al., NeurIPS 2023): before training, one exchange of neighbour-feature aggregations through
    the server (0, 1 or 2 hops; summed under CKKS with ``he=True``, the server holding no key), then federated
    rounds of a 2-layer GCN on them (2 hops: exactly the centralized GCN's first layer).

    Example::

        strategy = FedGCN(hops=2)
        result = strategy.start(grid=grid, num_rounds=3)
    """

    method = "fedgcn"


class FedStar(GraphStrategy, FedStarOptions):
    """FedStar (Tan et al., AAAI 2023): graph classification whose structure encoder (structural embeddings and
    its GIN channel) is averaged across clients while each client keeps its feature channel."""

    method = "fedstar"
    dataset: str = _default("dataset", "CHEM")


class ASFGNN(GraphStrategy, ASFGNNOptions):
    """ASFGNN (Zheng et al.): separated federated GNN (SFGNN): each client keeps its GraphSAGE, the discriminator
    is shared and mixed into each client's with the Jensen-Shannon weight; hyper-parameters tuned by SMAC over
    federated trials. ``variant`` selects its baselines FL and SP."""

    method = "asfgnn"
    dataset: str = _default("dataset", "Cora")
    num_clients: int | None = dataclasses.field(
        default=2,
        metadata={"doc": "The data owners: 2 in the paper's label and graph settings (setting='disjoint': 2 or more)."},
    )


class ASFGNNCentralized(GraphStrategy, ASFGNNOptions):
    """ASFGNN's centralized baseline CM: one client holds the union of the data owners' graphs (the ``asfgnn.*``
    keys as for :class:`ASFGNN`)."""

    method = "asfgnn-cm"
    prefix = "asfgnn"
    dataset: str = _default("dataset", "Cora")
    num_clients: int | None = dataclasses.field(
        default=2,
        metadata={"doc": "The data owners: 2 in the paper's label and graph settings (setting='disjoint': 2 or more)."},
    )


class FLAGCNS(GraphStrategy, FLAGCNSOptions):
    """FL-AGCNS (Wang et al.): federated graph architecture search: a SuperNet trained by the clients, an
    evolutionary search over its sub-networks (FEO), then federated retraining of the chosen architecture. Its
    schedule fixes the rounds (search + retraining): :meth:`start` computes them."""

    method = "flagcns"
    dataset: str = _default("dataset", "Cora")


class FedGraph(GraphStrategy, FedGraphOptions):
    """FedGraph (Chen et al., IEEE TPDS): clients train on sampled neighbourhoods whose cross-client rows the server
    relays (embeddings of the owners' current models), with the sampling policy chosen each round by a DDPG agent
    rewarded by accuracy and time."""

    method = "fedgraph"
    dataset: str = _default("dataset", "Cora")


STRATEGIES: tuple[type[GraphStrategy], ...] = (
    FedAvg,
    FedProx,
    FedPer,
    GCFL,
    Centralized,
    Local,
    FedGCN,
    FedStar,
    ASFGNN,
    ASFGNNCentralized,
    FLAGCNS,
    FedGraph,
)
