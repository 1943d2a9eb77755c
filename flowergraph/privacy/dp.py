"""Differential-privacy arithmetic shared by the server and the clients (Flower-free)."""

from __future__ import annotations

import math


def local_noise_stddev(sensitivity: float, epsilon: float, delta: float) -> float:
    """Flower's ``LocalDpMod`` noise: the classic Gaussian mechanism, ``S sqrt(2 ln(1.25 / delta)) / epsilon``."""
    if sensitivity <= 0 or epsilon <= 0 or not 0 < delta < 1:
        raise ValueError(f"need sensitivity > 0, epsilon > 0 and 0 < delta < 1; got {sensitivity}, {epsilon}, {delta}")
    return float(sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
