"""The legacy stack's adapter, client side (the server side is :mod:`flowergraph.app.loop`): a flowergraph
:class:`~flowergraph.clients.base.Client` as Flower's ``NumPyClient`` (``flwr.client``, which Flower 1.42 keeps under
``flwr.compat`` as a deprecated legacy component).

flowergraph's clients are plain Python (four methods over numpy arrays and dicts); the Message-API handlers call
them directly. Flower's legacy stack (``ClientApp(client_fn=...)``, the legacy strategies, SecAgg+) wants a
``NumPyClient``: :func:`legacy_client` wraps one, changing nothing it answers. In your own legacy ClientApp::

    def client_fn(context):
        return legacy_client(NodeClassificationClient(graph, TrainConfig(), {"kind": "gcn"}))
"""

from __future__ import annotations

from typing import Any

from flwr.client import Client as FlowerClient, NumPyClient
from flwr.client.mod import secaggplus_mod

__all__ = ["LegacyClient", "legacy_client", "secaggplus_mod"]  # secaggplus_mod: Flower's, for the ClientApp

from .. import wire
from ..clients.base import Client


class LegacyClient(NumPyClient):
    """``client`` (a flowergraph :class:`~flowergraph.clients.base.Client`) as a ``NumPyClient``."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        return wire.to_legacy(self.client.get_properties(config))  # a phase reply's arrays as npy bytes

    def get_parameters(self, config: dict[str, Any]) -> list:
        return self.client.get_parameters(config)

    def fit(self, parameters: list, config: dict[str, Any]) -> tuple:
        return self.client.fit(parameters, config)

    def evaluate(self, parameters: list, config: dict[str, Any]) -> tuple:
        return self.client.evaluate(parameters, config)


def legacy_client(client: Client) -> FlowerClient:
    """``client`` as the ``flwr.client.Client`` a legacy ``client_fn`` returns."""
    return LegacyClient(client).to_client()
