"""Aggregation rules: how valid client updates become the new global arrays (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

An :class:`Aggregator` gives each accepted update a weight (:meth:`Aggregator.weight`) and combines the updates
(:meth:`Aggregator.aggregate` on lists of arrays; :meth:`Aggregator.aggregate_named` on named arrays, where a
partial update - some of the model's arrays - counts only for the arrays it carries: each array is the weighted
mean over the updates that sent it, and an array nobody sent keeps its value). :class:`WeightedMean` is
sample-weighted averaging (FedAvg):
``w = sum_k a_k w_k / sum_k a_k`` with ``a_k`` the client's training-set size (``train-size``), its reported
``batch_size`` metric (``batch-size``) or 1 (``uniform``), accumulated in float64 and cast back to the global
model's dtypes.

A weight that cannot be computed because of how the run is configured (``batch-size`` weighting with a client
that reports no ``batch_size``) raises :class:`AggregationConfigError`: the strategy fails the run with that
message instead of dropping the client round after round.

Before any rule, :func:`accept_updates` turns a round's fit replies into the updates it combines: each is decoded
and checked by name against the arrays its client was sent (:func:`~flowergraph.strategies.common.check_named_update`),
weighed, and, with ``max_update_norm``, compared with the round's median update norm (:func:`refuse_outliers`).

Byzantine-robust rules (run config ``aggregator``), each Flower's own function (its legacy ``aggregate``
module's, reached through :mod:`flowergraph._flower`: the Message API has no public one) applied to the accepted
updates, the result cast to the global dtypes:

* :class:`CoordinateMedian` (``median``): the coordinate-wise median of the updates (weights ignored);
* :class:`TrimmedMean` (``trimmed-mean``): per coordinate, drop the ``trim`` fraction of largest and of smallest
  values, average the rest (weights ignored); a round whose valid updates are too few for it to drop any
  (``int(trim x n) = 0``) is not aggregated rather than silently averaged (the settings refuse such a run);
* :class:`Krum` (``krum``: the one update with the smallest sum of squared distances to its n - f - 2 nearest
  neighbours, for f = ``malicious`` assumed attackers; ``multi-krum``: the ``keep`` best-scored updates averaged
  with the weighting's weights, ``keep`` 0 meaning n - f).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from logging import WARNING
from typing import Any, Callable, Mapping

import numpy as np
from flwr.common.logger import log

from .. import wire
from ..settings.choices import AGGREGATORS, WEIGHTINGS
from .common import arrays_bytes, check_named_update, config_bytes, weighted_average, weighted_metric
from .nodes import Node, Reply


class AggregationConfigError(RuntimeError):
    """The run's configuration makes an update impossible to weigh or combine (not a client fault)."""


class RoundNotAggregated(RuntimeError):
    """This round's valid updates cannot be combined by the rule (e.g. too few for Krum): the global model is
    kept for the round, as when fewer than ``min_clients`` valid updates remain."""


@dataclass
class Update:
    """One client's accepted update: its label (partition id), its arrays, the number of examples it trained on,
    its metrics, and the names of its arrays (``keys``; None: the whole model, in the model's order)."""

    client: str  # label (partition id)
    arrays: list[np.ndarray]
    num_examples: int
    metrics: dict[str, Any] = field(default_factory=dict)
    keys: list[str] | None = None

    @property
    def partition(self) -> int | None:
        return int(self.client) if self.client.isdigit() else None

    def named(self, model_keys: list[str]) -> dict[str, np.ndarray]:
        """The update's arrays by name (``model_keys``: the names of the model it was trained from)."""
        return dict(zip(self.keys if self.keys is not None else model_keys, self.arrays))


