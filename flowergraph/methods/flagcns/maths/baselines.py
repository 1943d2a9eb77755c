"""The fixed GNN baselines of the paper's Table 3 as the authors' code builds them.

The paper says its fixed baselines follow "the implementation details reported in their papers"; the authors'
code of the paper's time (github 21S003018/FL-AGCNS at d360d44, 2021-11, the last commit before the 2022 rework;
``external_models.py``, run by ``server.py --mode eval``) builds each as a small
PyG network of its own and retrains it like the searched architecture: FedSGD with the server's Adam (lr 0.02,
weight decay 5e-6), 50 epochs, the epoch with the best federated validation accuracy, 10 retrainings. Their
parameter counts on Cora are the paper's Table 3 column (GAT 0.092 M, SAGE 0.184 M, SGC 0.010 M, APPNP 0.092 M;
GCN 0.092 M against the table's 0.102 M). These are not the search space's codes
(:data:`~flowergraph.methods.flagcns.maths.space.BASELINES`: an input FC layer with an activation, two graph layers, an
output FC layer), which the benchmark also trains.

Structures (hidden sizes and activations as in the reference; no dropout):

* ``gcn``: GCNConv(F, 64) -> ReLU -> GCNConv(64, C) -> softmax (the loss is then the cross-entropy of the
  softmax, as the reference computes it). The 2022 rework drops the ReLU; Kipf and Welling's GCN has it.
* ``gat``: GATConv(F, 8, 8 heads, concatenated) -> ELU -> GATConv(64, C).
* ``sage``: SAGEConv(F, 64) -> sigmoid -> SAGEConv(64, C).
* ``sgc``: SGConv(F, C, K = 2).
* ``appnp``: Linear(F, 64) -> ReLU -> Linear(64, C) -> APPNP(K = 10, alpha = 0.1) -> log-softmax (K = 10 as in
  the APPNP paper and the 2021 code; the 2022 rework has K = 5).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError

REFERENCE_BASELINES = ("gcn", "gat", "sage", "sgc", "appnp")


class ReferenceBaseline(nn.Module):
    """One of :data:`REFERENCE_BASELINES`, called as ``net(x, edge_index)``."""

    def __init__(self, name: str, in_dim: int, num_classes: int):
        super().__init__()
        from torch_geometric import nn as gnn

        key = name.lower()
        if key not in REFERENCE_BASELINES:
            raise ConfigError(f"unknown reference baseline {name!r}; valid choices: {', '.join(REFERENCE_BASELINES)}")
        self.name = key
        hidden = 64
        if key == "gcn":
            self.conv1, self.conv2 = gnn.GCNConv(in_dim, hidden), gnn.GCNConv(hidden, num_classes)
        elif key == "gat":
            self.conv1 = gnn.GATConv(in_dim, 8, heads=8, concat=True)
            self.conv2 = gnn.GATConv(8 * 8, num_classes)
        elif key == "sage":
            self.conv1, self.conv2 = gnn.SAGEConv(in_dim, hidden), gnn.SAGEConv(hidden, num_classes)
        elif key == "sgc":
            self.conv1 = gnn.SGConv(in_dim, num_classes, K=2)
        else:  # appnp
            self.lin1, self.lin2 = nn.Linear(in_dim, hidden), nn.Linear(hidden, num_classes)
            self.propagate = gnn.APPNP(K=10, alpha=0.1)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if self.name == "gcn":
            return F.softmax(self.conv2(F.relu(self.conv1(x, edge_index)), edge_index), dim=-1)
        if self.name == "gat":
            return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)
        if self.name == "sage":
            return self.conv2(torch.sigmoid(self.conv1(x, edge_index)), edge_index)
        if self.name == "sgc":
            return self.conv1(x, edge_index)
        h = self.lin2(F.relu(self.lin1(x)))
        return F.log_softmax(self.propagate(h, edge_index), dim=-1)


def reference_baseline(name: str, in_dim: int, num_classes: int, seed: int = 0) -> ReferenceBaseline:
    """:class:`ReferenceBaseline` ``name`` initialised from ``seed`` (PyG's default initialisations), without
    touching the global random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ReferenceBaseline(name, in_dim, num_classes)
