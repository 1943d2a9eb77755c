"""Client side: flowergraph's NumPyClients, wrappers and per-client persistent state (public API).

    from flowergraph.clients import NodeClassificationClient, FedGCNClient, ClientState

* :class:`FlowergraphClient`: base of every flowergraph client (identity, named phases);
* :class:`NodeClassificationClient` (weighted averaging), :class:`FedGCNClient`, :class:`FedStarClient`,
  :class:`NoOpClient`;
* wrappers: :class:`ClientWrapper`, :class:`FaultInjectingClient`, :class:`StateCheckpoints`,
  :class:`DPUpdates` (client-side DP clipping / local DP), :class:`SecureUpdates` (SecAgg+ weights, CKKS
  encryption of the update);
* :class:`TrainConfig`: local training settings the node clients take;
* :class:`ClientState`: typed access to a node's ``context.state`` (arrays, values, torch modules, optimizers,
  RNG), and its files at checkpoints.

Names are imported on first use, so ``import flowergraph.clients`` stays cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "FlowergraphClient": "base", "ClientWrapper": "base", "StateCheckpoints": "base", "PhaseHandler": "base",
    "NodeClassificationClient": "node", "NoOpClient": "node", "FedGCNClient": "fedgcn",
    "FedStarClient": "fedstar", "TrainConfig": "flowergraph.tasks.training", "FaultInjectingClient": "faults",
    "InjectedFault": "faults", "ClientState": "state", "DPUpdates": "privacy", "SecureUpdates": "secure",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module = _EXPORTS[name]
        return getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
