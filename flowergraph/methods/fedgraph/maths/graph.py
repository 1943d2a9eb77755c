"""A client's view of the federated graph for FedGraph's cross-client graph convolution (paper eq. 2-3).

Notation. Client i owns nodes V_i (local indices 0..n-1, global ids ``graph.global_ids``). Its *remote
neighbours* are the nodes of other clients joined to one of its nodes by a cross-client edge (global ids
``remote_ids``, sorted, positions n..n+m-1 in every adjacency below). The global graph is undirected: when
client i has the cross edge (v, u) with u owned by j, client j has (u, v).

Two adjacencies per client, both rows = the client's own nodes (the convolution's targets), columns = its own
nodes and (second one only) its remote neighbours:

* **cut** (used by convolutions that do not share): internal edges only. Normalisation ``cut_norm``:
  ``"local"`` (default) ``Q(v,u) = (d'_v d'_u)^{-1/2}`` with d' = 1 + the degree inside the client's own
  subgraph, i.e. the GCN of the client's own subgraph; ``"global"`` keeps the global-graph weights
  ``(d_v d_u)^{-1/2}`` and just drops the remote terms (paper eq. 2 read literally).
* **full** (convolutions that share): internal and cross-client edges, ``Q(v,u) = (d_v d_u)^{-1/2}`` with
  d = 1 + the degree in the global graph: exactly the rows of the whole graph's ``Q = D~^{-1/2} A~ D~^{-1/2}``
  for the client's nodes. A client knows d_v for its own nodes (it knows all their edges); it learns d_u of
  its remote neighbours once, from their owners (:func:`degree_rows`), which is all the structure it needs.

Self loops (the I of A~ = A + I) are kept apart: ``Adjacency.self_weight[v] = Q(v, v) = 1/d_v``.

What crosses the server (always through :class:`Rows`: global ids + one row per id):

* once: owner j's degrees d_u of its boundary nodes, for the clients that have them as remote neighbours;
* for every sharing convolution k, every round: owner j's ``h^(k)(u) W^(k)`` for its boundary nodes u
  (see :func:`flowergraph.methods.fedgraph.maths.model.owner_rows`), never its features or its layer-1 inputs (except
  in the allShare ablation, whose first convolution shares ``x_u W^(0)``).

A *boundary* node is an own node with at least one cross-client edge; :func:`export_plan` says which boundary
nodes each other client needs (its remote neighbours owned by this client), :func:`request_plan` which rows this
client needs from each owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import torch

from ....errors import ConfigError
from ....tasks.federated_graph import ClientGraph
from ...fedgcn.maths import global_degrees

SHARING = ("fedgraph", "allshare", "nonshare")
CUT_NORMS = ("local", "global")


def check_sharing(sharing: str) -> str:
    if sharing not in SHARING:
        raise ConfigError(f"unknown sharing {sharing!r}; valid choices: {', '.join(SHARING)}")
    return sharing


def shared_convs(sharing: str, num_convs: int) -> tuple[bool, ...]:
    """Which convolutions (0 = the one reading the input features) aggregate remote neighbours.

    ``fedgraph``: every convolution but the first (paper eq. 2 for the first, eq. 3 from the second on);
    ``allshare``: all of them; ``nonshare``: none (cross-client edges ignored).
    """
    check_sharing(sharing)
    if num_convs < 1:
        raise ConfigError(f"num_convs must be >= 1, got {num_convs}")
    if sharing == "allshare":
        return (True,) * num_convs
    if sharing == "nonshare":
        return (False,) * num_convs
    return (False,) + (True,) * (num_convs - 1)


def exchange_convs(sharing: str, num_convs: int) -> tuple[int, ...]:
    """The convolutions whose inputs ``h^(k) W^(k)`` owners send every round, in the order they must be
    computed (a sharing convolution's rows depend on the received rows of the sharing convolutions below it)."""
    return tuple(k for k, s in enumerate(shared_convs(sharing, num_convs)) if s)


@dataclass(frozen=True)
class Rows:
    """Rows keyed by global node id, as they travel through the server: ``ids`` int64 [m] (sorted, unique) and
    ``values`` float [m, w]."""

    ids: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        ids = np.asarray(self.ids)
        values = np.asarray(self.values)
        if ids.ndim != 1 or values.ndim != 2 or len(ids) != len(values):
            raise ValueError(f"Rows needs ids [m] and values [m, w]; got ids {ids.shape}, values {values.shape}")
        if len(ids) and not np.all(np.diff(ids) > 0):
            raise ValueError("Rows ids must be sorted and unique")

    @property
    def width(self) -> int:
        return int(np.asarray(self.values).shape[1])

    @property
    def nbytes(self) -> int:
        return int(np.asarray(self.ids).nbytes + np.asarray(self.values).nbytes)

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, ids: np.ndarray) -> "Rows":
        """The rows of ``ids`` (sorted, unique, all present; KeyError names the absent ones)."""
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self.ids, ids)
        found = pos < len(self.ids)
        found[found] = np.asarray(self.ids)[pos[found]] == ids[found]
        if not found.all():
            raise KeyError(f"{int((~found).sum())} requested rows are absent (e.g. ids {ids[~found][:5].tolist()})")
        return Rows(ids=ids, values=np.asarray(self.values)[pos])


