"""Client side: flowergraph's clients (plain Python, no Flower type: :class:`Client`), wrappers and per-client
persistent state (public API).

    from flowergraph.clients import NodeClassificationClient, ClientState

* :class:`Client`: what every flowergraph client is (``get_properties``, ``get_parameters``, ``fit``,
  ``evaluate`` over numpy arrays and dicts); :class:`FlowergraphClient`: its base with identity and named phases;
* :class:`NodeClassificationClient` (weighted averaging), :class:`NoOpClient`; each method's own client is in its
  folder (``flowergraph.methods.<name>.client``: :class:`flowergraph.methods.fedgcn.client.FedGCNClient`, ...);
* wrappers: :class:`ClientWrapper`, :class:`FaultInjectingClient`, :class:`StateCheckpoints`,
  :class:`DPUpdates` (client-side DP clipping / local DP), :class:`SecureUpdates` (SecAgg+ weights, CKKS
  encryption of the update);
* :class:`TrainConfig`: local training settings the node clients take;
* :class:`ClientState`: typed access to a node's ``context.state`` (arrays, values, torch modules, optimizers,
  RNG), and its files at checkpoints.

Names are imported on first use, so ``import flowergraph.clients`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .base import (
        Client as Client,
        ClientWrapper as ClientWrapper,
        FederatedClient as FederatedClient,
        FlowergraphClient as FlowergraphClient,
        PhaseHandler as PhaseHandler,
        StateCheckpoints as StateCheckpoints,
    )
    from .faults import FaultInjectingClient as FaultInjectingClient, InjectedFault as InjectedFault
    from ..tasks.training import TrainConfig as TrainConfig
    from .node import NoOpClient as NoOpClient, NodeClassificationClient as NodeClassificationClient
    from .privacy import DPUpdates as DPUpdates
    from .secure import SecureUpdates as SecureUpdates
    from .state import ClientState as ClientState

_EXPORTS = {
    "Client": "base",
    "FlowergraphClient": "base",
    "FederatedClient": "base",
    "ClientWrapper": "base",
    "StateCheckpoints": "base",
    "PhaseHandler": "base",
    "NodeClassificationClient": "node",
    "NoOpClient": "node",
    "TrainConfig": "flowergraph.tasks.training",
    "FaultInjectingClient": "faults",
    "InjectedFault": "faults",
    "ClientState": "state",
    "DPUpdates": "privacy",
    "SecureUpdates": "secure",
}
__all__ = sorted(_EXPORTS)  # the one table: _EXPORTS (tests/test_typing.py holds the TYPE_CHECKING imports to it)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
