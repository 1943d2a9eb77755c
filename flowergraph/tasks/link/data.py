"""Link-prediction data: each client's own edges split into message-passing/training, validation and test
positives with sampled negatives; the cross-client edges held out as one test set of their own (Flower-free).

The global graph and its cut are the node task's (:mod:`..federated_graph`: :class:`GraphSpec`,
:class:`PartitionSpec`, every partitioner of :mod:`..partition`); :class:`LinkSpec` adds the edge split.

Client k's own edges (both endpoints owned by k)
    Split with PyG's ``RandomLinkSplit`` (undirected: each undirected edge once) into train / val / test
    positives (``val_fraction`` and ``test_fraction`` of the edges, rounded down; the rest train). The
    **message-passing graph** (``edge_index``) is the train positives in both directions, for training *and*
    evaluation: no val or test positive is ever in it. Val and test negatives (``neg_ratio`` per positive) are
    pairs of k's own nodes that are not edges of the graph (drawn once, so val and test share none). Training
    negatives are drawn afresh every epoch (:mod:`.training`). Split seed: (``LinkSpec.seed``, k).

Cross-client edges (u owned by a, v owned by b != a)
    Held out of every client's training graph, all of them. A fraction ``cross_known_fraction`` of them (0 by
    default) are **known cross edges**: both owners know the link exists (a bank knows the transfers to accounts
    at other banks), so a method that exchanges information across silos (FedGCN's neighbour aggregation) may
    use them; no client can pass messages over them alone, since the other endpoint's features are elsewhere.
    Which edges are known is a pure function of (``LinkSpec.seed``, u, v) (:func:`known_cross`), so both owners
    agree without the global graph. The rest are reported as one **cross-client test set**
    (:class:`CrossTestSet`): each undirected cross edge exactly once, as global ids ``u < v``, with
    ``neg_ratio`` negatives per positive drawn uniformly among pairs of nodes of *different* owners that are not
    edges of the global graph (seed: ``LinkSpec.seed``). It is nobody's own test set: it belongs to the
    federation and is scored once. Neither endpoint's owner has the other's node embedding, so an edge is scored
    as ``<z_u, z_v>`` with ``z_u`` computed by owner(u) on its own message-passing graph and ``z_v`` by owner(v)
    on its own: :func:`score_cross` takes each client's embeddings of its own nodes and gathers every endpoint's
    row from its owner. The federated code collects those embeddings (only the rows of ``cross_nodes`` are
    needed); the scores are comparable across owners only when the owners' encoders share weights (a global
    model). Each client's view (:class:`ClientLinkData` ``cross_pos`` / ``cross_neg``) lists the cross pairs
    with an endpoint it owns, as in the node task's ``cross_edges`` (own local index, remote global id, remote
    owner): every cross pair is in two views, both endpoints' owners'.

The centralized variant (:func:`centralized_link_data`) is the same split of the whole graph held by one client
(partitioner ``none``): no cross-client edges.

Everything is a pure function of (graph spec, partition spec, link spec, client id), memoised per process: the
cross-client test set in an ``lru_cache`` (4 entries), clients' data in a :class:`..memo.BytesLRU` (bounded by
bytes, ``FLOWERGRAPH_MEMO_MB``). PyG's ``RandomLinkSplit`` and ``negative_sampling`` draw from torch's and
Python's global generators: :func:`seeded_rngs` seeds both for the call and restores them after (one call at a
time per process, as Flower's clients run).
"""

from __future__ import annotations

import contextlib
import functools
import math
import random
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import numpy as np
import torch

from ...errors import ConfigError
from ..federated_graph import ClientGraph, GraphSpec, PartitionSpec, client_graph, load_global_graph, node_assignment
from ..memo import BytesLRU
from .model import dot