def merge_rows(parts: Iterable[Rows]) -> Rows:
    """One :class:`Rows` from several (the server's relay, or a receiver joining what came from each owner).
    An id sent twice must carry the same values (ValueError otherwise)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return Rows(ids=np.zeros(0, np.int64), values=np.zeros((0, 0), np.float32))
    widths = {p.width for p in parts if len(p)}
    if len(widths) > 1:
        raise ValueError(f"rows of different widths cannot be merged: {sorted(widths)}")
    width = widths.pop() if widths else parts[0].width
    ids = np.concatenate([np.asarray(p.ids, dtype=np.int64) for p in parts])
    values = np.concatenate([np.asarray(p.values).reshape(len(p), width) for p in parts])
    order = np.argsort(ids, kind="stable")
    ids, values = ids[order], values[order]
    dup = np.flatnonzero(np.diff(ids) == 0)
    if len(dup):
        if not np.array_equal(values[dup], values[dup + 1]):
            raise ValueError(f"ids {np.unique(ids[dup])[:5].tolist()} arrived with different values")
        keep = np.ones(len(ids), dtype=bool)
        keep[dup + 1] = False
        ids, values = ids[keep], values[keep]
    return Rows(ids=ids, values=values)


def boundary_nodes(graph: ClientGraph) -> torch.Tensor:
    """Local indices of own nodes with at least one cross-client edge, in increasing global id."""
    local = torch.unique(graph.cross_edges[0])
    return local[torch.argsort(graph.global_ids[local])]


def export_plan(graph: ClientGraph) -> dict[int, np.ndarray]:
    """Owner side: ``{requester client: global ids of own boundary nodes it needs (sorted)}``.

    Client j needs own node v when v has a cross-client edge to a node of j (the graph is undirected)."""
    src, owner = graph.cross_edges[0], graph.cross_owner
    plan: dict[int, np.ndarray] = {}
    for j in torch.unique(owner).tolist():
        plan[int(j)] = torch.unique(graph.global_ids[src[owner == j]]).numpy().astype(np.int64)
    return plan


def request_plan(graph: ClientGraph) -> dict[int, np.ndarray]:
    """Receiver side: ``{owner client: global ids of its nodes this client needs (sorted)}``."""
    dst, owner = graph.cross_edges[1], graph.cross_owner
    return {int(j): torch.unique(dst[owner == j]).numpy().astype(np.int64) for j in torch.unique(owner).tolist()}


def split_rows(rows: Rows, plan: Mapping[int, np.ndarray]) -> dict[int, Rows]:
    """Owner side: the part of ``rows`` each requester in ``plan`` (:func:`export_plan`) gets."""
    return {int(j): rows.select(ids) for j, ids in plan.items()}


def relay(uploads: Mapping[int, Mapping[int, Rows]]) -> dict[int, Rows]:
    """The server's relay: ``uploads[owner][requester]`` -> ``{requester: merged rows}``. Nothing is computed
    on the rows; the server only routes them."""
    inbox: dict[int, list[Rows]] = {}
    for parts in uploads.values():
        for requester, rows in parts.items():
            inbox.setdefault(int(requester), []).append(rows)
    return {j: merge_rows(parts) for j, parts in inbox.items()}


def degree_rows(graph: ClientGraph) -> Rows:
    """Owner side, once: d_u of the boundary nodes (ids sorted), to be split with :func:`split_rows` and
    :func:`export_plan` and relayed to the clients that have them as remote neighbours."""
    boundary = boundary_nodes(graph)
    return Rows(
        ids=graph.global_ids[boundary].numpy().astype(np.int64),
        values=global_degrees(graph)[boundary].numpy().reshape(-1, 1),
    )


@dataclass
class Adjacency:
    """One convolution's aggregation weights for the client's own nodes (CSR by target row).

    ``col`` < n: own source node; ``col`` >= n: remote neighbour ``col - n`` (position in ``remote_ids``).
    ``weight[e] = Q(v, u)`` for u != v, ``self_weight[v] = Q(v, v)``.
    """

    rowptr: torch.Tensor  # int64 [n + 1]
    col: torch.Tensor  # int64 [E]
    weight: torch.Tensor  # float64 [E]
    self_weight: torch.Tensor  # float64 [n]
    num_remote: int

    @property
    def num_own(self) -> int:
        return int(self.rowptr.numel() - 1)

    @property
    def degree(self) -> torch.Tensor:
        """|V(v)|: number of neighbours (self excluded) of each own node in this adjacency."""
        return self.rowptr[1:] - self.rowptr[:-1]

    def rows(self, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every edge of the target rows: ``(target position, edge index into col/weight)``."""
        starts = self.rowptr[targets]
        deg = self.rowptr[targets + 1] - starts
        t = torch.repeat_interleave(torch.arange(targets.numel()), deg)
        first = torch.cumsum(deg, 0) - deg
        edge = starts[t] + torch.arange(t.numel()) - first[t]
        return t, edge

    def column_sq_norms(self) -> torch.Tensor:
        """sum_v Q(v, u)^2 over own rows v, for every column u (own then remote), self loops included:
        FastGCN's importance q(u) up to normalisation, as far as this client sees the column."""
        out = torch.zeros(self.num_own + self.num_remote, dtype=torch.float64)
        out.index_add_(0, self.col, self.weight**2)
        out[: self.num_own] += self.self_weight**2
        return out


