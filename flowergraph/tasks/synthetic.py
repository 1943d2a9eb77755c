"""A contextual stochastic block model (CSBM): the built-in node-classification graph that needs no download.

Model (Deshpande et al., 2018, "Contextual stochastic block models", generalised to C classes):

* ``num_nodes`` nodes get labels 0..C-1 in near-equal blocks (then shuffled).
* An undirected edge joins two distinct nodes independently with probability ``p_in`` when they share a
  class and ``p_out`` otherwise. Expected degree: ``p_in * (n/C - 1) + p_out * n (C-1)/C``.
* Each class c has a mean direction ``m_c``: a random unit vector in R^d. Node features are
  ``x_i = sqrt(d) * signal * m_{y_i} + z_i`` with ``z_i ~ N(0, I_d)`` (unit variance per coordinate, so
  ``||z_i|| ~ sqrt(d)``). ``signal`` is the ratio of the class-mean norm to the noise norm: 0 makes features
  useless, large values make them separable without the graph.

Sampling is O(edges), not O(n^2): for every block pair the number of edges is drawn from its binomial
distribution and the endpoints uniformly within the blocks; duplicates and self loops are dropped (at
graph sizes where that matters, a fraction ~p of the draws). A 100,000-node graph takes about a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class CSBMParams:
    num_nodes: int = 2000
    num_classes: int = 5
    p_in: float = 0.02
    p_out: float = 0.002
    num_features: int = 32
    signal: float = 0.2

    def validate(self) -> None:
        if self.num_nodes < 2:
            raise ConfigError(f"synthetic-nodes must be >= 2, got {self.num_nodes}")
        if not 2 <= self.num_classes <= self.num_nodes:
            raise ConfigError(
                f"synthetic-classes must be in [2, synthetic-nodes={self.num_nodes}], got {self.num_classes}"
            )
        for key, value in (("synthetic-p-in", self.p_in), ("synthetic-p-out", self.p_out)):
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{key} must be a probability in [0, 1], got {value}")
        if self.num_features < 1:
            raise ConfigError(f"synthetic-features must be >= 1, got {self.num_features}")
        if self.signal < 0:
            raise ConfigError(f"synthetic-signal must be >= 0, got {self.signal}")


def _sample_block_pairs(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, p: float, same: bool):
    """Edges between node sets a and b (a == b when same): each possible pair present with probability p."""
    if p <= 0 or len(a) == 0 or len(b) == 0:
        return np.empty((2, 0), dtype=np.int64)
    pairs = len(a) * (len(a) - 1) // 2 if same else len(a) * len(b)
    m = rng.binomial(pairs, p)
    if m == 0:
        return np.empty((2, 0), dtype=np.int64)
    if p > 0.2:  # dense regime: sample the full Bernoulli matrix instead (exact, small graphs only)
        mask = rng.random((len(a), len(b))) < p
        if same:
            mask = np.triu(mask, k=1)
        ia, ib = np.nonzero(mask)
        return np.stack([a[ia], b[ib]])
    # Sparse regime: draw m endpoint pairs, then drop self loops/duplicates (a fraction ~p of them).
    src = a[rng.integers(0, len(a), size=m)]
    dst = b[rng.integers(0, len(b), size=m)]
    return np.stack([src, dst])


def make_csbm(params: CSBMParams, seed: int = 0):
    """Generate the CSBM graph; returns a ``torch_geometric.data.Data`` with x, y, edge_index (undirected,
    coalesced, both directions) and ``num_classes``. Masks are set later by the split."""
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, to_undirected

    params.validate()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xC5B1]))
    n, c, d = params.num_nodes, params.num_classes, params.num_features
    y = np.arange(n) % c
    rng.shuffle(y)
    blocks = [np.flatnonzero(y == k) for k in range(c)]

    edges = []
    for i in range(c):
        edges.append(_sample_block_pairs(rng, blocks[i], blocks[i], params.p_in, same=True))
        for j in range(i + 1, c):
            edges.append(_sample_block_pairs(rng, blocks[i], blocks[j], params.p_out, same=False))
    edge_index = torch.from_numpy(np.concatenate(edges, axis=1))
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = coalesce(to_undirected(edge_index, num_nodes=n), num_nodes=n)

    means = rng.standard_normal((c, d))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    x = np.sqrt(d) * params.signal * means[y] + rng.standard_normal((n, d))

    data = Data(
        x=torch.tensor(x, dtype=torch.float32), edge_index=edge_index, y=torch.from_numpy(y).to(torch.long), num_nodes=n
    )
    data.num_classes = c
    return data
