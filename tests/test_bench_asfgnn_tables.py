"""ASFGNN's Fig. 3 points (reproductions/asfgnn/rows.py ``alpha_curves``): means and stds over seeds per method and
alpha, and the JS minus no-JS difference paired by seed (only seeds with both cells), checked against hand
numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions.asfgnn import figures  # noqa: E402
from reproductions.asfgnn import grid  # noqa: E402
from reproductions.asfgnn import rows  # noqa: E402


def cell(method: str, seed: int, test: float) -> dict:
    return {"method": method, "seed": seed, "test": test}


def test_alpha_curves_average_each_method_and_pair_js_by_seed():
    by_alpha = {
        1.0: {
            "sfgnn": [cell("sfgnn", 0, 0.90), cell("sfgnn", 1, 0.92), cell("sfgnn", 2, 0.94)],
            "sfgnn-nojs": [cell("sfgnn-nojs", 0, 0.91), cell("sfgnn-nojs", 2, 0.90)],  # seed 1 missing
            "fl": [cell("fl", 0, 0.80)],
            "sp": [],
        },
        0.8: {"sfgnn": [cell("sfgnn", 0, 0.70)], "sfgnn-nojs": [], "fl": [], "sp": [cell("sp", 3, 0.60)]},
    }
    curves = rows.alpha_curves(by_alpha)
    a, mean, std, n = curves["sfgnn"][1]
    assert (a, n) == (1.0, 3)
    assert mean == pytest.approx(0.92)
    assert std == pytest.approx(0.02)  # sample std of 0.90, 0.92, 0.94
    assert curves["sfgnn"][0] == (0.8, pytest.approx(0.70), 0.0, 1)  # alphas ascend; one seed has std 0
    assert curves["fl"] == [(1.0, pytest.approx(0.80), 0.0, 1)]
    assert curves["sp"] == [(0.8, pytest.approx(0.60), 0.0, 1)]  # an empty cell list gives no point
    # paired over seeds 0 and 2 only: (0.90 - 0.91) and (0.94 - 0.90)
    ((a, mean, std, n),) = curves["js-diff"]
    assert (a, n) == (1.0, 2)
    assert mean == pytest.approx(0.015)
    assert std == pytest.approx(((0.025**2) * 2) ** 0.5)  # deviations -0.025, +0.025, n - 1 = 1


def test_alpha_plot_is_written_from_the_points(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "save_figure", lambda fig, name: (fig.savefig(tmp_path / name), name)[1])
    curves = {"sfgnn": [(0.9, 0.80, 0.01, 3), (1.0, 0.90, 0.01, 3)], "js-diff": [(1.0, -0.002, 0.008, 3)]}
    assert figures.plot_alpha(curves, "quick") == "asfgnn_alpha_quick.png"
    assert (tmp_path / "asfgnn_alpha_quick.png").stat().st_size > 1000
    assert figures.plot_alpha({"js-diff": []}, "quick") is None  # nothing of Fig. 3's curves: no figure
    one_alpha = {"sfgnn": [(1.0, 0.9, 0.0, 1)], "sp": [(1.0, 0.91, 0.0, 1)]}
    assert figures.plot_alpha(one_alpha, "quick") is None


def test_top_by_validation_averages_the_best_trials_test_accuracy():
    trials = [
        {"best_val": v, "test": t, "owner_test": o}
        for v, t, o in ((0.90, 0.80, 0.70), (0.95, 0.85, 0.75), (0.93, 0.90, 0.60), (0.91, 0.99, 0.99))
    ]
    assert rows.top_by_validation({"method": "sfgnn", "trials": trials}, top=2) == pytest.approx((0.85 + 0.90) / 2)
    assert rows.top_by_validation({"method": "cm", "trials": trials}, top=2) == pytest.approx((0.75 + 0.60) / 2)
    assert rows.top_by_validation({"method": "sp", "trials": trials}, top=10) == pytest.approx(0.885)  # all 4


def trial(k: int, val: float, test: float, owner: float | None = None) -> dict:
    return {"trial": k, "best_val": val, "test": test, "owner_test": test if owner is None else owner}


def test_tuning_trace_follows_the_incumbent_in_trial_order():
    # stored out of order; trial 2 ties trial 1's validation and does not take over (the first best stays)
    trials = [trial(2, 0.80, 0.99), trial(0, 0.70, 0.60), trial(1, 0.80, 0.75), trial(3, 0.85, 0.70)]
    assert rows.tuning_trace({"method": "sfgnn", "trials": trials}) == [
        (0.70, 0.60),
        (0.80, 0.75),
        (0.80, 0.75),
        (0.85, 0.70),
    ]
    # CM reports the owners' nodes, as the table's accuracy() does
    cm = [trial(0, 0.5, 0.9, owner=0.4), trial(1, 0.6, 0.9, owner=0.3)]
    assert rows.tuning_trace({"method": "cm", "trials": cm}) == [(0.5, 0.4), (0.6, 0.3)]


def test_tuning_trace_ends_at_the_number_the_table_reports():
    row = {
        "method": "sp",
        "best_trial": 1,
        "test": 0.75,
        "trials": [trial(0, 0.70, 0.60), trial(1, 0.80, 0.75), trial(2, 0.78, 0.90)],
    }
    assert rows.tuning_trace(row)[-1] == (0.80, rows.accuracy(row))


def test_mean_trace_averages_seeds_up_to_the_shortest_run():
    a = {"method": "sp", "trials": [trial(0, 0.70, 0.60), trial(1, 0.80, 0.70), trial(2, 0.90, 0.80)]}
    b = {"method": "sp", "trials": [trial(0, 0.50, 0.40), trial(1, 0.40, 0.90)]}
    val, test, n = rows.mean_trace([a, b])
    assert n == 2
    assert val == pytest.approx([0.60, 0.65])  # (0.70 + 0.50) / 2, (0.80 + 0.50) / 2: b's incumbent stays trial 0
    assert test == pytest.approx([0.50, 0.55])


def test_trace_plot_is_written_only_with_two_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "save_figure", lambda fig, name: (fig.savefig(tmp_path / name), name)[1])
    traces = {
        "Cora": {"sp": ([0.90, 0.92], [0.89, 0.91], 3), "sfgnn": ([0.88, 0.93], [0.87, 0.90], 3)},
        "CiteSeer": {"sp": ([0.78, 0.80], [0.77, 0.78], 1)},
    }
    assert figures.plot_traces(traces, "quick") == "asfgnn_trace_quick.png"
    assert (tmp_path / "asfgnn_trace_quick.png").stat().st_size > 1000
    assert figures.plot_traces({"Cora": {"sp": ([0.9], [0.9], 3)}}, "quick") is None


def test_a_stopped_segment_counts_up_to_its_last_round(tmp_path):
    import json

    assert grid.segments_before(tmp_path) == 0.0  # a new run folder
    # 100 s from finished segments, then one opened at t = 1000 and stopped after its rounds ending at 1040 and
    # 1070; a round from before it (ended 990) is not its own
    (tmp_path / "bench.json").write_text(json.dumps({"wall_s": 100.0, "open_since": 1000.0}))
    (tmp_path / "rounds.jsonl").write_text(
        "\n".join(json.dumps({"round": k, "ended_at": e}) for k, e in ((1, 990.0), (2, 1040.0), (3, 1070.0))) + "\n"
    )
    assert grid.segments_before(tmp_path) == pytest.approx(170.0)
    # a finished last segment leaves no open one
    (tmp_path / "bench.json").write_text(json.dumps({"wall_s": 250.0}))
    assert grid.segments_before(tmp_path) == pytest.approx(250.0)
    # stopped before its first round: nothing of it is known
    (tmp_path / "bench.json").write_text(json.dumps({"wall_s": 250.0, "open_since": 2000.0}))
    assert grid.segments_before(tmp_path) == pytest.approx(250.0)


def test_wall_minutes_of_a_cell_resumed_before_segments_were_timed_are_marked():
    trials = [{"time_s": 600.0}, {"time_s": 600.0}]
    assert rows.wall_min({"wall_s": 1260.0, "trials": trials}) == "21.0"
    assert rows.wall_min({"wall_s": 300.0, "trials": trials}) == ">= 20.0 (trials; resumed)"


def test_paired_uses_only_seeds_with_both_cells_and_counts_ahead_level_behind():
    a = [cell("sfgnn", 0, 0.90), cell("sfgnn", 1, 0.80), cell("sfgnn", 2, 0.70), cell("sfgnn", 4, 0.99)]
    b = [cell("sp", 0, 0.85), cell("sp", 1, 0.80), cell("sp", 2, 0.75), cell("sp", 3, 0.10)]
    seeds, first, second, diff, counts, mean_ci, one_run = rows.paired(a, b)
    assert seeds == "3 (0, 1, 2)"
    assert first == "0.8000 ± 0.1000" and second == "0.8000 ± 0.0500"
    assert diff == "+0.0000 ± 0.0500"  # differences +0.05, 0, -0.05
    assert counts == "1 / 1 / 1"
    # t(0.975, 2 dof) = 4.302653 (printed tables); s = 0.05, n = 3
    assert mean_ci == "[-0.1242, +0.1242]"  # 4.302653 * 0.05 * sqrt(1/3) = 0.12421
    assert one_run == "[-0.2484, +0.2484]"  # 4.302653 * 0.05 * sqrt(1 + 1/3) = 0.24841
    assert rows.paired(a, b, paper=0.25)[7:] == ["+0.2500", "above"]  # the paper is judged against one run
    assert rows.paired(a, b, paper=-0.3)[7:] == ["-0.3000", "below"]
    assert rows.paired(a, b, paper=0.2)[7:] == ["+0.2000", "inside"]  # outside the mean's interval, inside one run's
    assert rows.paired(a, [cell("sp", 7, 0.5)]) is None
    one = rows.paired(a[:1], b[:1], paper=0.0)  # one seed: no interval, so no verdict
    assert one[3:] == ["+0.0500", "1 / 0 / 0", "-", "-", "+0.0000", "-"]


def test_t_interval_against_the_t_distribution_by_hand():
    from reproductions._runner.common import t_interval

    # differences 1, 2, 3, 4: mean 2.5, sample std sqrt(5/3); t(0.975, 3) = 3.182446 (printed tables)
    low, high = t_interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446 * (5 / 3) ** 0.5 / 2
    assert (low, high) == (pytest.approx(2.5 - half, abs=1e-5), pytest.approx(2.5 + half, abs=1e-5))
    # 90%: t(0.95, 3) = 2.353363
    assert t_interval([1.0, 2.0, 3.0, 4.0], level=0.90)[1] == pytest.approx(
        2.5 + 2.353363 * (5 / 3) ** 0.5 / 2, abs=1e-5
    )
    # one more run: sqrt(1 + 1/4) in place of sqrt(1/4)
    assert t_interval([1.0, 2.0, 3.0, 4.0], one_run=True)[0] == pytest.approx(
        2.5 - 3.182446 * (5 / 3) ** 0.5 * 1.25**0.5, abs=1e-5
    )
    assert t_interval([0.3]) is None


def test_table6_controls_are_cells_of_their_own_kind():
    import argparse

    args = argparse.Namespace(
        budget="long",
        facade="hpo",
        seeds=[3],
        parts=["table6", "sizes", "steps"],
        datasets=["Cora"],
        methods=["sfgnn-nojs", "sfgnn"],
        alphas=[1.0, 0.9],
        sizes=["paper-independent"],
        local_steps=[5],
    )
    cells = {name: (config, meta) for name, config, meta in grid.grid(args)}
    base = "tuned-Cora-label-a0.9-sfgnn-long-hpo-s3"
    sizes = "tuned-Cora-label-a0.9-paper-independent-sfgnn-long-hpo-s3"
    steps = "tuned-Cora-label-a1.0-steps5-sfgnn-long-hpo-s3"
    assert {base, sizes, steps} <= set(cells)
    assert "tuned-Cora-label-a1.0-paper-independent-sfgnn-long-hpo-s3" not in cells  # at alpha 1 the same split
    # Table 6's cells keep the configuration they were stored with; each control changes one key
    assert "asfgnn.sizes" not in cells[base][0] and "asfgnn.local-epochs" not in cells[base][0]
    assert {k: v for k, v in cells[sizes][0].items() if cells[base][0].get(k) != v} == {
        "asfgnn.sizes": "paper-independent"
    }
    assert cells[steps][0]["asfgnn.local-epochs"] == 5 and cells[steps][0]["asfgnn.alpha"] == 1.0
    assert (cells[base][1]["kind"], cells[sizes][1]["kind"], cells[steps][1]["kind"]) == ("tuned", "sizes", "steps")
    assert cells[sizes][1]["sizes"] == "paper-independent" and cells[steps][1]["local_steps"] == 5
    from flowergraph.settings import parse_run_config

    for config, _ in cells.values():  # every cell's configuration is a valid run
        parse_run_config({**config, "data-dir": "."})


def test_cells_of_code_that_computes_the_same_count_as_current(monkeypatch):
    store = grid.store()
    now = store.code["sources"]
    older = {"code": {"sources": "0123456789abcdef", "commit": "abc"}}
    assert store.current({"code": {"sources": now}}) and not store.current(older)
    assert store.flag(older) == " (older code: abc)"
    monkeypatch.setitem(grid.SAME_AS, now, {"0123456789abcdef": "checked"})
    assert store.current(older) and store.flag(older) == ""
    monkeypatch.setitem(grid.SAME_AS, "another-code", {"fedcba9876543210": "checked"})
    assert not store.current({"code": {"sources": "fedcba9876543210"}})  # another code's list does not apply


def test_table6_controls_are_paired_with_table6s_cells_of_the_same_seed():
    from reproductions.asfgnn import table6 as t6

    def row(kind, method, seed, test, alpha=0.9, **extra):
        meta = {"kind": kind, "dataset": "Cora", "setting": "label", "alpha": alpha, "method": method}
        return {**meta, "budget": "long", "seed": seed, "test": test, **extra}

    rows = [row("tuned", m, s, t) for m, s, t in (("sfgnn", 0, 0.80), ("sfgnn", 1, 0.78), ("sfgnn-nojs", 0, 0.79))]
    rows += [row("tuned", "sfgnn-nojs", 1, 0.77), row("tuned", "sfgnn", 2, 0.70)]  # seed 2: no control to pair with
    sizes = {"sizes": "paper-independent"}
    rows += [row("sizes", "sfgnn", 0, 0.82, **sizes), row("sizes", "sfgnn", 1, 0.79, **sizes)]
    rows += [row("sizes", "sfgnn-nojs", 0, 0.80, **sizes), row("sizes", "sfgnn-nojs", 1, 0.80, **sizes)]
    rows += [row("steps", "sfgnn", 0, 0.85, local_steps=5)]

    def of(kind, **match):
        return [r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]

    text = "\n".join(t6.controls(of, "long"))
    # the paper's sizes against ours, SFGNN: seeds 0 and 1 only, +0.02 and +0.01
    assert (
        "| 0.9 | paper-independent | SFGNN (JS mixing) | 2 (0, 1) | 0.8050 ± 0.0212 | 0.7900 ± 0.0141 "
        "| +0.0150 ± 0.0071" in text
    )
    assert "| 0.8494 |" in text and "| 0.8226 |" in text  # the paper's numbers with and without JS
    # JS against no JS with the paper's sizes: +0.02 and -0.01; the paper's improvement +0.0268
    assert (
        "| 0.9 | paper-independent | 2 (0, 1) | 0.8050 ± 0.0212 | 0.8000 ± 0.0000 | +0.0050 ± 0.0212 | 1 / 0 / 1"
        in text
    )
    assert "| +0.0268 |" in text
    assert "| 0.9 | 5 | SFGNN (JS mixing) | 1 (0) | 0.8500 | 0.8000 | +0.0500 | 1 / 0 / 0 |" in text
    assert t6.controls(lambda kind, **match: [], "long") == []


def test_table3_heading_names_the_seeds_of_its_own_cells(tmp_path, monkeypatch):
    """Table 3's heading names the seeds of its four columns' cells, not those of Table 6's cells (another alpha, or
    SFGNN without JS at alpha 1.0, which Table 3 does not show)."""
    from reproductions.asfgnn import report
    from reproductions._runner import common

    monkeypatch.setattr(common, "REPO", tmp_path)  # the report's figures go here, not to docs/results
    (tmp_path / "docs" / "results").mkdir(parents=True)

    def tuned(method: str, seed: int, alpha: float = 1.0) -> dict:
        trial = {"trial": 0, "best_val": 0.9, "test": 0.8, "owner_test": 0.8, "time_s": 1.0, "config": {}}
        return {
            "kind": "tuned", "dataset": "Cora", "setting": "label", "alpha": alpha, "method": method,
            "budget": "long", "seed": seed, "test": 0.8, "best_val": 0.9, "best_trial": 0, "trials": [trial],
        }  # fmt: skip

    cells = [tuned(m, s) for m in ("cm", "fl", "sp", "sfgnn") for s in (0, 1, 2)]
    cells += [tuned("sfgnn-nojs", 4), tuned("sfgnn", 3, alpha=0.9)]
    text = report.tables(cells, "long")
    assert "mean ± std over seeds [0, 1, 2] (n" in text
    # an SFGNN cell of seed 3 at alpha 1.0 is Table 3's: the heading then names it
    text = report.tables(cells + [tuned("sfgnn", 3)], "long")
    assert "mean ± std over seeds [0, 1, 2, 3] (n" in text
