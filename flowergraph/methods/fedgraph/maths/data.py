"""FedGraph's clients' data: the paper's synthesis with overlap, or the existing partitions (Flower-free).

**Synthesis** (paper Section 5.1): client i draws xi_i ~ Normal(0.8, var) (``var`` is the variance; the paper's
heterogeneity levels are 0.1, 0.5 and 1), clipped to ``xi_bounds`` (default [0.1, 1.0]; the paper names no
range), and takes round(xi_i N) nodes uniformly without replacement. Clients overlap; an overlapping node is a
distinct node per client (a *copy*), so the synthesised global graph G' has one node per (client, node) pair.
Copy ids: client 0's copies first (in increasing dataset id), then client 1's, ...; ``origin[c]`` is copy c's
dataset node id. Features, labels and split masks are the dataset node's (the split is the dataset's, applied
before synthesis: a test node is a test node in every client holding it, so no client trains on another's
test node).

Edges of G' (undirected, coalesced, no self loops), for every dataset edge {v, u}:

* internal: (i, v) - (i, u) for every client i holding both;
* cross-client: for a client i holding v but not u, one copy of u is its neighbour: (j, u) with j drawn
  uniformly among u's holders, once per (i, u) (so client i sees each dataset node as at most one remote node),
  and the edge is added in both directions (the owner j sees (i, v) as a remote neighbour of (j, u)). Where
  nobody holds u the edge is dropped.

So a client keeps every dataset edge of its nodes whose other end is held by anyone (the paper: "the edge
connections across clients are maintained according to the original graph"). The gap with a partition: a copy
that is chosen as the remote end of others' edges gains neighbours, so degrees in G' are not the dataset's
(``SynthesisedGraph.data()`` gives G' itself for centralised comparisons), and ``ClientGraph.global_ids`` are
copy ids of G', not dataset ids (map them with ``origin``). Without overlap (every node held once, e.g. all
xi small and a lucky draw) G' is the dataset graph restricted to the held nodes.

**Partitions**: :func:`client_graphs` with ``metis``, ``louvain`` (or ``dirichlet``, ``random``) is the existing
:func:`flowergraph.tasks.federated_graph.client_graph`: disjoint node sets, G' = the dataset graph.

**METIS blocks dealt to clients** (:func:`dealt_metis_assignment`, ``fedgraph.data=metis`` with
``fedgraph.parts-per-client`` m > 1): METIS cuts the graph into K m balanced parts, and the parts are dealt to the K
clients at random, m each (a seeded permutation). Each client then holds m METIS blocks (a block's nodes stay
together, as in METIS-K), while the cut between blocks of different clients grows with m: METIS into 5 parts cuts
7.3% of Cora's edges and 1.8% of CiteSeer's; dealt blocks of 80 parts (m = 16) cut ~31% on Cora, of 320 parts
(m = 64) ~37% on CiteSeer (the conf/fedgraph-*-metis5.toml presets).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ....errors import ConfigError
from ....tasks.federated_graph import (
    ClientGraph,
    GraphSpec,
    PartitionSpec,
    build_client_graph,
    client_graph,
    load_global_graph,
)
from ....tasks.partition import PARTITIONERS

DATA_SCHEMES = ("synthesis",) + tuple(p for p in PARTITIONERS if p != "none")
XI_MEAN = 0.8


@dataclass(eq=False)
class SynthesisedGraph:
    """The synthesised global graph G' and who holds which copy (module docstring)."""

    source: Any  # the dataset graph (PyG Data with x, y, masks, num_classes)
    edge_index: torch.Tensor  # [2, E'] over copy ids
    assignment: np.ndarray  # [N'] client of each copy
    origin: np.ndarray  # [N'] dataset node id of each copy
    xi: np.ndarray  # [K] fractions drawn (after clipping)

    @property
    def num_clients(self) -> int:
        return len(self.xi)

    @property
    def num_copies(self) -> int:
        return len(self.origin)

    def client(self, client_id: int) -> ClientGraph:
        """Client ``client_id``'s graph, cross-client edges to copies held by others."""
        from torch_geometric.data import Data

        n = self.num_copies
        src = self.source
        skeleton = Data(
            x=torch.empty((n, 0)),
            y=torch.zeros(n, dtype=torch.long),
            edge_index=self.edge_index,
            train_mask=torch.zeros(n, dtype=torch.bool),
            val_mask=torch.zeros(n, dtype=torch.bool),
            test_mask=torch.zeros(n, dtype=torch.bool),
            num_nodes=n,
        )
        skeleton.num_classes = int(src.num_classes)
        graph = build_client_graph(skeleton, self.assignment, client_id, self.num_clients)
        origin = torch.from_numpy(self.origin[graph.global_ids.numpy()])
        graph.x, graph.y = src.x[origin], src.y[origin]
        graph.train_mask, graph.val_mask, graph.test_mask = (
            src.train_mask[origin],
            src.val_mask[origin],
            src.test_mask[origin],
        )
        return graph

    def data(self):
        """G' as a PyG ``Data`` (features materialised for every copy: for centralised checks)."""
        from torch_geometric.data import Data

        o = torch.from_numpy(np.array(self.origin))
        src = self.source
        data = Data(
            x=src.x[o],
            y=src.y[o],
            edge_index=self.edge_index,
            train_mask=src.train_mask[o],
            val_mask=src.val_mask[o],
            test_mask=src.test_mask[o],
            num_nodes=self.num_copies,
        )
        data.num_classes = int(src.num_classes)
        return data


