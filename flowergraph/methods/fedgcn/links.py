"""FedGCN's neighbour aggregation as the link encoder's input (Flower-free).

FedGCN (Yao et al., NeurIPS 2023; :mod:`flowergraph.methods.fedgcn.maths`) shares, before training, the normalised
neighbour-feature sums ``(Â X)_u`` of the rows a client needs, summed over every owner's contributions. What it
shares does not depend on the task, so on ``task=link`` the same exchange runs over the graph G of the link task's
own edges that a client may pass messages over: every client's message-passing (training) edges plus the **known**
cross-client edges (``link.cross-known-fraction``; :func:`flowergraph.tasks.link.data.known_cross`). Validation,
test and cross-client test edges are never in G. The encoder is the link task's 2-layer GCN, computed exactly as on G by
:func:`flowergraph.methods.fedgcn.maths.fedgcn_propagate` (2-hop: exact; 1-hop: first layer exact, second over the
client's own subgraph, as for node classification); the decoder is unchanged.

Without known cross edges (``cross-known-fraction=0``, the default) G has no cross-client edge and every 1/2-hop
client computes exactly the local GCN: FedGCN is then FedAvg (the launcher refuses that combination).
"""

from __future__ import annotations

import threading
import weakref
from typing import Sequence

import numpy as np
import torch

from .maths import ExtendedGraph, contributions, extended_graph, fedgcn_propagate, server_sum
from ...tasks.federated_graph import ClientGraph
from ...tasks.link.data import ClientLinkData
from ...tasks.link.model import LinkPredictor
from ...tasks.link.training import Encode

_VIEWS: "weakref.WeakKeyDictionary[ClientLinkData, ClientGraph]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def fedgcn_graph(data: ClientLinkData) -> ClientGraph:
    """The client's part of G as FedGCN's node-task client graph: its nodes and features, its message-passing edges
    as internal edges and its known cross edges as cross-client edges (no labels: the link task has none). One view
    per data object (held weakly by it), so FedGCN's per-process caches key it by one ``uid``."""
    with _LOCK:
        view = _VIEWS.get(data)
        if view is None:
            n = data.num_nodes
            none = torch.zeros(n, dtype=torch.bool)
            view = ClientGraph(
                client_id=data.client_id,
                num_clients=data.num_clients,
                global_ids=data.global_ids,
                x=data.x,
                y=torch.zeros(n, dtype=torch.long),
                train_mask=none,
                val_mask=none,
                test_mask=none,
                edge_index=data.edge_index,
                cross_edges=data.cross_known,
                cross_owner=data.cross_known_owner,
                num_global_nodes=data.num_global_nodes,
                num_classes=0,
            )
            _VIEWS[data] = view
        return view


def fedgcn_encode(ext: ExtendedGraph) -> Encode:
    """The embeddings of a client's own nodes from its exchanged aggregations: the link predictor's 2-layer GCN
    encoder on G (its weights, not PyG's ``forward``)."""

    def encode(model: LinkPredictor) -> torch.Tensor:
        return fedgcn_propagate(model.encoder, ext)

    return encode


def exchange(clients: Sequence[ClientLinkData], hops: int) -> dict[int, ExtendedGraph]:
    """FedGCN's plaintext exchange computed in one process (every client's contributions summed per row, each
    client given the rows it requests): each client's extended graph, by client id. What the strategy and the
    clients compute over messages; the server of a simulation uses it to embed every client for the cross-client
    test set."""
    views = [fedgcn_graph(c) for c in clients]
    parts = [contributions(v, hops) for v in views]
    rows, sums = server_sum([(p.ids, p.values) for p in parts])
    out: dict[int, ExtendedGraph] = {}
    for view, part in zip(views, parts):
        at = np.searchsorted(rows, part.request)
        out[view.client_id] = extended_graph(view, hops, part.request, sums[at] if len(at) else None)
    return out


def encoders(clients: Sequence[ClientLinkData], hops: int) -> dict[int, Encode]:
    """Every client's encoder on its exchanged aggregations (``hops`` 1 or 2), by client id: what the link task's
    server-side evaluation embeds with (:func:`flowergraph.methods.link.link_server_evaluate`)."""
    return {c: fedgcn_encode(ext) for c, ext in exchange(clients, hops).items()}
