"""Layered samples for one local iteration: FedGraph's policy sampling (paper Algorithm 2, eq. 7) and the
paper's baselines (full batch, GraphSAGE-style node-wise, FastGCN-style layer-wise), all over a
:class:`~flowergraph.methods.fedgraph.maths.graph.ClientView`, so every scheme can aggregate remote neighbours in the
convolutions that share.

A :class:`LayeredSample` for K convolutions holds the own nodes of every layer, ``nodes[0]`` (inputs of
convolution 0) ... ``nodes[K]`` (the mini-batch), and per convolution k the weighted edges from layer k
(own nodes ``nodes[k]`` followed by remote neighbours ``remote[k]``) to layer k+1: the sampled matrix Q~^(k).

**FedGraph** (:class:`SamplingPolicy`, P_i = (kappa_i, p^(1), ..., p^(L-1)), probabilities listed from the input
convolution to the output one): draw kappa_i labelled nodes uniformly without replacement (layer L); then for
l = L-1, ..., 1, every node v of layer l+1 keeps a uniform random subset N^(l)(v) of its neighbours V(v) of
size ``ceil(p^(l) |V(v)|)`` and

    Q~^(l)(v, u) = |V(v)| / |N^(l)(v)| * Q(v, u)   for u in N^(l)(v), 0 otherwise      (eq. 7)

Layer l holds layer l+1 and every own node sampled from it (remote neighbours are leaves: their
``h^(l) W^(l)`` arrives from their owners). V(v) is the neighbour set of the convolution's adjacency: own
neighbours in a cut convolution, own and remote neighbours in a sharing one.

**GraphSAGE-style** (:class:`NodeWise`): the same with a fixed fan-out per convolution, |N(v)| = min(S, |V(v)|)
(default (25, 10): 25 for the input convolution, 10 for the output one, as GraphSAGE's S1, S2), same eq. 7
rescaling (the GCN form of node-wise sampling).

**FastGCN-style** (:class:`LayerWise`): for every convolution, t = ``layer_size`` nodes are drawn i.i.d. (with
replacement) from all candidate columns (own nodes; plus remote neighbours when the convolution shares) with
probability q(u) proportional to sum_v Q(v, u)^2; ``Q~(v, u) = Q(v, u) c(u) / (t q(u))`` with c(u) the times u
was drawn; layer k's own nodes are the own nodes drawn. Self loops are ordinary entries of Q (kept only when
drawn), as in FastGCN.

**Full batch** (:class:`FullBatch`): every labelled node, every neighbour, Q~ = Q.

Choices where the paper is silent (also in the package docstring): the self loop Q(v, v) is always kept and not
rescaled (Algorithm 2 samples neighbours only); |N(v)| = ceil(p |V(v)|) with a uniform subset of that size makes
|V(v)|/|N(v)| the exact inverse inclusion probability (unbiased; a node with neighbours keeps at least one), and
p = 1 gives Q~ = Q exactly.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch

from ....errors import ConfigError
from .graph import Adjacency, ClientView

SCHEMES = ("full", "fedgraph", "graphsage", "fastgcn")


@dataclass
class ConvEdges:
    """Sampled Q~ of one convolution: ``dst`` positions in the upper layer, ``src`` positions in the lower
    layer's own nodes (< len(nodes[k])) or remote rows (len(nodes[k]) + position in ``remote[k]``)."""

    dst: torch.Tensor
    src: torch.Tensor
    weight: torch.Tensor  # float32

    @property
    def num_edges(self) -> int:
        return int(self.dst.numel())


@dataclass
class LayeredSample:
    nodes: list[torch.Tensor]  # K + 1 tensors of own local indices; nodes[-1] is the mini-batch
    remote: list[torch.Tensor]  # K tensors of positions in view.remote_ids
    convs: list[ConvEdges]  # K

    @property
    def batch(self) -> torch.Tensor:
        return self.nodes[-1]

    @property
    def num_convs(self) -> int:
        return len(self.convs)

    def layer_sizes(self) -> list[int]:
        """Nodes per layer (input first), remote rows counted where they enter."""
        sizes = [int(self.nodes[k].numel() + self.remote[k].numel()) for k in range(self.num_convs)]
        return sizes + [int(self.nodes[-1].numel())]

    def num_edges(self) -> int:
        return sum(e.num_edges for e in self.convs)


