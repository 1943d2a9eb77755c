"""The seed-paired forest plot every method's results page draws (reproductions/_runner/common.py
``paired_figure``): what is drawn is checked on the figure itself, against intervals computed here by hand from
printed t-table values."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner import common  # noqa: E402


@pytest.fixture
def drawn(monkeypatch):
    """The figure paired_figure hands to save_figure (kept open), and the name it was to be saved under."""
    got = {}

    def keep(fig, name):
        got["fig"], got["name"] = fig, name
        return name

    monkeypatch.setattr(common, "save_figure", keep)
    yield got
    if "fig" in got:
        common.pyplot().close(got["fig"])


def test_the_forest_plot_draws_each_seed_the_mean_both_intervals_and_the_paper(drawn):
    rows = [("A - B", [1.0, 2.0, 3.0], 4.0), ("C - D", [-1.0], None), ("empty", [], 1.0)]
    assert common.paired_figure(rows, "x.png", "points") == "x.png" == drawn["name"]
    ax = drawn["fig"].axes[0]
    # top to bottom in the given order; a row without differences is left out
    assert [t.get_text() for t in ax.get_yticklabels()] == ["C - D", "A - B"]
    # mean 2, s = 1, n = 3, t(0.975, 2) = 4.302653: mean half width 4.302653 / sqrt(3) = 2.484138, one run's
    # 4.302653 * sqrt(1 + 1/3) = 4.968276; the single-seed row has neither
    bars = {
        tuple(round(x, 4) for x in line.get_xdata()): line.get_linewidth()
        for line in ax.get_lines()
        if line.get_ydata()[0] == line.get_ydata()[-1] == 1
    }
    assert bars == {
        (round(2 - 4.968276, 4), round(2 + 4.968276, 4)): 1.2,
        (round(2 - 2.484138, 4), round(2 + 2.484138, 4)): 4,
    }
    assert not [line for line in ax.get_lines() if list(line.get_ydata()) == [0, 0]]  # (the zero line is [0, 1])
    points = sorted((round(x, 4), round(y, 4)) for c in ax.collections for x, y in c.get_offsets().tolist())
    # each seed just above its row, the means on it, the paper's cross only where the row has a paper value
    assert points == sorted(
        [
            (-1.0, 0.18),
            (1.0, 1.18),
            (2.0, 1.18),
            (3.0, 1.18),
            (-1.0, 0.0),
            (statistics.mean([1.0, 2.0, 3.0]), 1.0),
            (4.0, 1.0),
        ]
    )
    paper = [c for c in ax.collections if c.get_offsets().tolist() == [[4.0, 1.0]]]
    assert len(paper) == 1 and paper[0].get_label() == "paper"
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == sorted(
        ["95% range of one run", "95% interval of the mean", "one seed", "mean", "paper"]
    )  # each entry once


def test_a_target_is_a_dashed_line_in_the_legend(drawn):
    common.paired_figure([("A - B", [1.0, 2.0], None)], "x.png", "points", target=("issue: +5", 5.0))
    ax = drawn["fig"].axes[0]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and list(dashed[0].get_xdata()) == [5.0, 5.0] and dashed[0].get_label() == "issue: +5"
    assert "issue: +5" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_no_rows_no_figure(drawn):
    assert common.paired_figure([("A - B", [], 1.0)], "x.png", "points") is None and not drawn
