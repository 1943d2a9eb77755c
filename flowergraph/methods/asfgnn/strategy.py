"""ASFGNN and its centralized baseline CM as Flower Message-API Strategies (public API:
:class:`flowergraph.serverapp.ASFGNN`, :class:`~flowergraph.serverapp.ASFGNNCentralized`)."""

from __future__ import annotations

import dataclasses

from ...serverapp.strategy import GraphStrategy, field_default
from . import ASFGNNOptions


class ASFGNN(GraphStrategy, ASFGNNOptions):
    """ASFGNN (Zheng et al.): separated federated GNN (SFGNN): each client keeps its GraphSAGE, the discriminator
    is shared and mixed into each client's with the Jensen-Shannon weight; hyper-parameters tuned by SMAC over
    federated trials. ``variant`` selects its baselines FL and SP."""

    method = "asfgnn"
    dataset: str = field_default("dataset", "Cora")
    num_clients: int | None = dataclasses.field(
        default=2,
        metadata={"doc": "The data owners: 2 in the paper's label and graph settings (setting='disjoint': 2 or more)."},
    )


class ASFGNNCentralized(GraphStrategy, ASFGNNOptions):
    """ASFGNN's centralized baseline CM: one client holds the union of the data owners' graphs (the ``asfgnn.*``
    keys as for :class:`ASFGNN`)."""

    method = "asfgnn-cm"
    prefix = "asfgnn"
    dataset: str = field_default("dataset", "Cora")
    num_clients: int | None = dataclasses.field(
        default=2,
        metadata={"doc": "The data owners: 2 in the paper's label and graph settings (setting='disjoint': 2 or more)."},
    )
