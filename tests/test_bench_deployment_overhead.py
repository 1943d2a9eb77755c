"""The deployment-overhead benchmark reuses a stored cell whatever other modes an invocation lists, and recomputes
it when its own run's settings differ (benchmarks/deployment_overhead.py ``cell_key``)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import deployment_overhead as bench  # noqa: E402


def test_a_cell_key_ignores_the_listed_modes_and_fresh_but_not_the_runs_settings():
    stored = {"rounds": 5, "methods": ["fedavg"], "modes": "warm", "fresh": False}
    assert bench.cell_key(stored) == bench.cell_key({**stored, "modes": "warm-flower-entry,warm", "fresh": True})
    assert bench.cell_key(stored) != bench.cell_key({**stored, "rounds": 3})
    assert bench.cell_key(stored) != bench.cell_key({**stored, "methods": ["fedavg", "fedgcn"]})
