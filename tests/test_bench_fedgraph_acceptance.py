"""reproductions/fedgraph/acceptance_report.py: the acceptance quantities of issue 72 computed from lean cell rows
made up here (times to a target on the modelled clock, a trained agent's episodes, the seed-paired sharing
verdict)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reproductions.fedgraph import acceptance_report as rep  # noqa: E402


def _row(variant, seed, accs, lan=0.02, episode_rounds=None, server=0.005, exchange="round", dataset="Cora"):
    """A lean cell: per round [round, accuracy, episode, LAN s, WAN s, bytes]."""
    per = episode_rounds or len(accs)
    curve = [[i + 1, a, i // per + 1, lan, 10 * lan, 1000] for i, a in enumerate(accs)]
    return {
        "kind": "acceptance",
        "dataset": dataset,
        "data": "metis",
        "variant": variant,
        "exchange": exchange,
        "seed": seed,
        "episode_rounds": per,
        "curve": curve,
        "clock": {"server_s": server, "compute_s": 0.01, "lan_transfer_s": 0.002, "messages": 3, "max_client_mb": 0.3},
        "cross_fraction": 0.31,
        "client_nodes": [540] * 5,
        "labelled": [240] * 5,
        "train_bytes": 1000 * len(accs),
        "total_bytes": 1200 * len(accs),
        "rows_moved": 10,
    }


def test_time_to_target_and_reprice():
    curve = _row("full", 0, [0.5, 0.8, 0.86, 0.9])["curve"]
    assert rep.time_to(curve, 0.85, "lan") == pytest.approx(0.06)
    assert rep.time_to(curve, 0.85, "wan") == pytest.approx(0.6)
    assert rep.time_to(curve, 0.95, "lan") is None
    assert rep.time_to(curve, 0.85, "lan", minus=0.005) == pytest.approx(0.045)
    assert rep.accuracy_at(curve, 0.045) == 0.8 and rep.accuracy_at(curve, 0.001) is None
    assert rep.median_time([0.1, None, 0.3]) == 0.3 and rep.median_time([None, None, 0.1]) is None


def test_agent_episodes_against_full_batch():
    """Ten 3-round episodes reaching 85% in their 2nd round (0.04 s) against full batch reaching it in its 4th
    (0.08 s): ratio 0.5; with the agent's 10 ms extra server time per round taken off, 0.02 s."""
    agent = _row("agent", 0, [0.7, 0.86, 0.87] * 12, episode_rounds=3, server=0.015)
    full = _row("full", 0, [0.5, 0.7, 0.8, 0.86, 0.88])
    sage = _row("graphsage", 0, [0.5, 0.7, 0.8, 0.84, 0.86])
    body, stats = rep.speed_rows([agent, full, sage], "Cora", "round", "lan")
    assert len(body) == 1 and stats["ratio"] == [pytest.approx(0.5)] and stats["vs_sage"] == [True]
    assert stats["ratio_server"] == [pytest.approx(0.25)]
    assert stats["equal_time"] == [pytest.approx(100 * (0.87 - 0.8))]  # full batch at 0.06 s: 80%
    assert "0.040 (10/10)" in body[0][1]


def test_sharing_verdict():
    rows = []
    for seed, (f, n, a) in enumerate([(0.87, 0.83, 0.87), (0.86, 0.82, 0.865), (0.88, 0.845, 0.875)]):
        rows += [_row("fixed", seed, [f] * 5), _row("nonshare", seed, [n] * 5), _row("allshare", seed, [a] * 5)]
    text = rep.sharing_table(rows)
    assert "+3.8" in text and text.rstrip().endswith("| yes |")
    rows = [r if r["variant"] != "nonshare" else {**r, "curve": _row("n", 0, [0.86] * 5)["curve"]} for r in rows]
    assert rep.sharing_table(rows).rstrip().endswith("| no |")
