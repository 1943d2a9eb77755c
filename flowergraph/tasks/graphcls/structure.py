"""FedStar's structure embeddings (Tan et al., AAAI 2023, eqs. 5-7): DSE, RWSE and their on-disk cache.

Graphs come as one concatenated edge list: ``edge_index`` (2, E) with global node ids, graph g owning the nodes
``offsets[g] .. offsets[g+1]-1`` (``offsets`` = cumulative ``num_nodes``), every edge inside one graph and
listed in both directions (as PyG's TU loader stores them). ``A`` is the binary adjacency of that list with
self loops and duplicate edges dropped (no TU dataset used here has either; the authors' code would count a
self loop in both A and the degree). ``d_v`` = number of neighbours of v.

* **DSE** (eq. 5, ``k1 = dse_dim``): ``s_v = one_hot(clip(d_v, 1, k1) - 1)``: position 0 is degree <= 1,
  position k1-1 is degree >= k1. An isolated node (degree 0) shares position 0 with degree 1: eq. 5 would
  give it the all-zero vector, the authors' code (``degree.clip(1, n_dg)``) puts it at position 0; we follow
  the code.
* **RWSE** (eq. 6, ``k2 = rwse_dim``): ``s_v = [T_vv, (T^2)_vv, ..., (T^k2)_vv]`` with ``T = A D^-1``, i.e.
  the probability that a k-step random walk started at v is back at v. An isolated node has no walk: its
  column of T is zero (1/0 taken as 0), so all its entries are 0, never NaN. The authors' scipy code yields
  the same 0 (its sparse product never touches the infinite 1/0 it stores on the diagonal of D^-1).
* **Concatenation** (eq. 7) follows the order of ``kinds``: ``("dse", "rwse")`` is the paper's
  ``[DSE, RWSE]``; the authors' code concatenates ``[RWSE, DSE]`` (ask for ``("rwse", "dse")`` to get that
  layout). A linear layer follows, so the order only has to agree across clients.
* **Ablations** (paper Table 3): ``("dse",)`` -> k1 dims, ``("rwse",)`` -> k2 dims, ``()`` -> an all-ones
  vector of ``ONES_DIM`` = 16 dims (the authors' ``--n_ones`` default; their released code has no branch
  that builds it). With all-ones input the first FC layer outputs one learned constant per graph node, so the
  width only changes the initial scale.

Computation: RWSE never forms T^k. It runs ``P <- T P`` (scipy CSR times a dense block) k2 times starting from
``P = I`` restricted to a block of columns and reads the diagonal after each step: cost ``k2 * nnz(T) * width``
per block, memory ``rows * width``. Small graphs are batched (their block-diagonal T against one dense block
``sum(n) x max(n)``, graphs sorted by size, at most ``budget`` = 4 M entries); a graph with ``n^2 > budget``
(DD's largest has 5748 nodes) is done alone in column blocks. Arithmetic in float32: the products are
memory-bound and run about 4x faster than in float64, and the result differs from the authors' float64
per-graph powers by at most 2.7e-7 on every offline TU dataset (``benchmarks/fedstar_embeddings.py``). DD
takes 5 s cold on one core, against 38 s for per-graph sparse powers.

Cache: RWSE is the only costly part (DD: 1178 graphs of 284 nodes on average), so :func:`cached_random_walk_se`
keeps it on disk, ``<FLOWERGRAPH_CACHE>/datasets/TUDataset/<name>/structure/rwse-k<k2>-v<VERSION>.npz``,
written atomically (temporary file + ``os.replace``) and checked on load against a SHA-256 fingerprint of the
graphs (node counts + edge list): stale or unreadable files are recomputed. DSE and all-ones are vectorised over
the whole dataset and not cached. Bump ``RWSE_CACHE_VERSION`` whenever the RWSE maths change.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import ConfigError
from ...storage._astlock import serialize_ast_parse

KINDS = ("dse", "rwse")
ONES_DIM = 16
RWSE_CACHE_VERSION = 1
_BUDGET = 1 << 22  # dense entries per block (4 M float64 = 32 MB)


def parse_structure(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"dse,rwse"``, ``("dse",)``, ``"rwse"``, ``"ones"`` / ``"none"`` / ``""`` / ``()`` (all-ones) -> a tuple.

    Order is kept (it is the concatenation order); names are case-insensitive; a repeated or unknown kind is a
    ConfigError naming it and the valid choices.
    """
    if isinstance(value, str):
        text = value.strip().lower()
        parts = [] if text in ("", "ones", "none") else [p.strip() for p in text.replace("+", ",").split(",")]
    else:
        parts = [str(p).strip().lower() for p in value]
    out: list[str] = []
    for p in parts:
        if p not in KINDS:
            raise ConfigError(
                f"unknown structure embedding {p!r} in {value!r}; valid choices: a comma-separated "
                f"subset of {', '.join(KINDS)}, or 'ones' (all-ones vector)"
            )
        if p in out:
            raise ConfigError(f"structure embedding {p!r} listed twice in {value!r}")
        out.append(p)
    return tuple(out)


def structure_dim(kinds: Sequence[str], dse_dim: int = 16, rwse_dim: int = 16) -> int:
    """Width of the embedding: sum of the chosen kinds' widths, ONES_DIM when none is chosen."""
    kinds = parse_structure(kinds)
    if not kinds:
        return ONES_DIM
    return sum(dse_dim if k == "dse" else rwse_dim for k in kinds)


def _check_dim(name: str, value: int) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")