class Aggregator:
    """Base class: ``weight`` per update, ``aggregate`` of updates and weights (``like``: the global arrays,
    whose dtypes the result keeps)."""

    name = "aggregator"

    def weight(self, update: Update) -> float:
        return float(update.num_examples)

    def aggregate(
        self, updates: list[Update], weights: list[float], like: list[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        raise NotImplementedError

    def aggregate_named(
        self, updates: list[Update], weights: list[float], like: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The new model by name from updates of the model ``like`` (see the module docstring)."""
        keys = list(like)
        if all(u.keys is None or list(u.keys) == keys for u in updates):  # whole updates: the rule itself
            return dict(zip(keys, self.aggregate(updates, weights, like=list(like.values()))))
        return self.aggregate_partial(updates, weights, like)

    def aggregate_partial(
        self, updates: list[Update], weights: list[float], like: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        raise AggregationConfigError(
            f"aggregator {self.name!r} combines whole updates only; a client sent part "
            f"of the model (a partial update): use aggregator 'mean'"
        )


class WeightedMean(Aggregator):
    """Weighted averaging with ``weighting`` in :data:`WEIGHTINGS`."""

    name = "mean"

    def __init__(self, weighting: str = "train-size") -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; valid choices: {', '.join(WEIGHTINGS)}")
        self.weighting = weighting

    def __repr__(self) -> str:
        return f"WeightedMean(weighting={self.weighting!r})"

    def weight(self, update: Update) -> float:
        if self.weighting == "uniform":
            return 1.0
        if self.weighting == "batch-size":
            if "batch_size" not in update.metrics:
                raise AggregationConfigError(
                    f"weighting 'batch-size' needs a 'batch_size' metric from every client, and client "
                    f"{update.client} reports none (its metrics: {', '.join(sorted(update.metrics)) or 'none'}); "
                    f"use weighting 'train-size' or 'uniform', or a client that reports its mini-batch size"
                )
            return float(update.metrics["batch_size"])
        return float(update.num_examples)

    def aggregate(
        self, updates: list[Update], weights: list[float], like: list[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        return weighted_average([u.arrays for u in updates], weights, like=like)

    def aggregate_partial(
        self, updates: list[Update], weights: list[float], like: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Each array: the weighted mean over the updates that sent it; an array nobody sent keeps its value."""
        keys = list(like)
        by_update = [u.named(keys) for u in updates]
        out: dict[str, np.ndarray] = {}
        for key in keys:
            senders = [(w, arrays[key]) for arrays, w in zip(by_update, weights) if key in arrays]
            total = float(sum(w for w, _ in senders))
            if not senders or total <= 0:
                out[key] = np.asarray(like[key])
                continue
            acc = np.zeros(np.shape(like[key]), dtype=np.float64)
            for w, arr in senders:
                acc += (w / total) * np.asarray(arr, dtype=np.float64)
            out[key] = acc.astype(np.asarray(like[key]).dtype)
        return out


class _FlowerRule(Aggregator):
    """An aggregation rule of Flower's (:func:`flowergraph._flower.aggregate_rule`), on the accepted updates."""

    def __init__(self, weighting: str = "train-size") -> None:
        self.mean = WeightedMean(weighting)

    def weight(self, update: Update) -> float:
        return self.mean.weight(update)

    def _combine(self, results: list[tuple[list[np.ndarray], int]]) -> list[np.ndarray]:
        raise NotImplementedError

    def aggregate(
        self, updates: list[Update], weights: list[float], like: list[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        # Flower's functions take (arrays, num_examples) pairs: the weights, as integers (uniform = 1 each)
        out = self._combine([(u.arrays, max(1, int(round(w)))) for u, w in zip(updates, weights)])
        dtypes = [a.dtype for a in (like if like is not None else updates[0].arrays)]
        return [np.asarray(a).astype(d) for a, d in zip(out, dtypes)]


class CoordinateMedian(_FlowerRule):
    name = "median"

    def __repr__(self) -> str:
        return "CoordinateMedian()"

    def _combine(self, results):
        from .._flower import aggregate_rule

        return aggregate_rule("median")(results)


class TrimmedMean(_FlowerRule):
    name = "trimmed-mean"

    def __init__(self, trim: float = 0.1, weighting: str = "train-size") -> None:
        if not 0 <= trim < 0.5:
            raise ValueError(f"trim must be in [0, 0.5), got {trim}")
        super().__init__(weighting)
        self.trim = trim

    def __repr__(self) -> str:
        return f"TrimmedMean(trim={self.trim})"

    def _combine(self, results):
        from .._flower import aggregate_rule

        if int(self.trim * len(results)) == 0:  # Flower's trim_mean drops int(trim x n) at each end
            raise RoundNotAggregated(
                f"trimmed mean with trim={self.trim} over {len(results)} valid updates drops "
                f"nothing (int({self.trim} x {len(results)}) = 0): it would be a plain mean"
            )

        return aggregate_rule("trimmed-mean")(results, self.trim)


class Krum(_FlowerRule):
    name = "krum"

    def __init__(self, malicious: int = 1, keep: int | None = None, weighting: str = "train-size") -> None:
        if malicious < 0:
            raise ValueError(f"malicious must be >= 0, got {malicious}")
        super().__init__(weighting)
        self.malicious = malicious
        self.keep = keep  # None: Krum (one update); 0: multi-Krum with n - f; m > 0: multi-Krum with m

    def __repr__(self) -> str:
        return f"Krum(malicious={self.malicious}, keep={self.keep})"

    def _combine(self, results):
        from .._flower import aggregate_rule

        n = len(results)
        if n < 2 * self.malicious + 3:
            raise RoundNotAggregated(
                f"Krum with malicious={self.malicious} needs at least 2 x {self.malicious} + 3 "
                f"= {2 * self.malicious + 3} valid updates, got {n}"
            )
        keep = 0 if self.keep is None else (self.keep or n - self.malicious)
        return aggregate_rule("krum")(results, self.malicious, min(keep, n))


def make_aggregator(
    name: str, *, weighting: str = "train-size", trim: float = 0.1, malicious: int = 1, keep: int = 0
) -> Aggregator:
    """The rule called ``name`` (:data:`AGGREGATORS`)."""
    if name == "mean":
        return WeightedMean(weighting)
    if name == "median":
        return CoordinateMedian(weighting)
    if name == "trimmed-mean":
        return TrimmedMean(trim, weighting)
    if name == "krum":
        return Krum(malicious, None, weighting)
    if name == "multi-krum":
        return Krum(malicious, keep, weighting)
    raise ValueError(f"unknown aggregator {name!r}; valid choices: {', '.join(AGGREGATORS)}")


# ------------------------------------------------------------------------------------ accepting a round's updates
def accept_updates(
    server_round: int,
    results: list[tuple[Node, Reply]],
    rec: dict[str, Any],
    *,
    aggregator: Aggregator,
    label: Callable[[Node, Any], str],
    reference: Callable[[Node], Mapping[str, np.ndarray] | None],
    add_bytes: Callable[..., None],
    update_kind: str = "weights",
    max_update_norm: float = 0.0,
) -> tuple[list[Update], list[float]]:
    """The round's accepted updates and their weights. Each fit reply is decoded and checked by name against
    ``reference(proxy)``, the arrays its client was sent (any of them, named, when ``update_kind`` is
    ``"partial"``), and weighed by ``aggregator``; a malformed one, or one whose weight is negative or not finite,
    is rejected (logged, listed under ``rec["rejected"]``). With ``max_update_norm`` > 0 and at least 3 accepted
    updates, those :func:`refuse_outliers` refuses are rejected too. Each reply's bytes go to ``add_bytes``; each
    accepted client's size, weight and fit metrics to ``rec["clients"]``; ``rec`` gets ``num_fit`` and
    ``train_loss``. A weight the run's configuration cannot compute (:class:`AggregationConfigError`) fails the
    run: RuntimeError naming the round."""
    updates, weights, rejected, norms = [], [], [], []
    for proxy, res in results:
        add_bytes(up=arrays_bytes(res.arrays) + config_bytes(res.metrics))
        name = label(proxy, res.metrics)
        sent = reference(proxy) or {}
        update, problem = _decode(res, name, sent, update_kind == "partial")
        if problem is None:
            try:
                weight = aggregator.weight(update)
            except AggregationConfigError as exc:
                raise RuntimeError(f"round {server_round}: {exc}") from None
            if not (weight >= 0 and math.isfinite(weight)):
                problem = f"invalid aggregation weight {weight}"
        if problem is not None:
            log(WARNING, "round %s: rejected the update of client %s: %s", server_round, name, problem)
            rejected.append({"client": name, "reason": problem})
            continue
        updates.append(update)
        weights.append(weight)
        if max_update_norm > 0:
            norms.append(update_norm(update, sent, gradients=update_kind == "gradients"))
        fit_metrics = {k: v for k, v in res.metrics.items() if isinstance(v, (int, float))}
        rec.setdefault("clients", {}).setdefault(name, {}).update(
            {
                "num_train": int(res.num_examples),
                "fit_weight": weight,
                **{f"fit_{k}": v for k, v in fit_metrics.items() if k != wire.NUM_TRAIN},
            }
        )
    if norms and len(updates) >= 3:
        updates, weights = refuse_outliers(server_round, updates, weights, norms, max_update_norm, rejected, rec)
    rec["rejected"] = rejected
    rec["num_fit"] = len(updates)
    rec["train_loss"] = weighted_metric((u.metrics.get(wire.TRAIN_LOSS), w) for u, w in zip(updates, weights))
    return updates, weights


def _decode(res: Reply, label: str, sent: Mapping[str, np.ndarray], partial: bool) -> tuple[Update, str | None]:
    """A fit reply's update and why it is malformed (None when it is not)."""
    arrays = list(res.arrays)
    try:
        keys = wire.decode_keys(res.metrics, len(arrays))
    except ValueError as exc:
        return Update(label, arrays, int(res.num_examples), dict(res.metrics)), str(exc)
    problem = check_named_update(arrays, keys, sent, partial=partial)
    return Update(
        label, arrays, int(res.num_examples), dict(res.metrics), keys=list(keys) if keys is not None else list(sent)
    ), problem


def update_norm(update: Update, sent: Mapping[str, np.ndarray], *, gradients: bool = False) -> float:
    """The L2 norm of an accepted update: of the arrays themselves (``gradients``), else of their difference to
    ``sent``, the arrays the client was sent."""
    if gradients:
        return float(math.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in update.arrays)))
    keys = update.keys if update.keys is not None else list(sent)
    total = 0.0
    for key, array in zip(keys, update.arrays):
        diff = np.asarray(array, dtype=np.float64) - np.asarray(sent[key], dtype=np.float64)
        total += float(np.sum(np.square(diff)))
    return math.sqrt(total)


def refuse_outliers(
    server_round: int,
    updates: list[Update],
    weights: list[float],
    norms: list[float],
    limit: float,
    rejected: list[dict[str, str]],
    rec: dict[str, Any],
) -> tuple[list[Update], list[float]]:
    """``max_update_norm``: the updates whose norm exceeds ``limit`` times the round's median norm are refused
    (logged, listed in ``rejected``, their rows dropped from ``rec["clients"]``); the others are returned."""
    median = float(np.median(norms))
    keep_u, keep_w = [], []
    for update, weight, norm in zip(updates, weights, norms):
        if median > 0 and norm > limit * median:
            reason = (
                f"update norm {norm:.4g} is {norm / median:.3g} x the round's median {median:.4g}, above "
                f"max-update-norm={limit:g}"
            )
            log(WARNING, "round %s: refused the update of client %s: %s", server_round, update.client, reason)
            rejected.append({"client": update.client, "reason": reason})
            rec.get("clients", {}).pop(update.client, None)
            continue
        keep_u.append(update)
        keep_w.append(weight)
    return keep_u, keep_w
