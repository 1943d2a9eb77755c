"""The federated graph for node-level methods: one global graph, K clients, disjoint node sets.

Client k holds (DESIGN.md, "The federated graph"):

* its own nodes (``global_ids``), their features, labels and split masks;
* the edges among its own nodes (``edge_index``, local indices 0..n_k-1, both directions);
* its **cross-client edges**: ``cross_edges[0]`` a local index of one of its nodes, ``cross_edges[1]`` the global
  id of a node owned by another client, ``cross_owner`` that client's id. It knows these edges exist, never
  the remote nodes' features.

Every directed edge (u, v) of the global graph appears exactly once over all clients: as an internal edge of
owner(u) when owner(u) == owner(v), else as a cross-client edge of owner(u).

Loaded and partitioned data is memoised per process (``functools.lru_cache``): Ray actors are reused across
rounds, so a client loads and partitions once, never per round. Every client's part is cut in one pass over the
global graph (:func:`cut_graph`: nodes and edges sorted by owner once, each client a slice), memoised per process
and (graph spec, partition spec) by :func:`graph_cut`; each client's :class:`ClientGraph` is built on first use
and kept with its cut, so a process serving any number of clients builds each one's data once, and holds at most
one more copy of the global graph's node data and edges per memoised cut.
"""

from __future__ import annotations

import functools
import threading
import uuid
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import ConfigError
from .datasets import dataset_info, node_dataset_from_pyg
from .partition import partition_nodes
from .splits import MaskedNodes, apply_split, parse_split
from .synthetic import CSBMParams, make_csbm


@dataclass(frozen=True)
class GraphSpec:
    """Which global graph and split: hashable, so it can key the per-process cache."""

    dataset: str = "synthetic"
    data_dir: str = ""
    split: str = "auto"
    seed: int = 0
    synthetic: CSBMParams = field(default_factory=CSBMParams)


@dataclass(frozen=True)
class PartitionSpec:
    partitioner: str = "dirichlet"
    num_clients: int = 3
    beta: float = 10000.0
    min_size: int = 10
    seed: int = 0


@dataclass(eq=False)  # identity hash: memoised per process and used as a cache key
class ClientGraph(MaskedNodes):
    """What client ``client_id`` holds. Tensors are CPU tensors; indices are int64."""

    client_id: int
    num_clients: int
    global_ids: torch.Tensor  # [n_k] global id of each local node
    x: torch.Tensor  # [n_k, d]
    y: torch.Tensor  # [n_k]
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    edge_index: torch.Tensor  # [2, E_int] local indices
    cross_edges: torch.Tensor  # [2, E_cross]: (local index, remote global id)
    cross_owner: torch.Tensor  # [E_cross] owner of the remote node
    num_global_nodes: int
    num_classes: int
    # A unique token per object: per-process caches key derived data (models bound to this graph, FedGCN's
    # extended graph) by it, never by id(), which a new object may reuse once this one is freed.
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def num_nodes(self) -> int:
        return int(self.global_ids.numel())

    def to_pyg(self):
        """The client's own subgraph as a PyG ``Data`` (cross-client edges left out)."""
        from torch_geometric.data import Data

        return Data(
            x=self.x,
            y=self.y,
            edge_index=self.edge_index,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
            num_nodes=self.num_nodes,
        )


@functools.lru_cache(maxsize=4)
def load_global_graph(spec: GraphSpec):
    """The global node-classification graph with split masks (memoised per process)."""
    info = dataset_info(spec.dataset)
    if info.task != "node":
        raise ConfigError(
            f"dataset {info.name!r} is a graph-classification dataset; node-level methods need "
            f"one of Cora, CiteSeer, PubMed, synthetic"
        )
    if info.family == "synthetic":
        data = make_csbm(spec.synthetic, seed=spec.seed)
    else:
        data = node_dataset_from_pyg(info.name, spec.data_dir or None)
    apply_split(data, parse_split(spec.split, info.family), seed=spec.seed)
    return data


@functools.lru_cache(maxsize=8)
def node_assignment(gspec: GraphSpec, pspec: PartitionSpec) -> np.ndarray:
    """``assignment[v]`` = owner of node v (memoised per process)."""
    data = load_global_graph(gspec)
    assignment = partition_nodes(
        pspec.partitioner,
        num_clients=pspec.num_clients,
        labels=data.y.numpy(),
        edge_index=data.edge_index.numpy(),
        num_nodes=int(data.num_nodes),
        beta=pspec.beta,
        min_size=pspec.min_size,
        seed=pspec.seed,
    )
    assignment.setflags(write=False)
    return assignment


def build_client_graph(data, assignment: np.ndarray, client_id: int, num_clients: int | None = None) -> ClientGraph:
    """Cut client ``client_id``'s part out of the global graph ``data`` (one client, not kept: :class:`GraphCut`
    does the cutting; for every client of a partition, cut once with :func:`graph_cut`)."""
    return GraphCut(data, assignment, num_clients).client(client_id, keep=False)