def _csr(n: int, rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor, width: int):
    order = torch.argsort(rows * width + cols)
    rows, cols, weights = rows[order], cols[order], weights[order]
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
    return rowptr, cols, weights


@dataclass(eq=False)
class ClientView:
    """What a client aggregates over: its graph, its remote neighbours and the two adjacencies (module docs)."""

    graph: ClientGraph
    remote_ids: torch.Tensor  # int64 [m], sorted global ids
    remote_owner: torch.Tensor  # int64 [m]
    degree: torch.Tensor  # float64 [n]: global d_v
    remote_degree: torch.Tensor | None  # float64 [m] or None (then only cut convolutions work)
    cut: Adjacency
    full: Adjacency | None
    cut_norm: str

    @property
    def num_own(self) -> int:
        return self.graph.num_nodes

    @property
    def num_remote(self) -> int:
        return int(self.remote_ids.numel())

    def adjacency(self, shared: bool) -> Adjacency:
        if not shared:
            return self.cut
        if self.full is None:
            raise ConfigError(
                "this client view has no remote degrees, so it cannot aggregate remote neighbours; "
                "build it with remote_degrees (sharing fedgraph/allshare) or use sharing nonshare"
            )
        return self.full

    def remote_table(self, rows: Rows, allow_missing: bool = False, width: int | None = None) -> torch.Tensor:
        """Received rows aligned with ``remote_ids`` (float32 [m, w]), ready for the forward pass.

        Every remote neighbour must be present (KeyError names the absent ones) unless ``allow_missing``,
        which fills them with zeros (e.g. the first round of a one-round-stale exchange; ``width`` gives w when
        no row came at all)."""
        ids = self.remote_ids.numpy()
        rows_ids = np.asarray(rows.ids, dtype=np.int64)
        pos = np.searchsorted(rows_ids, ids)
        found = pos < len(rows_ids)
        found[found] = rows_ids[pos[found]] == ids[found]
        if not found.all() and not allow_missing:
            raise KeyError(
                f"client {self.graph.client_id}: {int((~found).sum())} remote neighbours have no row "
                f"(e.g. global ids {ids[~found][:5].tolist()})"
            )
        width = rows.width if len(rows_ids) else int(width or 0)
        table = torch.zeros((len(ids), width), dtype=torch.float32)
        if found.any():
            table[torch.from_numpy(np.flatnonzero(found))] = torch.as_tensor(
                np.asarray(rows.values)[pos[found]], dtype=torch.float32
            )
        return table


