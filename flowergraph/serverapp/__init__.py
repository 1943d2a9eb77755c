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
    from ..methods.baselines.strategy import (
        FedAvg as FedAvg,
        FedProx as FedProx,
        FedPer as FedPer,
        Centralized as Centralized,
        Local as Local,
    )
    from ..methods.gcfl.strategy import GCFL as GCFL
    from ..methods.fedgcn.strategy import FedGCN as FedGCN
    from ..methods.fedstar.strategy import FedStar as FedStar
    from ..methods.asfgnn.strategy import ASFGNN as ASFGNN, ASFGNNCentralized as ASFGNNCentralized
    from ..methods.flagcns.strategy import FLAGCNS as FLAGCNS
    from ..methods.fedgraph.strategy import FedGraph as FedGraph
    from .methods import STRATEGIES as STRATEGIES
    from .strategy import GraphStrategy as GraphStrategy

_EXPORTS = {
    "GraphStrategy": "strategy",
    "FedAvg": "flowergraph.methods.baselines.strategy",
    "FedProx": "flowergraph.methods.baselines.strategy",
    "FedPer": "flowergraph.methods.baselines.strategy",
    "GCFL": "flowergraph.methods.gcfl.strategy",
    "Centralized": "flowergraph.methods.baselines.strategy",
    "Local": "flowergraph.methods.baselines.strategy",
    "FedGCN": "flowergraph.methods.fedgcn.strategy",
    "FedStar": "flowergraph.methods.fedstar.strategy",
    "ASFGNN": "flowergraph.methods.asfgnn.strategy",
    "ASFGNNCentralized": "flowergraph.methods.asfgnn.strategy",
    "FLAGCNS": "flowergraph.methods.flagcns.strategy",
    "FedGraph": "flowergraph.methods.fedgraph.strategy",
    "STRATEGIES": "methods",
    "NodeTask": "flowergraph.methods.node",
    "GraphTask": "flowergraph.methods.graph",
    "LinkTask": "flowergraph.methods.link",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