def _simple_adjacency(edge_index: np.ndarray, total: int):
    """Binary CSR adjacency without self loops or duplicates."""
    import scipy.sparse as sp

    src, dst = np.asarray(edge_index, dtype=np.int64)
    keep = src != dst
    adj = sp.csr_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(total, total))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def degrees(edge_index: np.ndarray, total_nodes: int) -> np.ndarray:
    """Number of distinct neighbours of every node (self loops and duplicate edges not counted)."""
    return np.diff(_simple_adjacency(edge_index, total_nodes).indptr)


def degree_se(edge_index: np.ndarray, total_nodes: int, dim: int = 16) -> np.ndarray:
    """DSE, float32 (total_nodes, dim): ``one_hot(clip(d_v, 1, dim) - 1)`` (see the module docstring)."""
    _check_dim("dse_dim", dim)
    pos = np.clip(degrees(edge_index, total_nodes), 1, dim) - 1
    out = np.zeros((total_nodes, dim), dtype=np.float32)
    out[np.arange(total_nodes), pos] = 1.0
    return out


def _blocks(num_nodes: np.ndarray, budget: int):
    """Yield (graph ids, column start, column stop) tasks: small graphs batched, big ones in column blocks."""
    order = np.argsort(num_nodes, kind="stable")
    batch: list[int] = []
    total = 0
    for g in order:
        n = int(num_nodes[g])
        if n == 0:
            continue
        if n * n > budget:  # alone, in column blocks (sorted ascending: everything after is big too)
            if batch:
                yield batch, 0, int(num_nodes[batch[-1]])
                batch, total = [], 0
            width = max(1, budget // n)
            for c0 in range(0, n, width):
                yield [int(g)], c0, min(n, c0 + width)
            continue
        if batch and (total + n) * n > budget:
            yield batch, 0, int(num_nodes[batch[-1]])
            batch, total = [], 0
        batch.append(int(g))
        total += n
    if batch:
        yield batch, 0, int(num_nodes[batch[-1]])


def random_walk_se(
    edge_index: np.ndarray, num_nodes: Sequence[int], steps: int = 16, budget: int = _BUDGET
) -> np.ndarray:
    """RWSE, float32 (sum(num_nodes), steps): column k-1 is ``diag((A D^-1)^k)`` of each node's own graph."""
    _check_dim("rwse_dim", steps)
    num_nodes = np.asarray(num_nodes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(num_nodes)])
    total = int(offsets[-1])
    adj = _simple_adjacency(edge_index, total)
    deg = np.diff(adj.indptr).astype(np.float64)
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    trans = adj.astype(np.float32)
    trans.data = inv[trans.indices].astype(np.float32)  # T[i, j] = A[i, j] / d_j
    out = np.zeros((total, steps), dtype=np.float32)
    for graphs, c0, c1 in _blocks(num_nodes, budget):
        nodes = np.concatenate([np.arange(offsets[g], offsets[g + 1]) for g in graphs])
        local = np.concatenate([np.arange(num_nodes[g]) for g in graphs])
        sub = trans[nodes][:, nodes]  # block-diagonal T of these graphs
        rows = np.flatnonzero((local >= c0) & (local < c1))
        cols = local[rows] - c0
        block = np.zeros((len(nodes), c1 - c0), dtype=np.float32)
        block[rows, cols] = 1.0
        for k in range(steps):
            block = sub @ block
            out[nodes[rows], k] = block[rows, cols]
    return out


def fingerprint(edge_index: np.ndarray, num_nodes: Sequence[int]) -> str:
    """SHA-256 of the graphs' node counts and edge list (what RWSE depends on)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(num_nodes, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(edge_index, dtype=np.int64).tobytes())
    return h.hexdigest()


def rwse_cache_path(dataset: str, steps: int) -> Path:
    from ..datasets import cache_dir

    return cache_dir() / "TUDataset" / dataset / "structure" / f"rwse-k{steps}-v{RWSE_CACHE_VERSION}.npz"


def cached_random_walk_se(
    edge_index: np.ndarray, num_nodes: Sequence[int], steps: int, path: Path | None
) -> np.ndarray:
    """:func:`random_walk_se`, read from / written to ``path`` (None: no disk cache). See the module docstring."""
    if path is None:
        return random_walk_se(edge_index, num_nodes, steps)
    fp = fingerprint(edge_index, num_nodes)
    total = int(np.sum(num_nodes))
    serialize_ast_parse()  # numpy.load parses array headers; see storage._astlock
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["fingerprint"]) == fp and z["rwse"].shape == (total, steps):
                return np.asarray(z["rwse"], dtype=np.float32)
    except (OSError, KeyError, ValueError):  # absent, truncated or foreign: recompute
        pass
    rwse = random_walk_se(edge_index, num_nodes, steps)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, rwse=rwse, fingerprint=np.array(fp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rwse


def structure_embeddings(
    edge_index: np.ndarray,
    num_nodes: Sequence[int],
    kinds: Sequence[str] = KINDS,
    dse_dim: int = 16,
    rwse_dim: int = 16,
    *,
    rwse_cache: Path | None = None,
) -> np.ndarray:
    """The concatenated embedding, float32 (sum(num_nodes), structure_dim(kinds, dse_dim, rwse_dim))."""
    kinds = parse_structure(kinds)
    _check_dim("dse_dim", dse_dim)
    _check_dim("rwse_dim", rwse_dim)
    total = int(np.sum(num_nodes))
    if not kinds:
        return np.ones((total, ONES_DIM), dtype=np.float32)
    parts = []
    for kind in kinds:
        if kind == "dse":
            parts.append(degree_se(edge_index, total, dse_dim))
        else:
            parts.append(cached_random_walk_se(edge_index, num_nodes, rwse_dim, rwse_cache))
    return np.concatenate(parts, axis=1)
