"""Helpers for comparing run records in tests (imported as a plain module: tests/ is on sys.path under pytest)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def untimed(value: Any, costs: tuple[str, ...]) -> Any:
    """``value`` (a run record, or a list/dict of them) without every key ending in one of ``costs``.

    Timings and other machine-dependent costs differ between two runs of the same computation; everything else
    in a record must repeat exactly, so tests compare records through this.
    """
    if isinstance(value, dict):
        return {k: untimed(v, costs) for k, v in value.items() if not any(k.endswith(c) for c in costs)}
    if isinstance(value, list):
        return [untimed(v, costs) for v in value]
    return value


def assert_same_rounds(want: Iterable[dict], got: Iterable[dict], costs: tuple[str, ...]) -> None:
    """Each pair of round records equal key by key once ``costs`` are dropped (the same number of records); a
    mismatch names the round, the key and both values."""
    for a, b in zip(want, got, strict=True):
        a, b = untimed(a, costs), untimed(b, costs)
        for key in set(a) | set(b):
            assert a.get(key) == b.get(key), (a["round"], key, a.get(key), b.get(key))