def synthesise(
    data,
    num_clients: int,
    var: float,
    seed: int = 0,
    xi_mean: float = XI_MEAN,
    xi_bounds: tuple[float, float] = (0.1, 1.0),
) -> SynthesisedGraph:
    """The paper's synthesis (module docstring): a pure function of (graph, clients, var, seed)."""
    if num_clients < 1:
        raise ConfigError(f"num-clients must be >= 1, got {num_clients}")
    if not (var >= 0 and np.isfinite(var)):
        raise ConfigError(f"var={var!r}: the variance of xi must be a finite number >= 0")
    lo, hi = xi_bounds
    if not 0.0 < lo <= hi <= 1.0:
        raise ConfigError(f"xi_bounds={xi_bounds!r}: need 0 < low <= high <= 1")
    n = int(data.num_nodes)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFED6]))
    xi = np.clip(rng.normal(xi_mean, np.sqrt(var), size=num_clients), lo, hi)
    sizes = np.maximum(1, np.rint(xi * n).astype(np.int64))
    members = [np.sort(rng.choice(n, size=int(s), replace=False)) for s in sizes]

    offsets = np.concatenate([[0], np.cumsum(sizes)])
    copy_of = np.full((num_clients, n), -1, dtype=np.int64)  # copy id of (client, node), -1 when not held
    for i, nodes in enumerate(members):
        copy_of[i, nodes] = offsets[i] + np.arange(len(nodes))
    held = copy_of >= 0
    holders_count = held.sum(axis=0)
    _, holder_client = np.nonzero(held.T)  # sorted by node, then client
    holders_ptr = np.concatenate([[0], np.cumsum(holders_count)])

    src, dst = data.edge_index.numpy()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    parts = []
    for i in range(num_clients):
        mine = held[i, src]
        s, d = src[mine], dst[mine]
        internal = held[i, d]
        parts.append(np.stack([copy_of[i, s[internal]], copy_of[i, d[internal]]]))
        cross = ~internal & (holders_count[d] > 0)
        s, d = s[cross], d[cross]
        if len(d):
            need = np.unique(d)  # each remote dataset node gets one copy for client i
            pick = holders_ptr[need] + rng.integers(0, holders_count[need])
            chosen = copy_of[holder_client[pick], need]
            remote = chosen[np.searchsorted(need, d)]
            a, b = copy_of[i, s], remote
            parts.append(np.stack([a, b]))
            parts.append(np.stack([b, a]))
    edges = np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), np.int64)
    total = int(offsets[-1])
    edges = np.unique(edges[0] * total + edges[1])
    edge_index = torch.from_numpy(np.stack([edges // total, edges % total]).astype(np.int64))
    assignment = np.repeat(np.arange(num_clients, dtype=np.int64), sizes)
    origin = np.concatenate(members).astype(np.int64)
    for arr in (assignment, origin):
        arr.setflags(write=False)
    return SynthesisedGraph(source=data, edge_index=edge_index, assignment=assignment, origin=origin, xi=xi)


@functools.lru_cache(maxsize=8)
def dealt_metis_assignment(gspec: GraphSpec, num_clients: int, parts_per_client: int, seed: int = 0) -> np.ndarray:
    """``assignment[v]``: METIS into ``num_clients * parts_per_client`` parts dealt at random to the clients,
    ``parts_per_client`` each (module docstring; memoised per process)."""
    from ....tasks.partition import metis_partition

    if parts_per_client < 1:
        raise ConfigError(f"parts-per-client must be >= 1, got {parts_per_client}")
    data = load_global_graph(gspec)
    parts = metis_partition(data.edge_index.numpy(), int(data.num_nodes), num_clients * parts_per_client, seed=seed)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x3E7D]))
    deal = rng.permutation(np.repeat(np.arange(num_clients, dtype=np.int64), parts_per_client))
    assignment = deal[parts]
    assignment.setflags(write=False)
    return assignment


def dealt_metis_graph(
    gspec: GraphSpec, num_clients: int, parts_per_client: int, seed: int, client_id: int
) -> ClientGraph:
    """Client ``client_id``'s graph under :func:`dealt_metis_assignment`."""
    assignment = dealt_metis_assignment(gspec, num_clients, parts_per_client, seed)
    return build_client_graph(load_global_graph(gspec), assignment, client_id, num_clients)


@functools.lru_cache(maxsize=8)
def synthesised_graph(gspec: GraphSpec, num_clients: int, var: float, seed: int = 0) -> SynthesisedGraph:
    """:func:`synthesise` on the dataset of ``gspec`` (memoised per process)."""
    return synthesise(load_global_graph(gspec), num_clients, var, seed)


def client_graphs(
    gspec: GraphSpec, scheme: str, num_clients: int, seed: int = 0, var: float = 0.1, beta: float = 10000.0
) -> list[ClientGraph]:
    """Every client's graph: ``synthesis`` (variance ``var``) or a partitioner (``metis``, ``louvain``, ...)."""
    if scheme == "synthesis":
        synth = synthesised_graph(gspec, num_clients, float(var), seed)
        return [synth.client(k) for k in range(num_clients)]
    if scheme not in DATA_SCHEMES:
        raise ConfigError(f"unknown data scheme {scheme!r}; valid choices: {', '.join(DATA_SCHEMES)}")
    pspec = PartitionSpec(partitioner=scheme, num_clients=num_clients, beta=beta, seed=seed)
    return [client_graph(gspec, pspec, k) for k in range(num_clients)]