class GraphCut:
    """Every client's part of one global graph, cut in one pass (:func:`cut_graph`); ``client(k)`` builds client
    ``k``'s :class:`ClientGraph` on first use and returns that same object afterwards.

    Equal, array for array, to :func:`build_client_graph` for each client: nodes in increasing global id, internal
    and cross-client edges each in the global edge order (a stable sort by owner keeps both orders)."""

    def __init__(self, data, assignment: np.ndarray, num_clients: int | None = None) -> None:
        owner = torch.as_tensor(np.array(assignment, dtype=np.int64))
        n = int(data.num_nodes)
        if owner.numel() != n:
            raise ConfigError(f"the assignment has {owner.numel()} entries for a graph of {n} nodes")
        self.num_clients = int(num_clients or int(owner.max()) + 1)
        groups = max(self.num_clients, int(owner.max()) + 1 if n else 0)
        self.data, self.owner = data, owner
        # nodes by owner, each owner's in increasing global id (stable sort); local index = rank within owner
        self.nodes = torch.sort(owner, stable=True).indices
        node_counts = torch.bincount(owner, minlength=groups)
        self.node_start = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(node_counts, 0)])
        local = torch.empty(n, dtype=torch.long)
        local[self.nodes] = torch.arange(n) - self.node_start[owner[self.nodes]]
        # edges by (owner of the source, cross or not): per client its internal edges, then its cross edges, each
        # in the global edge order (stable sort)
        src, dst = data.edge_index
        key = owner[src] * 2 + (owner[src] != owner[dst]).long()
        order = torch.sort(key, stable=True).indices
        edge_counts = torch.bincount(key, minlength=2 * groups)
        self.edge_start = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(edge_counts, 0)])
        self.local_src, self.local_dst, self.dst = local[src[order]], local[dst[order]], dst[order]
        self._clients: dict[int, ClientGraph] = {}
        self._lock = threading.Lock()

    def client(self, client_id: int, *, keep: bool = True) -> ClientGraph:
        """Client ``client_id``'s data, built once per cut (``keep=False``: built afresh and not kept, for a caller
        that goes through the clients once, such as an export)."""
        if not 0 <= client_id < self.num_clients:
            raise ConfigError(f"partition-id {client_id} out of range [0, {self.num_clients - 1}]")
        with self._lock:
            graph = self._clients.get(client_id)
            if graph is None:
                graph = self._build(client_id)
                if keep:
                    self._clients[client_id] = graph
            return graph

    def clients(self) -> list[ClientGraph]:
        return [self.client(k) for k in range(self.num_clients)]

    def _build(self, k: int) -> ClientGraph:
        data = self.data
        own = self.nodes[int(self.node_start[k]) : int(self.node_start[k + 1])].clone()
        a, b, c = (int(self.edge_start[i]) for i in (2 * k, 2 * k + 1, 2 * k + 2))
        remote = self.dst[b:c].clone()
        return ClientGraph(
            client_id=k,
            num_clients=self.num_clients,
            global_ids=own,
            x=data.x[own],
            y=data.y[own],
            train_mask=data.train_mask[own],
            val_mask=data.val_mask[own],
            test_mask=data.test_mask[own],
            edge_index=torch.stack([self.local_src[a:b], self.local_dst[a:b]]),
            cross_edges=torch.stack([self.local_src[b:c], remote]),
            cross_owner=self.owner[remote],
            num_global_nodes=int(data.num_nodes),
            num_classes=int(data.num_classes),
        )


def cut_graph(data, assignment: np.ndarray, num_clients: int | None = None) -> GraphCut:
    """Every client's part of ``data`` under ``assignment`` in one pass over the graph (:class:`GraphCut`)."""
    return GraphCut(data, assignment, num_clients)


_CUT_LOCK = threading.Lock()


def graph_cut(gspec: GraphSpec, pspec: PartitionSpec) -> GraphCut:
    """The cut of the global graph under the partition (memoised per process; each client's data kept in it).
    One cut per process and specs even when threads ask at once: a client's data is one object per process."""
    with _CUT_LOCK:
        return _graph_cut(gspec, pspec)


@functools.lru_cache(maxsize=4)
def _graph_cut(gspec: GraphSpec, pspec: PartitionSpec) -> GraphCut:
    return cut_graph(load_global_graph(gspec), node_assignment(gspec, pspec), pspec.num_clients)


def client_graph(gspec: GraphSpec, pspec: PartitionSpec, client_id: int) -> ClientGraph:
    """Client ``client_id``'s data: a pure function of (graph spec, partition spec, client id), built once per
    process (:func:`graph_cut`)."""
    return graph_cut(gspec, pspec).client(client_id)