class Scheme(Protocol):
    """What every sampling scheme provides."""

    @property
    def name(self) -> str: ...

    def check(self, num_convs: int) -> None: ...

    def sample(
        self,
        view: ClientView,
        train_idx: torch.Tensor,
        shared: Sequence[bool],
        generator: torch.Generator | None = None,
    ) -> LayeredSample: ...

    def batch_for(self, num_train: int) -> int:
        """The mini-batch size with ``num_train`` labelled nodes: the server's eq. 8 weight."""
        ...


def select_batch(train_idx: torch.Tensor, size: int | None, generator: torch.Generator | None) -> torch.Tensor:
    """``size`` labelled nodes drawn uniformly without replacement (all of them when ``size`` is None or at least
    their number), sorted."""
    if size is None or size >= train_idx.numel():
        return torch.sort(train_idx)[0]
    perm = torch.randperm(train_idx.numel(), generator=generator)[:size]
    return torch.sort(train_idx[perm])[0]


def _sample_rows(adj: Adjacency, targets: torch.Tensor, counts: torch.Tensor | None, generator: torch.Generator | None):
    """For each target row, a uniform subset of ``counts[i]`` of its neighbours (all when None), rescaled by
    |V(v)| / |N(v)| (eq. 7). Returns (target position, column, weight float64)."""
    t, edge = adj.rows(targets)
    deg = adj.degree[targets]
    if counts is not None and bool((counts < deg).any()):
        # One sort by (target, random key): grouped by target, uniformly shuffled inside each group; the first
        # counts[i] of group i are a uniform subset of that size.
        keys = t.to(torch.float64) + torch.rand(t.numel(), generator=generator, dtype=torch.float64)
        order = torch.argsort(keys)
        first = torch.cumsum(deg, 0) - deg
        rank = torch.arange(t.numel()) - first[t[order]]
        keep = order[rank < counts[t[order]]]
        t, edge = t[keep], edge[keep]
        scale = deg.to(torch.float64) / counts.clamp(min=1).to(torch.float64)
        return t, adj.col[edge], adj.weight[edge] * scale[t]
    return t, adj.col[edge], adj.weight[edge]


def _layer(
    targets: torch.Tensor,
    t: torch.Tensor,
    col: torch.Tensor,
    weight: torch.Tensor,
    n: int,
    lower: torch.Tensor | None = None,
):
    """Positions for one convolution: the lower layer's own nodes (``lower``, or targets + own sources),
    its remote rows, and the edges as positions."""
    own = col < n
    if lower is None:
        lower = torch.unique(torch.cat([targets, col[own]]))
    remote = torch.unique(col[~own] - n)
    src = torch.empty_like(col)
    src[own] = torch.searchsorted(lower, col[own])
    src[~own] = lower.numel() + torch.searchsorted(remote, col[~own] - n)
    return lower, remote, ConvEdges(dst=t, src=src, weight=weight.to(torch.float32))


def _nodewise(
    view: ClientView, batch: torch.Tensor, shared: Sequence[bool], counts_fn, generator: torch.Generator | None
) -> LayeredSample:
    num_convs = len(shared)
    n = view.num_own
    nodes: list[torch.Tensor] = [torch.empty(0, dtype=torch.long)] * num_convs + [batch]
    remote: list[torch.Tensor] = [torch.empty(0, dtype=torch.long)] * num_convs
    convs: list[ConvEdges] = [None] * num_convs  # type: ignore[list-item]
    for k in reversed(range(num_convs)):
        adj = view.adjacency(shared[k])
        targets = nodes[k + 1]
        deg = adj.degree[targets]
        t, col, w = _sample_rows(adj, targets, counts_fn(k, deg), generator)
        pos = torch.arange(targets.numel())
        t = torch.cat([t, pos])
        col = torch.cat([col, targets])
        w = torch.cat([w, adj.self_weight[targets]])
        nodes[k], remote[k], convs[k] = _layer(targets, t, col, w, n)
    return LayeredSample(nodes=nodes, remote=remote, convs=convs)


