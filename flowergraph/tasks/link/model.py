"""The link predictor: a GNN encoder (PyG's GCN or GraphSAGE, the node task's builders and keys) and a
dot-product decoder (Flower-free).

``encode(x, edge_index)`` gives node embeddings ``z`` ([n, out]: ``layers`` graph convolutions, ``hidden``
units, ReLU and dropout between them, none after the last); ``decode(z, pairs)`` the logit of each pair,
``<z_u, z_v>``; the edge probability is its sigmoid. With the defaults (GCN, 2 layers, 128 hidden, 64 out, no
dropout) it is PyG's ``examples/link_pred.py`` model.
"""

from __future__ import annotations

import torch
from torch import nn

from ..models import check_model_args, pyg_model

ENCODERS = ("gcn", "sage")


def dot(z_src: torch.Tensor, z_dst: torch.Tensor) -> torch.Tensor:
    """The decoder: row-wise inner products ``<z_src[i], z_dst[i]>`` (logits)."""
    return (z_src * z_dst).sum(dim=-1)


class LinkPredictor(nn.Module):
    """GNN encoder + dot-product decoder. ``encoder`` in :data:`ENCODERS`; ``seed`` makes the initial weights a
    pure function of it; ``cached`` (GCN) keeps the normalised adjacency of the first graph seen (a model bound to
    one graph only). ValueError names a bad argument and its valid range."""

    def __init__(
        self,
        in_dim: int,
        encoder: str = "gcn",
        hidden: int = 128,
        out: int = 64,
        layers: int = 2,
        dropout: float = 0.0,
        seed: int | None = None,
        cached: bool = False,
    ) -> None:
        super().__init__()
        check_model_args(encoder, ENCODERS, hidden=hidden, layers=layers, dropout=dropout)
        if out < 1:
            raise ValueError(f"out (the embedding width) must be >= 1, got {out}")
        from torch_geometric.nn import models as pyg_models

        base, extra = pyg_model(encoder, cached)
        self.kind = encoder

        def build() -> nn.Module:
            return getattr(pyg_models, base)(
                in_channels=in_dim,
                hidden_channels=hidden,
                num_layers=layers,
                out_channels=out,
                dropout=dropout,
                **extra,
            )

        if seed is None:
            self.encoder = build()
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self.encoder = build()

    def encode(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, edge_index)

    def decode(self, z: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """The logits of the pairs ``pairs`` ([2, m], indices into ``z``)."""
        return dot(z[pairs[0]], z[pairs[1]])

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x, edge_index), pairs)
