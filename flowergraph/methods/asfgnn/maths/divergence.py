"""Label counts, label distributions, the Jensen-Shannon divergence and the arithmetic on named arrays.

Everything here is plain numpy (no torch, no Flower): it is what the clients and the server of ASFGNN compute
outside the networks (Zheng et al., Algorithm 2).

* Client i counts its training labels per class, ``N_i = (n_1, ..., n_J)`` (Algorithm 2, line 6), and
  normalises them, ``Q_i = N_i / sum_j n_j`` (:func:`label_counts`, :func:`label_distribution`).
* The server sums the counts, ``N_s = sum_i N_i`` and ``Q_s = N_s / sum_j N_s[j]`` (lines 18-19,
  :func:`sum_counts`), and averages the clients' discriminators, ``W_s = (1/I) sum_i W_i`` (line 17,
  :func:`average_arrays`; FedAvg's size-weighted mean is the same function with weights).
* Client i computes ``js_i = JS(Q_i || Q_s)`` (line 24, :func:`js_divergence`) and mixes its discriminator with
  the server's, ``W_i <- js_i * W_i + (1 - js_i) * W_s`` (line 25, :func:`mix_arrays`); with the switch off it
  takes ``W_s`` as it is (the paper's "without JS" ablation, Table 6).

The Jensen-Shannon divergence (paper, Eq. 2) with logarithms to base 2::

    M = (P + Q) / 2
    JS(P || Q) = 1/2 KL(P || M) + 1/2 KL(Q || M),   KL(A || B) = sum_x A(x) log2(A(x) / B(x))

with ``0 * log(0 / b) = 0``. In base 2 it lies in [0, 1]: 0 exactly when P = Q, 1 exactly when P and Q have
disjoint supports. It is symmetric in P and Q.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ....errors import ConfigError

Arrays = Mapping[str, np.ndarray]


def label_counts(
    labels: Sequence[int] | np.ndarray, num_classes: int, mask: Sequence[bool] | np.ndarray | None = None
) -> np.ndarray:
    """``N = (n_0, ..., n_{J-1})``: how many of ``labels`` (those where ``mask`` is true) fall in each class.

    Returns an int64 array of length ``num_classes``. ConfigError for a label outside ``0..num_classes-1``.
    """
    if int(num_classes) < 1:
        raise ConfigError(f"num_classes must be >= 1, got {num_classes!r}")
    y = np.asarray(labels).reshape(-1)
    if mask is not None:
        m = np.asarray(mask, dtype=bool).reshape(-1)
        if m.shape != y.shape:
            raise ConfigError(f"mask has {m.size} entries but there are {y.size} labels")
        y = y[m]
    y = y.astype(np.int64)
    bad = y[(y < 0) | (y >= num_classes)]
    if bad.size:
        raise ConfigError(f"label {int(bad[0])} is outside the valid classes 0..{int(num_classes) - 1}")
    return np.bincount(y, minlength=int(num_classes)).astype(np.int64)


def label_distribution(counts: Sequence[float] | np.ndarray) -> np.ndarray:
    """``Q = N / sum_j N[j]`` as float64. ConfigError for negative, non-finite or all-zero counts."""
    c = _as_distribution_input(counts, "counts")
    return c / c.sum()


def sum_counts(counts: Sequence[Sequence[float] | np.ndarray]) -> np.ndarray:
    """The server's ``N_s = sum_i N_i`` (all clients' count vectors must have the same length)."""
    if len(counts) == 0:
        raise ConfigError("sum_counts needs at least one client's counts, got none")
    arrays = [np.asarray(c) for c in counts]
    lengths = sorted({a.shape for a in arrays})
    if len(lengths) != 1 or len(lengths[0]) != 1:
        raise ConfigError(f"every client's counts must be a vector of the same length; got shapes {lengths}")
    return np.sum(arrays, axis=0)


def _as_distribution_input(values, name: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        raise ConfigError(f"{name} is empty")
    if not np.all(np.isfinite(v)):
        raise ConfigError(f"{name} {v.tolist()} contains a non-finite value")
    if np.any(v < 0):
        raise ConfigError(f"{name} {v.tolist()} contains a negative value; counts and probabilities are >= 0")
    if v.sum() <= 0:
        raise ConfigError(f"{name} {v.tolist()} sums to 0: not a distribution")
    return v


def _two_distributions(
    p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray, base: float
) -> tuple[np.ndarray, np.ndarray]:
    """``p`` and ``q`` normalised, checked to have the same classes, and ``base`` checked."""
    p_ = label_distribution(p)
    q_ = label_distribution(q)
    if p_.shape != q_.shape:
        raise ConfigError(f"the two distributions have {p_.size} and {q_.size} entries; they must match")
    if base <= 0 or base == 1:
        raise ConfigError(f"logarithm base must be > 0 and != 1, got {base!r}")
    return p_, q_


def kl_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray, base: float = 2.0) -> float:
    """``KL(P || Q) = sum_x P(x) log(P(x) / Q(x))`` (inputs normalised first; ``0 log 0 = 0``).

    Infinite when P puts mass where Q has none.
    """
    p_, q_ = _two_distributions(p, q, base)
    support = p_ > 0
    if np.any(q_[support] == 0):
        return math.inf
    return float(np.sum(p_[support] * np.log(p_[support] / q_[support])) / math.log(base))


def js_divergence(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray, base: float = 2.0) -> float:
    """``JS(P || Q) = 1/2 KL(P || M) + 1/2 KL(Q || M)``, ``M = (P + Q) / 2`` (paper Eq. 2), log base ``base``.

    ``p`` and ``q`` are counts or probabilities over the same classes (each is normalised first), so a client
    can pass its label counts ``N_i`` and the server's ``N_s`` directly. With the default base 2 the value is in
    [0, 1] (clipped against rounding): 0 for equal distributions, 1 for disjoint supports.
    """
    p_, q_ = _two_distributions(p, q, base)
    m = 0.5 * (p_ + q_)
    value = 0.5 * kl_divergence(p_, m, base) + 0.5 * kl_divergence(q_, m, base)
    upper = 1.0 / math.log2(base)  # ln 2 / ln base: the divergence of disjoint distributions
    return float(min(max(value, 0.0), upper))


def _check_same_arrays(reference: Arrays, other: Arrays, what: str) -> None:
    missing = sorted(set(reference) - set(other))
    extra = sorted(set(other) - set(reference))
    if missing or extra:
        raise ConfigError(
            f"{what}: the array names differ (missing {missing}, unexpected {extra}); "
            f"expected exactly {sorted(reference)}"
        )
    for name, value in reference.items():
        if np.shape(value) != np.shape(other[name]):
            raise ConfigError(f"{what}: array {name!r} has shape {np.shape(other[name])}, expected {np.shape(value)}")


def mix_arrays(local: Arrays, server: Arrays, js: float, use_js: bool = True) -> dict[str, np.ndarray]:
    """The client's update of its discriminator (Algorithm 2, line 25), array by array::

        W_i <- js * W_i + (1 - js) * W_s          (use_js=True)
        W_i <- W_s                                (use_js=False: plain replacement, the "without JS" ablation)

    ``js`` must be in [0, 1]. The arrays keep the dtype of ``local``; both mappings must hold the same names
    and shapes. Returns new arrays (the inputs are not modified).
    """
    _check_same_arrays(local, server, "mix_arrays")
    if not use_js:
        return {k: np.array(server[k], dtype=np.asarray(local[k]).dtype, copy=True) for k in local}
    js = float(js)
    if not (0.0 <= js <= 1.0) or math.isnan(js):
        raise ConfigError(f"js {js!r} is outside [0, 1]; the mixing weight is a base-2 JS divergence")
    out = {}
    for k, w in local.items():
        w = np.asarray(w)
        mixed = js * w.astype(np.float64) + (1.0 - js) * np.asarray(server[k], dtype=np.float64)
        out[k] = mixed.astype(w.dtype)
    return out


def average_arrays(arrays: Sequence[Arrays], weights: Sequence[float] | None = None) -> dict[str, np.ndarray]:
    """``sum_i w_i A_i / sum_i w_i`` per name; ``weights=None`` is the plain mean ``(1/I) sum_i A_i``.

    The paper's server averages the discriminators with 1/I (Algorithm 2, line 17); FedAvg (the FL baseline)
    weights them by the clients' training-set sizes. Computed in float64, returned in the first client's dtype.
    """
    if len(arrays) == 0:
        raise ConfigError("average_arrays needs at least one client's arrays, got none")
    for i, other in enumerate(arrays[1:], start=1):
        _check_same_arrays(arrays[0], other, f"average_arrays (client {i} against client 0)")
    if weights is None:
        w = np.ones(len(arrays), dtype=np.float64)
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size != len(arrays):
            raise ConfigError(f"{w.size} weights for {len(arrays)} clients' arrays")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ConfigError(f"weights {w.tolist()} must be finite, >= 0 and not all 0")
    w = w / w.sum()
    out = {}
    for k, first in arrays[0].items():
        first = np.asarray(first)
        acc = np.zeros(first.shape, dtype=np.float64)
        for wi, a in zip(w, arrays):
            acc += wi * np.asarray(a[k], dtype=np.float64)
        out[k] = acc.astype(first.dtype)
    return out
