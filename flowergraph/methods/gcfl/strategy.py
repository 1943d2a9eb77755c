"""GCFL as a Flower Message-API Strategy (public API: :class:`flowergraph.serverapp.GCFL`)."""

from __future__ import annotations

from ...serverapp.strategy import GraphStrategy
from . import GCFLOptions


class GCFL(GraphStrategy, GCFLOptions):
    """GCFL (Xie et al., NeurIPS 2021): clients clustered by the similarity of their updates, one model per
    cluster; a cluster splits when its mean update is small (``eps1``) and its largest is large (``eps2``)."""

    method = "gcfl"