def exact_sample(view: ClientView, targets: torch.Tensor, shared: Sequence[bool]) -> LayeredSample:
    """Every neighbour of every layer, Q~ = Q: the exact computation for ``targets`` (their K-hop
    neighbourhood only)."""
    return _nodewise(view, torch.sort(targets)[0], shared, lambda k, deg: None, None)


def _check_probability(name: str, p: float) -> None:
    if not (isinstance(p, (int, float)) and 0.0 < p <= 1.0):
        raise ConfigError(f"{name}={p!r}: a sampling probability must be in (0, 1]")


def _is_count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _check_batch(name: str, size: int | None) -> None:
    if size is not None and not _is_count(size):
        raise ConfigError(
            f"{name}={size!r}: a mini-batch size must be an integer >= 1 (or None for all labelled nodes)"
        )


@dataclass(frozen=True)
class FullBatch:
    """No sampling: every labelled node, every neighbour."""

    name: str = field(default="full", init=False)

    def check(self, num_convs: int) -> None:
        return None

    def batch_for(self, num_train: int) -> int:
        return num_train

    def sample(self, view, train_idx, shared, generator=None) -> LayeredSample:
        return exact_sample(view, train_idx, shared)


@dataclass(frozen=True)
class SamplingPolicy:
    """FedGraph's P_i: mini-batch size ``kappa`` and one neighbour sampling probability per convolution
    (``probs[0]`` for the input convolution, p^(1) in the paper)."""

    kappa: int
    probs: tuple[float, ...]
    name: str = field(default="fedgraph", init=False)

    def __post_init__(self):
        _check_batch("kappa", self.kappa)
        object.__setattr__(self, "kappa", int(self.kappa))
        object.__setattr__(self, "probs", tuple(float(p) for p in self.probs))
        for k, p in enumerate(self.probs):
            _check_probability(f"probs[{k}]", p)

    def check(self, num_convs: int) -> None:
        if len(self.probs) != num_convs:
            raise ConfigError(
                f"policy has {len(self.probs)} probabilities {self.probs}; the model has "
                f"{num_convs} convolutions and needs one per convolution"
            )

    def batch_for(self, num_train: int) -> int:
        return min(self.kappa, num_train)

    def sample(self, view, train_idx, shared, generator=None) -> LayeredSample:
        self.check(len(shared))
        batch = select_batch(train_idx, self.kappa, generator)
        probs = self.probs

        def counts(k, deg):
            if probs[k] >= 1.0:
                return None
            return torch.ceil(deg.to(torch.float64) * probs[k]).to(torch.long)

        return _nodewise(view, batch, shared, counts, generator)


@dataclass(frozen=True)
class NodeWise:
    """GraphSAGE-style node-wise sampling: at most ``fanouts[k]`` neighbours per node in convolution k (input
    convolution first)."""

    batch_size: int | None = 256
    fanouts: tuple[int, ...] = (25, 10)
    name: str = field(default="graphsage", init=False)

    def __post_init__(self):
        _check_batch("batch-size", self.batch_size)
        for k, s in enumerate(self.fanouts):
            if not _is_count(s):
                raise ConfigError(f"fanouts[{k}]={s!r}: a fan-out must be an integer >= 1")
        object.__setattr__(self, "fanouts", tuple(int(s) for s in self.fanouts))

    def check(self, num_convs: int) -> None:
        if len(self.fanouts) != num_convs:
            raise ConfigError(
                f"GraphSAGE sampling has {len(self.fanouts)} fan-outs {self.fanouts}; the model has "
                f"{num_convs} convolutions and needs one per convolution"
            )

    def batch_for(self, num_train: int) -> int:
        return num_train if self.batch_size is None else min(self.batch_size, num_train)

    def sample(self, view, train_idx, shared, generator=None) -> LayeredSample:
        self.check(len(shared))
        batch = select_batch(train_idx, self.batch_size, generator)
        fanouts = self.fanouts
        return _nodewise(view, batch, shared, lambda k, deg: deg.clamp(max=fanouts[k]), generator)


