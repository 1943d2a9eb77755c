"""Aggregation rules: how valid client updates become the new global arrays (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

An :class:`Aggregator` gives each accepted update a weight (:meth:`Aggregator.weight`) and combines the updates
(:meth:`Aggregator.aggregate`). :class:`WeightedMean` is sample-weighted averaging (FedAvg):
``w = sum_k a_k w_k / sum_k a_k`` with ``a_k`` the client's training-set size (``train-size``), its reported
``batch_size`` metric (``batch-size``) or 1 (``uniform``), accumulated in float64 and cast back to the global
model's dtypes.

A weight that cannot be computed because of how the run is configured (``batch-size`` weighting with a client
that reports no ``batch_size``) raises :class:`AggregationConfigError`: the strategy fails the run with that
message instead of dropping the client round after round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .common import weighted_average

WEIGHTINGS = ("train-size", "batch-size", "uniform")


class AggregationConfigError(RuntimeError):
    """The run's configuration makes an update impossible to weigh or combine (not a client fault)."""


@dataclass
class Update:
    """One client's accepted update."""

    client: str  # label (partition id)
    arrays: list[np.ndarray]
    num_examples: int
    metrics: dict[str, Any] = field(default_factory=dict)


class Aggregator:
    """Base class: ``weight`` per update, ``aggregate`` of updates and weights (``like``: the global arrays,
    whose dtypes the result keeps)."""

    name = "aggregator"

    def weight(self, update: Update) -> float:
        return float(update.num_examples)

    def aggregate(self, updates: list[Update], weights: list[float],
                  like: list[np.ndarray] | None = None) -> list[np.ndarray]:
        raise NotImplementedError


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
                    f"use weighting 'train-size' or 'uniform', or a client that reports its mini-batch size")
            return float(update.metrics["batch_size"])
        return float(update.num_examples)

    def aggregate(self, updates: list[Update], weights: list[float],
                  like: list[np.ndarray] | None = None) -> list[np.ndarray]:
        return weighted_average([u.arrays for u in updates], weights, like=like)
