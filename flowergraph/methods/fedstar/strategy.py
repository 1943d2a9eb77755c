"""FedStar as a Flower Message-API Strategy (public API: :class:`flowergraph.serverapp.FedStar`)."""

from __future__ import annotations

from ...serverapp.strategy import GraphStrategy, field_default
from . import FedStarOptions


class FedStar(GraphStrategy, FedStarOptions):
    """FedStar (Tan et al., AAAI 2023): graph classification whose structure encoder (structural embeddings and
    its GIN channel) is averaged across clients while each client keeps its feature channel."""

    method = "fedstar"
    dataset: str = field_default("dataset", "CHEM")
