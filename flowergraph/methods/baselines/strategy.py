"""The baselines and references as Flower Message-API Strategies (public API: :class:`flowergraph.serverapp.FedAvg`,
:class:`~flowergraph.serverapp.FedProx`, :class:`~flowergraph.serverapp.FedPer`,
:class:`~flowergraph.serverapp.Centralized`, :class:`~flowergraph.serverapp.Local`). FedAvg and FedProx are also
Flower's own classes of the same name."""

from __future__ import annotations

import dataclasses
from typing import Any

from flwr.serverapp.strategy import FedAvg as FlowerFedAvg, FedProx as FlowerFedProx

from ...serverapp.strategy import GraphStrategy
from ..link import LinkTask
from . import FedProxOptions


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
