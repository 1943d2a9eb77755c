"""The scale benchmark (``benchmarks/scale.py``, issue 91): its verdicts on stored rows (its memory sampler is the
shared runner's: tests/test_bench_processes.py).

What this guards: the acceptance is judged as the issue words it (the ratio against the Message-API floor plus
flowergraph's own 10-client round, last/first, start-up, the engine's memory limit), and a row that did not finish
is reported as such."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import scale  # noqa: E402
from flower_floor import round_times  # noqa: E402


def _row(kind, clients, face="message", engine="inline", times=(9.0, 2.0, 2.0, 2.1, 2.2), **extra):
    row = {
        "key": scale.row_key(kind, "fedavg", clients, engine, face),
        "kind": kind,
        "workload": "fedavg",
        "clients": clients,
        "engine": engine,
        "face": face,
        "rounds": len(times),
        "round_times": list(times),
        "startup_s": 12.0,
        "wall_s": 40.0,
        "finished": True,
        "ended": "exited",
        "rc": 0,
        "peak_gb": 1.0,
        "log": "x.log",
        **scale.summarise(list(times)),
    }
    row.update(extra)
    return row


def test_rounds_two_to_r_are_summarised_and_round_one_is_left_out():
    s = scale.summarise([30.0, 2.0, 3.0, 2.5])
    assert s["median_s"] == 2.5 and s["last_first"] == 1.25
    assert scale.summarise([30.0, 2.0]) == {"median_s": 2.0, "last_first": None}
    assert round_times([0.0, 1.0, 3.0]) == [1.0, 2.0]


def test_the_acceptance_row_is_judged_against_the_message_floor_plus_the_own_ten_client_round():
    rows = [
        _row("flowergraph", 10, times=(9.0, 1.0, 1.0, 1.0, 1.0)),
        _row("floor", 1000, times=(1.0, 3.0, 3.0, 3.0, 3.0)),
        _row("flowergraph", 1000, times=(20.0, 5.9, 6.0, 6.0, 6.0)),
    ]
    a = type("A", (), {"note": "", "sample": 0.2, "timeout": 60.0, "growth": [10, 1000]})()
    text = scale.report(a, {r["key"]: r for r in rows})
    line = next(x for x in text.splitlines() if x.startswith("| fedavg | 1,000 |"))
    assert "| 1.50 | met |" in line  # 6.0 / (3.0 + 1.0)
    slow = _row("flowergraph", 1000, times=(20.0, 5.0, 5.0, 6.5, 6.5), startup_s=31.0, peak_gb=2.5)
    v = scale.verdict(slow, 1.6)
    assert v.startswith("not met") and "ratio 1.60" in v and "last/first 1.30" in v
    assert "start-up 31.0 s" in v and "peak 2.50 GB > 2 GB" in v
    assert "peak" not in scale.verdict({**slow, "engine": "ray", "peak_gb": 3.5}, 1.0)  # Ray's limit: 4 GB
    cut = _row("flowergraph", 1000, finished=False, ended="timed out", round_times=[20.0])
    assert scale.verdict(cut, None) == "not met: did not finish (timed out)"
    assert scale.verdict(_row("flowergraph", 100), 1.0) == "-"  # not an acceptance row
    assert scale.verdict(_row("flowergraph", 10000, times=(60.0, 30.0, 31.0)), None).startswith("reported: completed")


def test_the_growth_table_compares_flowergraph_with_the_floor_on_the_same_engine_and_face():
    rows = [
        _row("flowergraph", 10, times=(9.0, 1.0, 1.0)),
        _row("flowergraph", 1000, times=(9.0, 5.0, 5.0)),
        _row("floor", 10, times=(1.0, 0.1, 0.1)),
        _row("floor", 1000, times=(1.0, 3.0, 3.0)),
    ]
    a = type("A", (), {"growth": [10, 1000]})()
    by_key = {r["key"]: r for r in rows}

    def median(kind, workload, n, engine, face):
        r = by_key.get(scale.row_key(kind, workload, n, engine, face))
        return r["median_s"] if r and r["finished"] else None

    text = scale.growth_section(a, by_key, median)
    line = next(x for x in text.splitlines() if x.startswith("| fedavg | 10 -> 1,000 | inline | message |"))
    assert "| 5.00x |" in line and "| 30.00x |" in line and line.endswith("| met |")


def test_the_bare_work_row_sits_beside_the_run_and_is_added_to_the_floor():
    rows = [
        _row("flowergraph", 10, times=(9.0, 1.0, 1.0, 1.0, 1.0)),
        _row("floor", 1000, times=(1.0, 0.5, 0.5, 0.5, 0.5)),
        _row("flowergraph", 1000, times=(20.0, 4.0, 4.0, 4.0, 4.0)),
        _row("bare", 1000, engine="one-process", face="-", times=(2.0, 1.75, 1.75, 1.75, 1.75)),
    ]
    a = type("A", (), {"note": "", "sample": 0.2, "timeout": 60.0, "growth": [10, 1000]})()
    text = scale.report(a, {r["key"]: r for r in rows})
    line = next(x for x in text.splitlines() if x.startswith("| fedavg | 1,000 | inline |"))
    assert line.rstrip(" |").endswith("| 1.75 | 2.25")  # bare work, floor + bare work (0.5 + 1.75)
    assert "Lower bound: the bare per-client work" in text
    plan_args = dict(clients=[10, 1000], fedstar_clients=[100], rounds=5, rounds_for={}, inprocess=False, bare=True)
    plan_args.update(only_floor=False, skip_floor=True, engines=["inline"], faces=["message"])
    planned = scale.plan(type("A", (), plan_args)())
    assert [(k, w, n) for k, w, n, *_ in planned if k == "bare"] == [("bare", "fedavg", 10), ("bare", "fedavg", 1000)]
