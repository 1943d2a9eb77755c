"""FedGraph's benchmark tables: the clients' critical path ("slowest-client s", the slowest client's local training
seconds summed over rounds) counted from the right rounds, checked against hand sums on a small curve.

A curve row is [round, run clock s, accuracy, episode, largest client GMAC, slowest client s]; an agent's run
restarts training every episode, so its times count from the start of its last episode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import fedgraph as bench  # noqa: E402

FIXED = {"variant": "full", "dataset": "Cora", "seed": 0, "curve": [
    [1, 0.30, 0.40, 1, 0.2, 0.05],
    [2, 0.60, 0.70, 1, 0.2, 0.04],
    [3, 0.90, 0.76, 1, 0.2, 0.03],
    [4, 1.20, 0.86, 1, 0.2, 0.02]]}
# two episodes: the first reaches 75% in its 2nd round, the second (the one that counts) in its 3rd
AGENT = {"variant": "fedgraph", "dataset": "Cora", "seed": 0, "curve": [
    [1, 0.3, 0.50, 1, 0.1, 0.01],
    [2, 0.6, 0.80, 1, 0.1, 0.01],
    [3, 0.9, 0.30, 2, 0.1, 0.02],
    [4, 1.2, 0.74, 2, 0.1, 0.03],
    [5, 1.5, 0.75, 2, 0.1, 0.04],
    [6, 1.8, 0.90, 2, 0.1, 0.05]]}


def test_slowest_client_seconds_to_a_target_are_summed_from_the_runs_start():
    assert bench.time_to(FIXED, 0.75, by="client") == pytest.approx(0.05 + 0.04 + 0.03)
    assert bench.time_to(FIXED, 0.85, by="client") == pytest.approx(0.14)
    assert bench.time_to(FIXED, 0.95, by="client") is None
    # the run's own clock and work are unchanged by the new measure
    assert bench.time_to(FIXED, 0.75) == pytest.approx(0.90)
    assert bench.time_to(FIXED, 0.75, by="work") == pytest.approx(0.6)


def test_an_agents_critical_path_counts_only_its_last_episode():
    # episode 2: rounds 3-5 until 75% -> 0.02 + 0.03 + 0.04 (episode 1 reached 75% earlier and must not count)
    assert bench.time_to(AGENT, 0.75, by="client") == pytest.approx(0.09)
    assert bench.accuracy_at(AGENT, 0.05, by="client") == pytest.approx(0.74)


def test_cells_without_the_client_time_have_no_critical_path():
    old = {**FIXED, "curve": [c[:5] for c in FIXED["curve"]]}
    assert bench.cumulative_client_time(old["curve"]) is None
    assert bench.time_to(old, 0.75, by="client") is None


def test_the_seed_paired_note_subtracts_the_same_seeds():
    other = {**FIXED, "variant": "graphsage", "curve": [[*c[:5], c[5] / 2] for c in FIXED["curve"]]}
    runs = [AGENT, FIXED, other, {**AGENT, "seed": 1}]  # seed 1 has no baseline: left out
    note = bench.critical_path_note(runs)
    assert "Cora fedgraph - full: -0.030 s (1 of 1 seeds ahead)" in note
    assert "Cora fedgraph - graphsage: +0.030 s (0 of 1 seeds ahead)" in note
