"""Helpers shared by the strategies: payload byte counts, update validation, weighted averages."""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from ..wire import npy_size


def config_bytes(values: Mapping[str, Any] | None) -> int:
    """Bytes of a config/metrics mapping's values as they travel (bytes/str by length, an array as its npy bytes,
    numbers 8 B, bool 1 B)."""
    if not values:
        return 0
    total = 0
    for key, value in values.items():
        total += len(str(key).encode())
        if isinstance(value, (bytes, bytearray)):
            total += len(value)
        elif isinstance(value, np.ndarray):
            total += npy_size(value)
        elif isinstance(value, str):
            total += len(value.encode())
        elif isinstance(value, bool):
            total += 1
        else:
            total += 8
    return total


def arrays_bytes(arrays: Iterable[np.ndarray] | None) -> int:
    """Bytes of ``arrays`` as they go on the wire (each as Flower serialises an array: npy header + data)."""
    return sum(npy_size(a) for a in arrays) if arrays else 0


def check_update(arrays: list[np.ndarray], reference: list[np.ndarray] | None) -> str | None:
    """Return why a client update is malformed (count, shape, dtype, non-finite values), or None.

    With a ``reference`` (the global arrays) every array must have the reference's shape and the same kind of
    dtype (float for float, integer for integer): an integer update of a float model would otherwise be averaged
    in. Another precision of the same kind is accepted (Flower's SecAgg+ hands the strategy float64 sums of a
    float32 model); the average is cast to the global model's dtypes."""
    if reference is not None:
        if len(arrays) != len(reference):
            return f"{len(arrays)} arrays, expected {len(reference)}"
        for i, (a, r) in enumerate(zip(arrays, reference)):
            if a.shape != r.shape:
                return f"array {i} has shape {a.shape}, expected {r.shape}"
            if a.dtype.kind != r.dtype.kind and not (a.dtype.kind in "iu" and r.dtype.kind in "iu"):
                return f"array {i} has dtype {a.dtype}, expected {r.dtype} (or another precision of its kind)"
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "fiu":
            return f"array {i} has dtype {a.dtype}, expected a numeric array"
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            return f"array {i} holds NaN or infinite values"
    return None


def check_named_update(
    arrays: list[np.ndarray], keys: list[str] | None, sent: Mapping[str, np.ndarray], partial: bool = False
) -> str | None:
    """Why a client's update of the model ``sent`` (named arrays) is malformed, or None.

    ``keys`` are the names the client gave its arrays (None: the whole model, in the order it was sent). A whole
    update must carry every array it was sent; a ``partial`` one any of them (at least one), each once. Each array
    is checked against the sent one as :func:`check_update` does (shape, kind of dtype, finite values)."""
    names = list(sent)
    if keys is None:
        return check_update(arrays, list(sent.values()))
    if len(keys) != len(arrays):
        return f"{len(arrays)} arrays but {len(keys)} names"
    unknown = [k for k in keys if k not in sent]
    if unknown:
        return (
            f"array {unknown[0]!r} was not sent to this client (sent: {', '.join(names[:6])}"
            f"{', ...' if len(names) > 6 else ''})"
        )
    if not partial and sorted(keys) != sorted(names):
        missing = [k for k in names if k not in keys]
        return f"a whole update lacks array(s) {', '.join(missing[:6])}"
    if partial and not keys:
        return "a partial update carries no array"
    problem = check_update(arrays, [sent[k] for k in keys])
    if problem is not None:
        for i, key in enumerate(keys):  # name the array instead of its position
            problem = (
                problem.replace(f"array {i} ", f"array {key!r} ", 1) if problem.startswith(f"array {i} ") else problem
            )
    return problem


def weighted_average(
    updates: list[list[np.ndarray]], weights: list[float], like: list[np.ndarray] | None = None
) -> list[np.ndarray]:
    """sum_i w_i * u_i / sum_i w_i, accumulated in float64 and cast to the dtypes of ``like`` (the global
    arrays), else to the first update's dtypes."""
    total = float(sum(weights))
    if not updates or total <= 0:
        raise ValueError("weighted_average needs at least one update with positive weight")
    dtypes = [a.dtype for a in (like if like is not None else updates[0])]
    out = []
    for layer, dtype in zip(zip(*updates), dtypes):
        acc = np.zeros(layer[0].shape, dtype=np.float64)
        for w, arr in zip(weights, layer):
            acc += (w / total) * arr.astype(np.float64)
        out.append(acc.astype(dtype))
    return out


def weighted_metric(pairs: Iterable[tuple[float | None, float]]) -> float | None:
    """Weighted mean of (value, weight) pairs, skipping missing/NaN values and zero weights; None if empty."""
    num = den = 0.0
    for value, weight in pairs:
        if value is None or weight <= 0 or (isinstance(value, float) and math.isnan(value)):
            continue
        num += float(value) * weight
        den += weight
    return num / den if den > 0 else None
