"""flowergraph's methods as Flower Message-API strategies, one class per method (public API)::

    from flowergraph.serverapp import FedGCN, NodeTask

    strategy = FedGCN(hops=2, task=NodeTask(lr=0.5))
    result = strategy.start(grid=grid, num_rounds=3)

Every class is a ``flwr.serverapp.strategy.Strategy`` (:class:`GraphStrategy`) whose keyword arguments are typed and
documented; ``task=`` takes the task's settings (:class:`NodeTask`, :class:`GraphTask`, :class:`LinkTask`). Its
clients are flowergraph's handlers (:func:`flowergraph.app.message_client.client_app`), configured by what the
strategy sends. Names are imported on first use, so ``import flowergraph.serverapp`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from ..methods.graph import GraphTask as GraphTask
    from ..methods.link import LinkTask as LinkTask
    from ..methods.node import NodeTask as NodeTask
    from .methods import (
        ASFGNN as ASFGNN,
        ASFGNNCentralized as ASFGNNCentralized,
        FLAGCNS as FLAGCNS,
        STRATEGIES as STRATEGIES,
        Centralized as Centralized,
        FedAvg as FedAvg,
        FedGCN as FedGCN,
        FedGraph as FedGraph,
        FedPer as FedPer,
        FedProx as FedProx,
        FedStar as FedStar,
        GCFL as GCFL,
        Local as Local,
    )
    from .strategy import GraphStrategy as GraphStrategy

_EXPORTS = {
    "GraphStrategy": "strategy",
    "FedAvg": "methods",
    "FedProx": "methods",
    "FedPer": "methods",
    "GCFL": "methods",
    "Centralized": "methods",
    "Local": "methods",
    "FedGCN": "methods",
    "FedStar": "methods",
    "ASFGNN": "methods",
    "ASFGNNCentralized": "methods",
    "FLAGCNS": "methods",
    "FedGraph": "methods",
    "STRATEGIES": "methods",
    "NodeTask": "flowergraph.methods.node",
    "GraphTask": "flowergraph.methods.graph",
    "LinkTask": "flowergraph.methods.link",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
