"""FedGraph as a Flower Message-API Strategy (public API: :class:`flowergraph.serverapp.FedGraph`)."""

from __future__ import annotations

from ...serverapp.strategy import GraphStrategy, field_default
from . import FedGraphOptions


class FedGraph(GraphStrategy, FedGraphOptions):
    """FedGraph (Chen et al., IEEE TPDS): clients train on sampled neighbourhoods whose cross-client rows the server
    relays (embeddings of the owners' current models), with the sampling policy chosen each round by a DDPG agent
    rewarded by accuracy and time."""

    method = "fedgraph"
    dataset: str = field_default("dataset", "Cora")