@dataclass(frozen=True)
class LayerWise:
    """FastGCN-style layer-wise importance sampling: ``layer_size`` draws per convolution."""

    batch_size: int | None = 256
    layer_size: int = 256
    name: str = field(default="fastgcn", init=False)

    def __post_init__(self):
        _check_batch("batch-size", self.batch_size)
        if not _is_count(self.layer_size):
            raise ConfigError(f"layer-size={self.layer_size!r}: must be an integer >= 1")

    def check(self, num_convs: int) -> None:
        return None

    def batch_for(self, num_train: int) -> int:
        return num_train if self.batch_size is None else min(self.batch_size, num_train)

    def sample(self, view, train_idx, shared, generator=None) -> LayeredSample:
        num_convs = len(shared)
        n = view.num_own
        batch = select_batch(train_idx, self.batch_size, generator)
        nodes: list[torch.Tensor] = [torch.empty(0, dtype=torch.long)] * num_convs + [batch]
        remote: list[torch.Tensor] = [torch.empty(0, dtype=torch.long)] * num_convs
        convs: list[ConvEdges] = [None] * num_convs  # type: ignore[list-item]
        for k in reversed(range(num_convs)):
            adj = view.adjacency(shared[k])
            width = n + (adj.num_remote if shared[k] else 0)
            q = adj.column_sq_norms()[:width]
            targets = nodes[k + 1]
            if float(q.sum()) <= 0:
                raise ValueError(f"client {view.graph.client_id} has no node to sample from")
            q = q / q.sum()
            draws = torch.multinomial(q, self.layer_size, replacement=True, generator=generator)
            drawn, times = torch.unique(draws, return_counts=True)
            scale = torch.zeros(width, dtype=torch.float64)
            scale[drawn] = times.to(torch.float64) / (self.layer_size * q[drawn])
            t, edge = adj.rows(targets)
            col = torch.cat([adj.col[edge], targets])
            t = torch.cat([t, torch.arange(targets.numel())])
            w = torch.cat([adj.weight[edge], adj.self_weight[targets]])
            keep = scale[col] > 0
            t, col, w = t[keep], col[keep], w[keep] * scale[col[keep]]
            nodes[k], remote[k], convs[k] = _layer(targets, t, col, w, n, lower=drawn[drawn < n])
        return LayeredSample(nodes=nodes, remote=remote, convs=convs)


def make_scheme(
    name: str,
    num_convs: int = 2,
    *,
    batch_size: int | None = 256,
    probs: Sequence[float] | None = None,
    fanouts: Sequence[int] = (25, 10),
    layer_size: int = 256,
) -> Scheme:
    """A scheme by name (``full``, ``fedgraph``, ``graphsage``, ``fastgcn``) with the paper's defaults
    (batch 256; GraphSAGE fan-outs 25 and 10; FastGCN layer size 256; FedGraph probabilities default to 1)."""
    if name == "full":
        scheme: Scheme = FullBatch()
    elif name == "fedgraph":
        if batch_size is None:
            raise ConfigError("fedgraph sampling needs a mini-batch size kappa (an integer >= 1)")
        scheme = SamplingPolicy(kappa=batch_size, probs=tuple(probs) if probs is not None else (1.0,) * num_convs)
    elif name == "graphsage":
        scheme = NodeWise(batch_size=batch_size, fanouts=tuple(fanouts))
    elif name == "fastgcn":
        scheme = LayerWise(batch_size=batch_size, layer_size=layer_size)
    else:
        raise ConfigError(f"unknown sampling scheme {name!r}; valid choices: {', '.join(SCHEMES)}")
    scheme.check(num_convs)
    return scheme
