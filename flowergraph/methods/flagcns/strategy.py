"""FL-AGCNS as a Flower Message-API Strategy (public API: :class:`flowergraph.serverapp.FLAGCNS`)."""

from __future__ import annotations

from ...serverapp.strategy import GraphStrategy, field_default
from . import FLAGCNSOptions


class FLAGCNS(GraphStrategy, FLAGCNSOptions):
    """FL-AGCNS (Wang et al.): federated graph architecture search: a SuperNet trained by the clients, an
    evolutionary search over its sub-networks (FEO), then federated retraining of the chosen architecture. Its
    schedule fixes the rounds (search + retraining): :meth:`start` computes them."""

    method = "flagcns"
    dataset: str = field_default("dataset", "Cora")
