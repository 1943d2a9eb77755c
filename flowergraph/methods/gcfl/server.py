"""GCFL (Xie et al., *Federated Graph Classification over Non-IID Graphs*, NeurIPS 2021): clustered federated
learning driven by the clients' weight updates. One of FedStar's baselines (``method=gcfl``), usable
with any method's clients: the server only looks at the arrays they send back.

Algorithm (the authors' ``run_gcfl``; every round r, with the clients of one cluster all holding its model
``W_c``):

1. every sampled client trains from its cluster's model and returns its arrays ``W_i``; the server forms the
   update ``dW_i = W_i - W_c`` (flattened over the shared arrays);
2. for every cluster c: ``mean_norm = ||mean_i dW_i||`` (unweighted mean over its clients) and
   ``max_norm = max_i ||dW_i||``. When ``mean_norm < eps1`` (the cluster as a whole is near a stationary
   point) and ``max_norm > eps2`` (some client still pulls away), the cluster has more than two clients
   (``min_split_size`` 3) and r > ``warmup`` (20), it is bipartitioned: the complete graph over its clients,
   edge weight ``cos(dW_i, dW_j) + 1``, is cut by a minimum cut (Stoer-Wagner, as the authors' ``min_cut``);
3. each cluster's new model is the weighted mean (the run's ``Aggregator``, train-size weights by default) of
   its clients' arrays, i.e. ``W_c + sum_i a_i dW_i / sum_i a_i`` (the authors' ``aggregate_clusterwise``);
4. the next round sends each client its cluster's model (:meth:`client_model`), for training and for
   evaluation (fused or separate).

The shared arrays are what the clients send (FedStar's GCFL baseline: the GIN layers, as the authors'
``GIN_server`` holds only ``graph_convs``); everything else stays on the client. The "global" arrays of the
run (checkpointed as the global model, ``evaluate_fn``) are the mean over all accepted updates, the authors'
"FL model"; clients never receive them once clusters have split.

Deviations, documented in docs/methods/fedavg.md: (a) a cluster only splits in a round where every one of its clients
reported an update (with sampling or failures the authors' code, which always has every client, has no rule);
the split is postponed otherwise and the record says so; (b) the reported accuracy is each client's final test
accuracy with its cluster's model, like every other method here; the authors' script reports, per client, the
best accuracy over the models it cached before each split and at the end (``frame.max(axis=1)``), which can
only be higher.

Clusters are groups of the strategy's :class:`~flowergraph.strategies.bank.ModelBank` (``group:c0``, ...): the
bank sends each client its cluster's model and checkpoints the clusters and their models; this class adds only
the splitting rule.

Records: every round's record holds ``gcfl``: the clusters after the round (lists of partition ids), per
cluster before the round's split its ``mean_norm``, ``max_norm`` and clients, and any split (``split``: the
cluster, the two halves, the norms; also logged). State (checkpoints): the bank (clusters and their models) and
the split history, so a resumed run continues with the same clusters.
"""

from __future__ import annotations

from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.common.logger import log

from ...strategies.nodes import Node
from ...strategies.aggregation import RoundNotAggregated, Update
from ...strategies.bank import GLOBAL, NamedArrays, group_slot
from ...strategies.policy import FederationPolicy
from ...strategies.weighted import WeightedAveraging

# GCFL's thresholds for its multi-dataset groups (the authors' runnerfile); FedStar's settings use the same
# datasets: CHEM = "molecules", BIO-CHEM = "biochem", BIO-CHEM-SN = "mix" (BIO-SN-CV has no GCFL value: "mix").
GCFL_EPS = {"CHEM": (0.07, 0.28), "BIO-CHEM": (0.07, 0.35), "BIO-CHEM-SN": (0.08, 0.4), "BIO-SN-CV": (0.08, 0.4)}


def min_cut(similarity: np.ndarray) -> tuple[list[int], list[int]]:
    """Bipartition of the complete graph whose edge (i, j) weighs ``similarity[i, j]`` by a minimum cut
    (Stoer-Wagner; the diagonal is ignored). Returns the two sides as sorted index lists, the side holding
    index 0 first."""
    import networkx as nx

    n = len(similarity)
    if n < 2:
        raise ValueError(f"a cut needs at least 2 nodes, got {n}")
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    for i in range(n):
        for j in range(i + 1, n):
            graph.add_edge(i, j, weight=float(similarity[i, j]))
    _, (a, b) = nx.stoer_wagner(graph)
    a, b = sorted(int(x) for x in a), sorted(int(x) for x in b)
    return (a, b) if 0 in a else (b, a)


