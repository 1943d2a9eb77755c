"""FedGCN as a Flower Message-API Strategy (public API: :class:`flowergraph.serverapp.FedGCN`)."""

from __future__ import annotations

from ...serverapp.strategy import GraphStrategy
from . import FedGCNOptions


class FedGCN(GraphStrategy, FedGCNOptions):
    """FedGCN (Yao et al., NeurIPS 2023): before training, one exchange of neighbour-feature aggregations through
    the server (0, 1 or 2 hops; summed under CKKS with ``he=True``, the server holding no key), then federated
    rounds of a 2-layer GCN on them (2 hops: exactly the centralized GCN's first layer).

    Example::

        strategy = FedGCN(hops=2)
        result = strategy.start(grid=grid, num_rounds=3)
    """

    method = "fedgcn"
