"""FedGraph's server maths apart from the agent (Flower-free): eq. 8 aggregation and the eq. 9 reward.

Aggregation (eq. 8), over named arrays:

    W_bar = sum_i kappa_i W_i / sum_i kappa_i

with kappa_i client i's mini-batch size in the round (its ``RoundResult.num_samples``). Accumulated in float64,
returned in each array's own dtype.

Reward (eq. 9). The extracted paper text reads ``r[t] = Omega(lambda[t] - Lambda) - alpha(delta[t] - beta)``;
its prose ("the base of exponential function, i.e., Omega, as 128", "we use an exponential function here",
following FAVOR, ref. [24]) makes the first term an exponential:

    r[t] = Omega ** (lambda[t] - Lambda) - alpha * (delta[t] - beta)

with lambda[t] the round's test accuracy (a fraction in [0, 1]), Lambda the target accuracy, delta[t] the round's
completion time in seconds. The paper keeps alpha (delta - beta) close to 1 "by profiling":
:func:`time_penalty_alpha` picks alpha from profiled round times so that the mean penalty is 1.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ....errors import ConfigError

OMEGA = 128.0


def aggregate(updates: Sequence[tuple[Mapping[str, np.ndarray], float]]) -> dict[str, np.ndarray]:
    """Eq. 8: the mean of the clients' named arrays weighted by their mini-batch sizes.

    ``updates``: (arrays by name, kappa_i) per client. Every client must send the same names and shapes;
    weights must be >= 0 with a positive sum (ValueError names what is wrong)."""
    if not updates:
        raise ValueError("no client updates to aggregate")
    names = list(updates[0][0])
    total = 0.0
    for i, (arrays, weight) in enumerate(updates):
        if list(arrays) != names:
            raise ValueError(f"update {i} has arrays {list(arrays)}, update 0 has {names}")
        if not (isinstance(weight, (int, float, np.integer, np.floating)) and math.isfinite(weight) and weight >= 0):
            raise ValueError(f"update {i} has weight {weight!r}; a mini-batch size must be a finite number >= 0")
        total += float(weight)
    if total <= 0:
        raise ValueError(f"the weights sum to {total}; at least one client must have trained on labelled nodes")
    out: dict[str, np.ndarray] = {}
    for name in names:
        ref = np.asarray(updates[0][0][name])
        acc = np.zeros(ref.shape, dtype=np.float64)
        for i, (arrays, weight) in enumerate(updates):
            value = np.asarray(arrays[name])
            if value.shape != ref.shape:
                raise ValueError(f"array {name!r} of update {i} has shape {value.shape}, update 0's {ref.shape}")
            acc += float(weight) * value.astype(np.float64)
        out[name] = (acc / total).astype(ref.dtype)
    return out


def reward(
    accuracy: float,
    round_time: float,
    target_accuracy: float,
    omega: float = OMEGA,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> float:
    """Eq. 9: ``omega ** (accuracy - target_accuracy) - alpha * (round_time - beta)`` (accuracies as fractions)."""
    for name, value in (("accuracy", accuracy), ("target_accuracy", target_accuracy)):
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{name}={value!r}: an accuracy is a fraction in [0, 1]")
    if not (math.isfinite(round_time) and round_time >= 0):
        raise ValueError(f"round_time={round_time!r}: must be a finite number of seconds >= 0")
    if not (math.isfinite(omega) and omega > 1):
        raise ConfigError(f"omega={omega!r}: the base of the exponential must be > 1 (the paper uses 128)")
    return float(omega ** (accuracy - target_accuracy) - alpha * (round_time - beta))


def time_penalty_alpha(round_times: Sequence[float], beta: float = 0.0, target: float = 1.0) -> float:
    """alpha such that the mean profiled penalty ``alpha * (delta - beta)`` equals ``target`` (the paper keeps it
    close to 1)."""
    times = np.asarray(list(round_times), dtype=np.float64)
    if times.size == 0 or not np.all(np.isfinite(times)):
        raise ValueError(f"need at least one finite profiled round time, got {list(round_times)!r}")
    spread = float(times.mean() - beta)
    if spread <= 0:
        raise ValueError(f"beta={beta} is not below the mean profiled round time {times.mean():.4g} s")
    return target / spread