def update_similarity(updates: np.ndarray) -> np.ndarray:
    """``cos(dW_i, dW_j) + 1`` for the rows of ``updates`` (GCFL's ``pairwise_angles``; a zero update has
    similarity 1 with everything)."""
    norms = np.linalg.norm(updates, axis=1)
    gram = updates @ updates.T
    return gram / np.maximum(np.outer(norms, norms), 1e-12) + 1.0


class GCFLStrategy(WeightedAveraging):
    """Clustered federated learning by update similarity (see the module docstring).

    ``eps1``: split a cluster only when the norm of its mean update is below this; ``eps2``: ... and its
    largest client update norm above this; ``warmup``: no split in rounds 1..warmup; ``min_split_size``: fewest
    clients a cluster needs to split. ``policy`` and every other argument are
    :class:`~flowergraph.strategies.WeightedAveraging`'s.
    """

    def __init__(
        self,
        policy: FederationPolicy | None = None,
        *,
        eps1: float = 0.07,
        eps2: float = 0.28,
        warmup: int = 20,
        min_split_size: int = 3,
        **kwargs,
    ) -> None:
        super().__init__(policy, **kwargs)
        if not (eps1 > 0 and eps2 > 0):
            raise ValueError(f"eps1 and eps2 must be > 0, got eps1={eps1}, eps2={eps2}")
        if warmup < 0 or min_split_size < 2:
            raise ValueError(f"warmup must be >= 0 and min_split_size >= 2, got {warmup}, {min_split_size}")
        self.eps1, self.eps2 = float(eps1), float(eps2)
        self.warmup, self.min_split_size = int(warmup), int(min_split_size)
        self.splits: list[dict[str, Any]] = []
        self._names = 0  # cluster names handed out so far (c0, c1, ...)

    def __repr__(self) -> str:
        return (
            f"GCFLStrategy(num_clients={self.num_clients}, eps1={self.eps1}, eps2={self.eps2}, "
            f"clusters={self.clusters})"
        )

    # ------------------------------------------------------------------------------------------- clusters
    @property
    def clusters(self) -> list[list[int]]:
        """The clusters, as lists of partition ids (one cluster of everyone until the first round ends)."""
        groups = self.bank.groups
        return list(groups.values()) if groups else [list(range(self.num_clients))]

    def cluster_of(self, partition: int) -> int:
        """Index of the cluster holding ``partition`` (KeyError for a partition outside the federation)."""
        for k, members in enumerate(self.clusters):
            if partition in members:
                return k
        raise KeyError(f"partition {partition} is in no cluster; clusters: {self.clusters}")

    def model_of(self, partition: int) -> NamedArrays:
        """The arrays the client holding ``partition`` trains from (its cluster's model)."""
        return self.bank.model_for(partition)

    def client_model(self, proxy: Node) -> tuple[str, list[str] | None]:
        if len(self.clusters) == 1:  # before any split every client trains the federation-wide model
            return GLOBAL, None
        return super().client_model(proxy)

    def _new_name(self) -> str:
        name = f"c{self._names}"
        self._names += 1
        return name

    # ---------------------------------------------------------------------------------------- aggregation
    def aggregate_updates(self, server_round: int, updates: list[Update], weights: list[float]):
        groups = self.bank.groups or {self._new_name(): list(range(self.num_clients))}
        bases = {name: dict(self.bank.get(group_slot(name)) or self.bank.global_model or {}) for name in groups}
        keys = list(self.bank.global_model or {})
        by_partition = {}
        for update, weight in zip(updates, weights):
            pid = update.partition
            name = next((g for g, members in groups.items() if pid in members), None) if pid is not None else None
            if name is None:
                log(
                    WARNING,
                    "round %s: client %s reports no partition id of this federation; its update counts "
                    "for the federation-wide model only",
                    server_round,
                    update.client,
                )
                continue
            base = bases[name]
            flat = (
                np.concatenate(
                    [
                        (np.asarray(a, np.float64) - np.asarray(base[k], np.float64)).ravel()
                        for k, a in update.named(keys).items()
                    ]
                )
                if base
                else np.zeros(0)
            )
            by_partition[pid] = (update, weight, flat)
        info: dict[str, Any] = {"norms": []}
        new_groups: dict[str, list[int]] = {}
        new_bases: dict[str, NamedArrays] = {}
        for name, members in groups.items():
            reported = [p for p in members if p in by_partition]
            if not reported:
                new_groups[name], new_bases[name] = members, bases[name]
                continue
            dws = np.stack([by_partition[p][2] for p in reported])
            mean_norm = float(np.linalg.norm(dws.mean(axis=0)))
            max_norm = float(np.linalg.norm(dws, axis=1).max())
            info["norms"].append(
                {"clients": members, "reported": len(reported), "mean_norm": mean_norm, "max_norm": max_norm}
            )
            wants = (
                mean_norm < self.eps1
                and max_norm > self.eps2
                and len(members) >= self.min_split_size
                and server_round > self.warmup
            )
            if wants and len(reported) < len(members):
                info.setdefault("postponed", []).append(
                    {"cluster": members, "missing": sorted(set(members) - set(reported))}
                )
                log(
                    WARNING,
                    "round %s: GCFL would split cluster %s but clients %s sent no update; postponed",
                    server_round,
                    members,
                    sorted(set(members) - set(reported)),
                )
                wants = False
            if not wants:
                new_groups[name], new_bases[name] = members, bases[name]
                continue
            left, right = min_cut(update_similarity(dws))
            halves = [[reported[i] for i in left], [reported[i] for i in right]]
            split = {
                "round": server_round,
                "cluster": members,
                "into": halves,
                "mean_norm": mean_norm,
                "max_norm": max_norm,
            }
            self.splits.append(split)
            info.setdefault("split", []).append(split)
            log(
                INFO,
                "round %s: GCFL splits cluster %s into %s and %s (mean update norm %.4f < eps1 %g, "
                "largest %.4f > eps2 %g)",
                server_round,
                members,
                halves[0],
                halves[1],
                mean_norm,
                self.eps1,
                max_norm,
                self.eps2,
            )
            for half in halves:
                half_name = self._new_name()
                new_groups[half_name], new_bases[half_name] = half, bases[name]
        for name, members in new_groups.items():
            group = [by_partition[p] for p in members if p in by_partition]
            model = new_bases[name]
            if group:
                try:
                    model = self.aggregator.aggregate_named(
                        [u for u, _, _ in group], [w for _, w, _ in group], like=new_bases[name]
                    )
                except RoundNotAggregated as exc:
                    log(WARNING, "round %s: cluster %s keeps its model: %s", server_round, members, exc)
                    info.setdefault("not_aggregated", []).append({"cluster": members, "reason": str(exc)})
            self.bank.set(group_slot(name), model)
        for name in groups:
            if name not in new_groups:
                self.bank.drop(group_slot(name))
        self.bank.set_groups(new_groups)
        info["clusters"] = self.clusters
        self.book.start(server_round)["gcfl"] = info
        try:  # the federation-wide "FL model" (what a checkpoint and evaluate_fn see)
            return super().aggregate_updates(server_round, updates, weights)
        except RoundNotAggregated as exc:
            log(
                WARNING,
                "round %s: the federation-wide model is kept (%s); the clusters' models are updated",
                server_round,
                exc,
            )
            return None

    # --------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gcfl": {"splits": self.splits, "names": self._names}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        gcfl = state.get("gcfl") or {}
        if "models" in gcfl and "bank" not in state:  # a checkpoint of the first spine (clusters kept here)
            state = dict(state)
            clusters = [[int(p) for p in c] for c in gcfl["clusters"]]
            models = gcfl.get("models")
            state["bank"] = {
                "global_keys": None,
                "groups": {f"c{k}": c for k, c in enumerate(clusters)},
                "models": {}
                if models is None
                else {
                    group_slot(f"c{k}"): {"keys": [str(i) for i in range(len(m))], "arrays": list(m)}
                    for k, m in enumerate(models)
                },
            }
            gcfl = {"splits": gcfl.get("splits") or [], "names": len(clusters)}
        super().load_state_dict(state)
        self.splits = list(gcfl.get("splits") or [])
        self._names = int(gcfl.get("names", 0))