_SPLIT_SALT = 0x11A7  # the own-edge split of a client: (seed, client, salt)
_CROSS_SALT = 0xC205  # the cross-client negatives: (seed, salt)
_KNOWN_SALT = 0x6B0E  # which cross-client edges are known: (seed, u, v, salt)
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class LinkSpec:
    """How edges are split (hashable: keys the per-process caches). Checked when made: ConfigError names a bad
    value and its valid range."""

    val_fraction: float = 0.05
    test_fraction: float = 0.1
    neg_ratio: float = 1.0  # negatives per positive, for val, test, cross test and each training epoch
    seed: int = 0
    cross_known_fraction: float = 0.0  # of the cross-client edges: known to both owners, not test edges

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for key, value in (
            ("val-fraction", self.val_fraction),
            ("test-fraction", self.test_fraction),
            ("cross-known-fraction", self.cross_known_fraction),
        ):
            if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
                raise ConfigError(f"link {key} must be in [0, 1), got {value!r}")
        if not self.val_fraction + self.test_fraction < 1.0:
            raise ConfigError(
                f"link val-fraction + test-fraction must be < 1 (the rest are the training edges), got "
                f"{self.val_fraction} + {self.test_fraction} = {self.val_fraction + self.test_fraction}"
            )
        if not (isinstance(self.neg_ratio, (int, float)) and 0.0 < self.neg_ratio <= 100.0):
            raise ConfigError(f"link neg-ratio must be in (0, 100] (negatives per positive), got {self.neg_ratio!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"link seed must be an integer >= 0, got {self.seed!r}")


@contextlib.contextmanager
def seeded_rngs(*key: int) -> Iterator[int]:
    """torch's CPU generator and Python's ``random`` seeded from ``key`` (integers >= 0) inside the block, both
    restored after: PyG's ``RandomLinkSplit`` (``torch.randperm``) and ``negative_sampling`` (``random.sample``)
    draw from them. Yields the seed."""
    seed = int(np.random.SeedSequence([int(k) for k in key]).generate_state(1)[0])
    state = random.getstate()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            random.seed(seed)
            yield seed
    finally:
        random.setstate(state)


@dataclass(eq=False)  # identity hash, like ClientGraph
class ClientLinkData:
    """What client ``client_id`` holds for link prediction. CPU tensors, int64 indices; local indices
    0..n_k-1 unless said otherwise. Positive and negative pairs are ``[2, m]`` (one direction per pair)."""

    client_id: int
    num_clients: int
    num_global_nodes: int
    global_ids: torch.Tensor  # [n_k] global id of each local node (sorted)
    x: torch.Tensor  # [n_k, d]
    edge_index: torch.Tensor  # the message-passing graph: train positives, both directions
    train_pos: torch.Tensor
    val_pos: torch.Tensor
    val_neg: torch.Tensor
    test_pos: torch.Tensor
    test_neg: torch.Tensor
    # The cross-client test pairs with an endpoint owned here: (own local index, remote global id) and the
    # remote endpoint's owner. Scored by score_cross, never trained on.
    cross_pos: torch.Tensor
    cross_pos_owner: torch.Tensor
    cross_neg: torch.Tensor
    cross_neg_owner: torch.Tensor
    # The known cross-client edges with an endpoint owned here (:func:`known_cross`), in the same layout: never
    # in the message-passing graph; what FedGCN's exchange aggregates over besides the own training edges.
    cross_known: torch.Tensor = field(default_factory=lambda: _empty_pairs())
    cross_known_owner: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def num_nodes(self) -> int:
        return int(self.global_ids.numel())

    @property
    def num_features(self) -> int:
        return int(self.x.size(1))

    @property
    def cross_nodes(self) -> torch.Tensor:
        """Global ids of the own nodes the cross-client test set touches: the embedding rows to share."""
        local = torch.cat([self.cross_pos[0], self.cross_neg[0]]).unique()
        return self.global_ids[local]

    def global_rows(self, z: torch.Tensor) -> torch.Tensor:
        """Own-node embeddings ``z`` ([n_k, d], local order) as a tensor over global ids ([N, d], zeros at the
        nodes of other clients): this client's entry for :func:`score_cross`."""
        out = z.new_zeros((self.num_global_nodes, z.size(1)))
        out[self.global_ids] = z
        return out


@dataclass(eq=False)
class CrossTestSet:
    """The federation's cross-client test set: every undirected cross-client edge that is not known
    (:func:`known_cross`) once (``pos``, global ids, ``pos[0] < pos[1]``; ``known`` holds the others) and as many
    negatives per positive as ``neg_ratio`` (``neg``, pairs of nodes of different owners, not edges of the graph,
    ``neg[0] < neg[1]``). ``owner[v]``: the client owning node v; ``local_index[v]``: v's local index at its
    owner."""

    pos: torch.Tensor
    neg: torch.Tensor
    owner: torch.Tensor
    local_index: torch.Tensor
    num_clients: int
    known: torch.Tensor = field(default_factory=lambda: _empty_pairs())  # the known cross edges, u < v

    @property
    def num_global_nodes(self) -> int:
        return int(self.owner.numel())


def _empty_pairs() -> torch.Tensor:
    return torch.empty((2, 0), dtype=torch.long)


def split_own_edges(edge_index: torch.Tensor, num_nodes: int, spec: LinkSpec, salt: int) -> dict[str, torch.Tensor]:
    """One client's (or the whole graph's) undirected ``edge_index`` (both directions, no self loops) split by
    PyG's ``RandomLinkSplit``, seeded by (``spec.seed``, ``salt``): ``edge_index`` (train positives, both
    directions), ``train_pos``, ``val_pos``, ``val_neg``, ``test_pos``, ``test_neg``."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import RandomLinkSplit

    if int((edge_index[0] < edge_index[1]).sum()) == 0:  # no edge: nothing to split (RandomLinkSplit refuses)
        return {k: _empty_pairs() for k in ("edge_index", "train_pos", "val_pos", "val_neg", "test_pos", "test_neg")}
    split = RandomLinkSplit(
        num_val=float(spec.val_fraction),
        num_test=float(spec.test_fraction),
        is_undirected=True,
        add_negative_train_samples=False,
        neg_sampling_ratio=float(spec.neg_ratio),
        split_labels=True,
    )
    with seeded_rngs(spec.seed, salt, _SPLIT_SALT), warnings.catch_warnings():
        # A small dense client may have fewer non-edges than asked for: RandomLinkSplit then takes what there is.
        warnings.filterwarnings("ignore", message="There are not enough negative edges")
        train, val, test = split(Data(edge_index=edge_index, num_nodes=num_nodes))

    def pairs(store, name: str) -> torch.Tensor:
        value = getattr(store, name, None)
        return _empty_pairs() if value is None else value.to(torch.long).contiguous()

    return {
        "edge_index": train.edge_index.to(torch.long),
        "train_pos": pairs(train, "pos_edge_label_index"),
        "val_pos": pairs(val, "pos_edge_label_index"),
        "val_neg": pairs(val, "neg_edge_label_index"),
        "test_pos": pairs(test, "pos_edge_label_index"),
        "test_neg": pairs(test, "neg_edge_label_index"),
    }


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 values (a bijection with good avalanche: a seeded hash of edge keys)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def known_cross(u: torch.Tensor | np.ndarray, v: torch.Tensor | np.ndarray, spec: LinkSpec) -> np.ndarray:
    """Which cross-client edges {u, v} (global ids, either order) are known to both owners: a seeded hash of
    (``spec.seed``, min, max) below ``spec.cross_known_fraction``. Each owner computes it alone, and both agree."""
    lo = np.minimum(np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64)).astype(np.uint64)
    hi = np.maximum(np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64)).astype(np.uint64)
    if spec.cross_known_fraction <= 0.0:
        return np.zeros(lo.shape, dtype=bool)
    seed = _mix64(np.asarray([(spec.seed * 0x9E3779B97F4A7C15 + _KNOWN_SALT) & _MASK64], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        h = _mix64(_mix64(lo ^ seed) + hi)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53) < spec.cross_known_fraction


def _sample_cross_negatives(
    owner: np.ndarray, edge_keys: np.ndarray, count: int, rng: np.random.Generator
) -> torch.Tensor:
    """``count`` distinct pairs u < v with owner[u] != owner[v] whose key ``u * N + v`` is not in ``edge_keys``
    (the graph's undirected edges, sorted), drawn uniformly."""
    n = int(owner.size)
    got = np.empty(0, dtype=np.int64)
    for _ in range(100):
        if got.size >= count:
            break
        m = 2 * (count - got.size) + 16
        a, b = rng.integers(0, n, size=m), rng.integers(0, n, size=m)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keys = lo * n + hi
        keys = keys[(owner[lo] != owner[hi]) & ~np.isin(keys, edge_keys, assume_unique=False)]
        got = np.concatenate([got, keys])
        _, first = np.unique(got, return_index=True)
        got = got[np.sort(first)]  # distinct, in the order drawn
    if got.size < count:
        raise ConfigError(
            f"could draw only {got.size} of {count} cross-client negatives (pairs of nodes of different clients that "
            f"are not edges); lower link neg-ratio (valid: (0, 100])"
        )
    got = got[:count]
    return torch.from_numpy(np.stack([got // n, got % n]))


@functools.lru_cache(maxsize=4)
def cross_test_set(gspec: GraphSpec, pspec: PartitionSpec, lspec: LinkSpec) -> CrossTestSet:
    """The cross-client test set of a partitioned graph (memoised per process; see the module docstring)."""
    data = load_global_graph(gspec)
    assignment = np.asarray(node_assignment(gspec, pspec), dtype=np.int64)
    owner = torch.from_numpy(assignment.copy())
    n = int(data.num_nodes)
    local_index = torch.empty(n, dtype=torch.long)
    for k in range(pspec.num_clients):
        own = torch.nonzero(owner == k, as_tuple=True)[0]
        local_index[own] = torch.arange(own.numel())
    src, dst = data.edge_index
    upper = src < dst
    src, dst = src[upper], dst[upper]
    crossing = owner[src] != owner[dst]
    pairs = torch.stack([src[crossing], dst[crossing]])
    known = torch.from_numpy(known_cross(pairs[0], pairs[1], lspec))
    pos = pairs[:, ~known]
    count = int(lspec.neg_ratio * pos.size(1))
    if count == 0:
        neg = _empty_pairs()
    else:
        edge_keys = np.sort((src * n + dst).numpy())
        rng = np.random.default_rng(np.random.SeedSequence([lspec.seed, _CROSS_SALT]))
        neg = _sample_cross_negatives(assignment, edge_keys, count, rng)
    return CrossTestSet(
        pos=pos, neg=neg, owner=owner, local_index=local_index, num_clients=pspec.num_clients, known=pairs[:, known]
    )


def _client_view(cross: CrossTestSet, pairs: torch.Tensor, client_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs with an endpoint owned by ``client_id``: (own local index, remote global id), remote owner."""
    u, v = pairs
    mine_u, mine_v = cross.owner[u] == client_id, cross.owner[v] == client_id
    own = torch.cat([u[mine_u], v[mine_v]])
    remote = torch.cat([v[mine_u], u[mine_v]])
    return torch.stack([cross.local_index[own], remote]), cross.owner[remote]


def build_client_link_data(gspec: GraphSpec, pspec: PartitionSpec, lspec: LinkSpec, client_id: int) -> ClientLinkData:
    """Client ``client_id``'s link data, built (not memoised: :func:`client_link_data` is)."""
    graph = client_graph(gspec, pspec, client_id)  # checks the client id
    parts = split_own_edges(graph.edge_index, graph.num_nodes, lspec, client_id)
    cross = cross_test_set(gspec, pspec, lspec)
    cross_pos, cross_pos_owner = _client_view(cross, cross.pos, client_id)
    cross_neg, cross_neg_owner = _client_view(cross, cross.neg, client_id)
    cross_known, cross_known_owner = _client_view(cross, cross.known, client_id)
    return ClientLinkData(
        client_id=client_id,
        num_clients=pspec.num_clients,
        num_global_nodes=graph.num_global_nodes,
        global_ids=graph.global_ids,
        x=graph.x,
        cross_pos=cross_pos,
        cross_pos_owner=cross_pos_owner,
        cross_neg=cross_neg,
        cross_neg_owner=cross_neg_owner,
        cross_known=cross_known,
        cross_known_owner=cross_known_owner,
        **parts,
    )


def graph_link_data(graph: ClientGraph, lspec: LinkSpec) -> ClientLinkData:
    """A data owner's link data from its own graph alone (its partition file, :mod:`~flowergraph.tasks.
    partition_files`): its own edges split exactly as :func:`build_client_link_data` splits them (seeded by the
    spec's seed and the client's id), its known cross edges (those of the file's cross edges :func:`known_cross`
    picks, as the global split does), and no view of the cross-client test set, whose negatives are drawn over every
    client's nodes: that set is scored only where the global graph is (the server of a simulation)."""
    parts = split_own_edges(graph.edge_index, graph.num_nodes, lspec, graph.client_id)
    nobody = torch.empty(0, dtype=torch.long)
    local, remote = graph.cross_edges
    known = torch.from_numpy(known_cross(graph.global_ids[local], remote, lspec))
    return ClientLinkData(
        client_id=graph.client_id,
        num_clients=graph.num_clients,
        num_global_nodes=graph.num_global_nodes,
        global_ids=graph.global_ids,
        x=graph.x,
        cross_pos=_empty_pairs(),
        cross_pos_owner=nobody,
        cross_neg=_empty_pairs(),
        cross_neg_owner=nobody.clone(),
        cross_known=graph.cross_edges[:, known].clone(),
        cross_known_owner=graph.cross_owner[known].clone(),
        **parts,
    )


_CLIENTS = BytesLRU()  # an actor may serve any client: bounded by bytes (tasks/memo.py)


def client_link_data(gspec: GraphSpec, pspec: PartitionSpec, lspec: LinkSpec, client_id: int) -> ClientLinkData:
    """Client ``client_id``'s link data: a pure function of the specs and the id (memoised per process)."""
    key = (gspec, pspec, lspec, int(client_id))
    return _CLIENTS.get_or_build(key, lambda: build_client_link_data(gspec, pspec, lspec, int(client_id)))


def whole_graph_partition(seed: int = 0) -> PartitionSpec:
    """The partition of the centralized variant: one client holds every node."""
    return PartitionSpec(partitioner="none", num_clients=1, seed=seed)


def centralized_link_data(gspec: GraphSpec, lspec: LinkSpec = LinkSpec()) -> ClientLinkData:
    """The whole graph with one split (a client holding every node; no cross-client edges)."""
    return client_link_data(gspec, whole_graph_partition(), lspec, 0)


def _owner_rows(cross: CrossTestSet, embeddings: Mapping[int, torch.Tensor], nodes: torch.Tensor) -> torch.Tensor:
    """Row ``i``: node ``nodes[i]``'s embedding from its owner's entry of ``embeddings``."""
    n = cross.num_global_nodes
    owners = cross.owner[nodes]
    out: torch.Tensor | None = None
    for k in owners.unique().tolist():
        if k not in embeddings:
            raise ConfigError(
                f"no embeddings from client {k}, which owns {int((owners == k).sum())} endpoint(s) of the "
                f"cross-client test set; got clients {sorted(embeddings)}"
            )
        z = embeddings[k]
        own_count = int((cross.owner == k).sum())
        sel = owners == k
        if z.dim() != 2 or z.size(0) not in (n, own_count):
            raise ConfigError(
                f"client {k}'s embeddings have shape {tuple(z.shape)}; expected [{n}, d] (over global ids) or "
                f"[{own_count}, d] (its own nodes, in global-id order)"
            )
        rows = z[nodes[sel]] if z.size(0) == n else z[cross.local_index[nodes[sel]]]
        if out is None:
            out = rows.new_empty((nodes.numel(), rows.size(1)))
        if rows.size(1) != out.size(1):
            raise ConfigError(f"client {k}'s embeddings have width {rows.size(1)}, another client's {out.size(1)}")
        out[sel] = rows
    return out if out is not None else torch.empty((0, 0))


def score_cross(cross: CrossTestSet, embeddings: Mapping[int, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores (logits) of the cross-client test positives and negatives: ``<z_u, z_v>`` with each endpoint's
    embedding taken from its owner's entry of ``embeddings`` (client -> a tensor over global ids [N, d], rows of
    other clients' nodes ignored, e.g. :meth:`ClientLinkData.global_rows`; or [n_k, d], the owner's nodes in
    global-id order). ConfigError names a missing client or a bad shape."""

    def scores(pairs: torch.Tensor) -> torch.Tensor:
        if pairs.size(1) == 0:
            return torch.empty(0)
        rows = _owner_rows(cross, embeddings, pairs.reshape(-1))
        m = pairs.size(1)
        return dot(rows[:m], rows[m:])

    return scores(cross.pos), scores(cross.neg)


def split_sizes(num_edges: int, spec: LinkSpec) -> tuple[int, int, int]:
    """(train, val, test) positives of ``num_edges`` undirected edges, as ``RandomLinkSplit`` rounds them."""
    val, test = math.floor(spec.val_fraction * num_edges), math.floor(spec.test_fraction * num_edges)
    return num_edges - val - test, val, test