def build_view(graph: ClientGraph, remote_degrees: Rows | None = None, cut_norm: str = "local") -> ClientView:
    """A client's view. ``remote_degrees``: the degrees its remote neighbours' owners sent (merged; see
    :func:`degree_rows`); without them only non-sharing convolutions can run (sharing ``nonshare``)."""
    if cut_norm not in CUT_NORMS:
        raise ConfigError(f"unknown cut-norm {cut_norm!r}; valid choices: {', '.join(CUT_NORMS)}")
    n = graph.num_nodes
    remote_ids = torch.unique(graph.cross_edges[1])
    m = int(remote_ids.numel())
    remote_owner = torch.full((m,), -1, dtype=torch.long)
    if m:
        remote_owner[torch.searchsorted(remote_ids, graph.cross_edges[1])] = graph.cross_owner
    d = global_degrees(graph)

    # Internal edges as (target row, source column), deduplicated, self loops dropped.
    src, dst = graph.edge_index
    keep = src != dst
    pairs = torch.unique(dst[keep] * n + src[keep])
    rows_i, cols_i = torch.div(pairs, n, rounding_mode="floor"), pairs % n
    if cut_norm == "local":
        d_cut = (torch.bincount(rows_i, minlength=n) + 1).to(torch.float64)
    else:
        d_cut = d
    rowptr, col, weight = _csr(n, rows_i, cols_i, (d_cut[rows_i] * d_cut[cols_i]).rsqrt(), n)
    cut = Adjacency(rowptr=rowptr, col=col, weight=weight, self_weight=1.0 / d_cut, num_remote=m)

    full = None
    remote_degree = None
    if m == 0:
        remote_degree = torch.zeros(0, dtype=torch.float64)
    elif remote_degrees is not None:
        try:
            remote_degree = torch.as_tensor(
                np.asarray(remote_degrees.select(remote_ids.numpy()).values, dtype=np.float64)[:, 0]
            )
        except KeyError as exc:
            raise KeyError(f"client {graph.client_id}: remote degrees incomplete: {exc.args[0]}") from None
        if not bool((remote_degree >= 2).all()):
            raise ValueError(
                "a remote neighbour's degree is < 2, yet it has at least one edge (to this client): "
                "the degree rows are not 1 + degree"
            )
    if remote_degree is not None:
        cross = torch.unique(torch.stack([graph.cross_edges[0], graph.cross_edges[1]]), dim=1)
        rows_c = cross[0]
        cols_c = n + torch.searchsorted(remote_ids, cross[1].contiguous())
        w_c = (d[rows_c] * remote_degree[cols_c - n]).rsqrt()
        w_i = (d[rows_i] * d[cols_i]).rsqrt()
        rowptr, col, weight = _csr(
            n, torch.cat([rows_i, rows_c]), torch.cat([cols_i, cols_c]), torch.cat([w_i, w_c]), n + m
        )
        full = Adjacency(rowptr=rowptr, col=col, weight=weight, self_weight=1.0 / d, num_remote=m)
    return ClientView(
        graph=graph,
        remote_ids=remote_ids,
        remote_owner=remote_owner,
        degree=d,
        remote_degree=remote_degree,
        cut=cut,
        full=full,
        cut_norm=cut_norm,
    )


def exchange_degrees(graphs: Iterable[ClientGraph]) -> dict[int, Rows]:
    """The one-time degree exchange done in-process for a list of clients (tests, centralised runs):
    ``{client id: merged degree rows it receives}``."""
    graphs = list(graphs)
    received = relay({g.client_id: split_rows(degree_rows(g), export_plan(g)) for g in graphs})
    empty = Rows(ids=np.zeros(0, np.int64), values=np.zeros((0, 1)))
    return {g.client_id: received.get(g.client_id, empty) for g in graphs}
