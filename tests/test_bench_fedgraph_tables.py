"""FedGraph's benchmark tables: the clients' critical path ("slowest-client s", the slowest client's local training
seconds summed over rounds) counted from the right rounds, checked against hand sums on a small curve.

A curve row is [round, run clock s, accuracy, episode, largest client GMAC, slowest client s]; an agent's run
restarts training every episode, so its times count from the start of its last episode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions.fedgraph import ablations, curves, learning, report  # noqa: E402

FIXED = {
    "variant": "full",
    "dataset": "Cora",
    "seed": 0,
    "curve": [
        [1, 0.30, 0.40, 1, 0.2, 0.05],
        [2, 0.60, 0.70, 1, 0.2, 0.04],
        [3, 0.90, 0.76, 1, 0.2, 0.03],
        [4, 1.20, 0.86, 1, 0.2, 0.02],
    ],
}
# two episodes: the first reaches 75% in its 2nd round, the second (the one that counts) in its 3rd
AGENT = {
    "variant": "fedgraph",
    "dataset": "Cora",
    "seed": 0,
    "curve": [
        [1, 0.3, 0.50, 1, 0.1, 0.01],
        [2, 0.6, 0.80, 1, 0.1, 0.01],
        [3, 0.9, 0.30, 2, 0.1, 0.02],
        [4, 1.2, 0.74, 2, 0.1, 0.03],
        [5, 1.5, 0.75, 2, 0.1, 0.04],
        [6, 1.8, 0.90, 2, 0.1, 0.05],
    ],
}


def test_slowest_client_seconds_to_a_target_are_summed_from_the_runs_start():
    assert curves.time_to(FIXED, 0.75, by="client") == pytest.approx(0.05 + 0.04 + 0.03)
    assert curves.time_to(FIXED, 0.85, by="client") == pytest.approx(0.14)
    assert curves.time_to(FIXED, 0.95, by="client") is None
    # the run's own clock and work are unchanged by the new measure
    assert curves.time_to(FIXED, 0.75) == pytest.approx(0.90)
    assert curves.time_to(FIXED, 0.75, by="work") == pytest.approx(0.6)


def test_an_agents_critical_path_counts_only_its_last_episode():
    # episode 2: rounds 3-5 until 75% -> 0.02 + 0.03 + 0.04 (episode 1 reached 75% earlier and must not count)
    assert curves.time_to(AGENT, 0.75, by="client") == pytest.approx(0.09)
    assert curves.accuracy_at(AGENT, 0.05, by="client") == pytest.approx(0.74)


def test_cells_without_the_client_time_have_no_critical_path():
    old = {**FIXED, "curve": [c[:5] for c in FIXED["curve"]]}
    assert curves.cumulative_client_time(old["curve"]) is None
    assert curves.time_to(old, 0.75, by="client") is None


def test_the_seed_paired_note_subtracts_the_same_seeds():
    other = {**FIXED, "variant": "graphsage", "curve": [[*c[:5], c[5] / 2] for c in FIXED["curve"]]}
    runs = [AGENT, FIXED, other, {**AGENT, "seed": 1}]  # seed 1 has no baseline: left out
    note = report.critical_path_note(runs)
    assert "Cora fedgraph - full: -0.030 s (1 of 1 seeds ahead)" in note  # one seed: no interval
    assert "Cora fedgraph - graphsage: +0.030 s (0 of 1 seeds ahead)" in note
    # two seeds, the second 0.05 s slower everywhere: differences -0.030 and +0.020, mean -0.005, std 0.035355;
    # t(0.975, 1) = 12.706205 -> half width 12.706205 * 0.035355 / sqrt(2) = 0.317655
    slow = {**AGENT, "seed": 1, "curve": [[*c[:5], c[5] + 0.05 / 3] for c in AGENT["curve"]]}
    note = report.critical_path_note([AGENT, FIXED, slow, {**FIXED, "seed": 1}])
    assert (
        "Cora fedgraph - full: -0.030, +0.020 s (1 of 2 seeds ahead; mean -0.005, 95% interval [-0.323, +0.313])"
    ) in note
    # a difference under half a millisecond prints as +0.000 and counts as level, not ahead (nor -0.000)
    tie = {**AGENT, "seed": 1, "curve": [[*c[:5], c[5] + (0.03 - 0.0002) / 3] for c in AGENT["curve"]]}
    note = report.critical_path_note([AGENT, FIXED, tie, {**FIXED, "seed": 1}])
    assert "Cora fedgraph - full: -0.030, +0.000 s (1 of 2 seeds ahead, 1 level; mean -0.015" in note


# The trained agent on Fig. 7's axes: a learning run of 3 finished episodes of 2 rounds (and a 4th cut short by the
# end of the run) against the default budget's cells of the same seed and clients.
LEARNED = {
    "kind": "run",
    "budget": "learning",
    "variant": "fedgraph-work",
    "dataset": "Cora",
    "seed": 0,
    "var": 0.1,
    "split": "full-supervised",
    "data": "synthesis",
    "client_nodes": [10, 20],
    "stale": "",
    "cpu": "Intel Xeon",
    "returns": [1.0, 2.0, 3.0],
    "curve": [
        [1, 0.3, 0.50, 1, 0.1, 0.01],
        [2, 0.6, 0.80, 1, 0.1, 0.01],
        [3, 0.9, 0.76, 2, 0.2, 0.02],
        [4, 1.2, 0.90, 2, 0.2, 0.03],  # reaches 75% in its 1st round
        [5, 1.5, 0.50, 3, 0.1, 0.04],
        [6, 1.9, 0.80, 3, 0.3, 0.05],  # in its 2nd
        [7, 2.0, 0.99, 4, 0.01, 0.001],
    ],
}  # unfinished (no return): must not count


def _default(variant: str, curve: list[list]) -> dict:
    return {**LEARNED, "budget": "default", "variant": variant, "curve": curve, "returns": []}


def test_the_trained_agent_is_compared_within_an_episodes_rounds(monkeypatch):
    monkeypatch.setattr(learning, "LEARNING_BLOCK", 2)  # the last block: episodes 2 and 3
    rows = [
        LEARNED,
        _default("full", [[1, 0.3, 0.40, 1, 0.5, 0.05], [2, 0.6, 0.80, 1, 0.5, 0.05], [3, 0.9, 0.9, 1, 0.5, 0.05]]),
        # reaches 75% in its 3rd round only: beyond the agent's 2-round horizon
        _default(
            "graphsage", [[1, 0.1, 0.1, 1, 0.01, 0.001], [2, 0.2, 0.2, 1, 0.01, 0.001], [3, 0.3, 0.9, 1, 0.01, 0.001]]
        ),
        _default("fixed-k256-p0.1", [[1, 0.2, 0.75, 1, 0.05, 0.01], [2, 0.4, 0.8, 1, 0.05, 0.01]]),
        _default(
            "fixed-k32-p0.1",
            [[1, 0.1, 0.1, 1, 0.001, 0.001], [2, 0.2, 0.2, 1, 0.001, 0.001], [3, 0.3, 0.9, 1, 0.001, 0.001]],
        ),
        {**_default("full", [[1, 0.1, 0.9, 1, 0.001, 0.001]]), "seed": 1},
    ]  # another seed: not a reference
    out = learning.trained_agent_table(rows, [LEARNED])
    # work: episodes 2 and 3 need 0.2 and 0.1 + 0.3 GMAC -> 0.300; full batch 0.5 + 0.5 within 2 rounds
    assert (
        "| Cora | work (GMAC, deterministic) | 0 | 0.300 (2/2) / 1.000 / - / - | 0.055 (2/2) / 0.100 / - / - "
        "| 0.50 (2/2) / 0.60 / - / - | 0.050 (fixed-k256-p0.1) |" in out
    )
    assert "| Cora | work (GMAC, deterministic) | 1 of 1 / - | 1 of 1 / - | 1 of 1 / - |" in out


def test_seconds_of_a_baseline_from_another_cpu_are_marked_and_not_counted(monkeypatch):
    monkeypatch.setattr(learning, "LEARNING_BLOCK", 2)
    full = _default("full", [[1, 0.3, 0.40, 1, 0.5, 0.05], [2, 0.6, 0.80, 1, 0.5, 0.05], [3, 0.9, 0.9, 1, 0.5, 0.05]])
    for cpu in ("AMD EPYC", None):  # another model, or one the baseline did not record
        out = learning.trained_agent_table([LEARNED, {**full, "cpu": cpu}], [LEARNED])
        # work compares across machines; both seconds axes are marked and left out of the counts
        assert (
            "| 0.300 (2/2) / 1.000 / - / - | 0.055 (2/2) / 0.100\u2021 / - / - | 0.50 (2/2) / 0.60\u2021 / - / - |"
            in out
        )
        assert "| Cora | work (GMAC, deterministic) | 1 of 1 / - | - / - | - / - |" in out
        assert curves.OTHER_CPU_NOTE in out
    same = learning.trained_agent_table([LEARNED, full], [LEARNED])
    assert "\u2021" not in same and curves.OTHER_CPU_NOTE not in same
    assert "| Cora | work (GMAC, deterministic) | 1 of 1 / - | 1 of 1 / - | 1 of 1 / - |" in same


def test_the_learning_table_marks_a_fixed_policy_at_the_same_seconds_from_another_cpu(monkeypatch):
    monkeypatch.setattr(learning, "LEARNING_BLOCK", 2)
    learned = {**LEARNED, "cell_s": 60.0}
    timed = {**learned, "variant": "fedgraph"}  # time-rewarded: compared with the fixed policy at the same seconds
    fixed = _default("fixed", [[1, 0.3, 0.40, 1, 0.5, 0.05], [2, 0.6, 0.80, 1, 0.5, 0.05]])
    other = learning.learning_table([timed, {**fixed, "cpu": "AMD EPYC"}], [timed])
    assert "\u2021: the fixed-policy cell ran on AMD EPYC, this agent on Intel Xeon" in other
    assert other.count("\u2021 |") == 2  # both blocks' fixed-policy column
    assert "\u2021" not in learning.learning_table([timed, fixed], [timed])
    worked = learning.learning_table([learned, {**fixed, "cpu": "AMD EPYC"}], [learned])  # work does not depend on it
    assert "\u2021" not in worked


def test_a_run_shorter_than_a_block_has_no_trained_agent_row(monkeypatch):
    monkeypatch.setattr(learning, "LEARNING_BLOCK", 4)
    assert learning.trained_agent_table([LEARNED], [LEARNED]) == ""


def test_the_trained_agents_fig7_curve_averages_its_last_episodes(monkeypatch):
    monkeypatch.setattr(learning, "LEARNING_BLOCK", 2)
    full = _default("full", [[1, 0.3, 0.40, 1, 0.5, 0.05], [2, 0.6, 0.80, 1, 0.5, 0.05], [3, 0.9, 0.9, 1, 0.5, 0.05]])
    curves = learning.trained_curves([LEARNED, full], [LEARNED], "Cora")
    # episodes 2 and 3: cumulative work [0.2, 0.4] and [0.1, 0.4], accuracy [0.76, 0.90] and [0.50, 0.80]
    assert curves["fedgraph-work"] == (pytest.approx([0.15, 0.4]), pytest.approx([0.63, 0.85]))
    assert curves["full"] == (pytest.approx([0.5, 1.0]), pytest.approx([0.4, 0.8]))  # its first 2 rounds
    assert "fedgraph" not in curves and "graphsage" not in curves  # no such cells
    assert learning.trained_curves([LEARNED, full], [LEARNED], "CiteSeer") == {}


def test_seconds_from_two_cpus_are_flagged_with_the_cells_on_each():
    def run(variant, seed, cpu, var=0.1):
        return {"variant": variant, "dataset": "Cora", "seed": seed, "var": var, "cpu": cpu}

    same = [run("full", 0, "AMD EPYC"), run("fixed", 1, "AMD EPYC")]
    assert report.cpu_note(same) == ""
    mixed = same + [run("full", 1, "Intel Xeon"), run("nonshare", 0, "Intel Xeon", var=0.5), run("full", 2, None)]
    note = report.cpu_note(mixed)
    assert note.startswith(
        "**Seconds from more than one CPU**: these cells were measured on 2 CPU models, some on "
        "one they did not record (and beside different loads)"
    )
    assert report.cpu_note(same + [run("full", 1, None)]).startswith(
        "**Seconds from more than one CPU**: these cells were measured on 1 CPU model, some on one they did not record"
    )
    assert (
        "AMD EPYC (2 cells): Cora full (seeds 0), Cora fixed (seeds 1); "
        "Intel Xeon (2 cells): Cora full (seeds 1), Cora nonshare var 0.5 (seeds 0); "
        "not recorded (1 cells): Cora full (seeds 2)."
    ) in note


def test_the_heterogeneity_table_gives_work_to_the_target_beside_the_clock():
    # FIXED reaches 75% in its 3rd round: 3 x 0.2 GMAC, 0.90 s; AGENT in its last episode's 3rd round: 3 x 0.1 GMAC,
    # 1.5 - 0.6 s on the run's clock, counted from its episode's start; a second full-batch seed never reaches it
    extra = {"var": 0.1, "client_nodes": [100, 400], "data": "synthesis"}
    never = {
        **FIXED,
        **extra,
        "seed": 1,
        "final_accuracy": 0.7,
        "curve": [[*c[:2], 0.7, *c[3:]] for c in FIXED["curve"]],
    }
    runs = [{**AGENT, **extra, "final_accuracy": 0.90}, {**FIXED, **extra, "final_accuracy": 0.86}, never]
    header, _, row = ablations.heterogeneity_table(runs).splitlines()[:3]
    cols = [c.strip() for c in header.strip("|").split("|")]
    got = dict(zip(cols, (c.strip() for c in row.strip("|").split("|"))))
    assert got["FedGraph GMAC to 75%"] == "0.300 (1/1)"
    assert got["full GMAC to 75%"] == "0.600 (1/2)"
    assert got["FedGraph time to 75%"] == "0.90 (1/1)"
    assert got["full time to 75%"] == "0.90 (1/2)"
    assert got["smallest/largest client"] == "0.25"
    # Cora's 2nd target is 85%: FIXED's 4th round (4 x 0.2), AGENT's last episode's 4th (4 x 0.1); the 70% seed never
    assert got["FedGraph GMAC to 2nd target"] == "0.400 (1/1)"
    assert got["full GMAC to 2nd target"] == "0.800 (1/2)"
    # a variance with FedGraph's cells only: full batch's columns are empty, not "never"
    only = ablations.heterogeneity_table([{**AGENT, **extra, "var": 1.0, "final_accuracy": 0.90}]).splitlines()[2]
    assert [c.strip() for c in only.strip("|").split("|")][4::2][:4] == ["-", "-", "-", "-"]


def test_accuracy_at_equal_work_is_read_at_fractions_of_the_work_agents_own_work():
    # the work-rewarded agent: 4 rounds of 0.1 GMAC (0.4 in all); the fixed policy's rounds cost 0.2
    agent = {
        "variant": "fedgraph-work",
        "dataset": "Cora",
        "seed": 0,
        "var": 0.1,
        "curve": [
            [1, 0.3, 0.50, 1, 0.1, 0.01],
            [2, 0.6, 0.72, 1, 0.1, 0.01],
            [3, 0.9, 0.80, 1, 0.1, 0.01],
            [4, 1.2, 0.85, 1, 0.1, 0.01],
        ],
    }
    fixed = {**FIXED, "variant": "fixed", "var": 0.1}  # 0.2 GMAC per round: 0.40, 0.70, 0.76, 0.86
    sage = {**agent, "variant": "graphsage"}  # the agent's own curve: level everywhere
    text = report.equal_work_table([agent, fixed, sage], fractions=(1 / 4, 1 / 2, 1))
    rows = {line.split(" | ")[1]: line.split(" | ")[3:] for line in text.splitlines() if line.startswith("| Cora")}
    # at 0.1 GMAC the fixed policy has not finished a round; at 0.2 it has one (40%), at 0.4 two (70%)
    assert [c.strip(" |") for c in rows["fixed"]] == ["- (0/1)", "40.0", "70.0"]
    assert [c.strip(" |") for c in rows["fedgraph-work"]] == ["50.0", "72.0", "85.0"]
    assert [c.strip(" |") for c in rows["fedgraph-work - fixed (seed-paired, points)"]] == [
        "- (1/0/0)",
        "+32.0 (1/0/0)",
        "+15.0 (1/0/0)",
    ]
    assert [c.strip(" |") for c in rows["fedgraph-work - graphsage (seed-paired, points)"]] == [
        "+0.0 (0/1/0)",
        "+0.0 (0/1/0)",
        "+0.0 (0/1/0)",
    ]
    # a fixed policy without the agent's seed is left out of the comparison
    alone = report.equal_work_table([agent, {**fixed, "seed": 1}], fractions=(1,))
    assert "| Cora | fedgraph-work | 1 | 85.0 |" in alone and "| Cora | fixed |" not in alone


def test_the_sharing_gap_pairs_seeds_not_list_positions_and_gives_the_t_interval(monkeypatch):
    def run(variant, seed, acc):
        return {
            "variant": variant,
            "dataset": "Cora",
            "seed": seed,
            "var": 0.1,
            "data": "random",
            "final_accuracy": acc,
            "cross_fraction": 0.8,
            "curve": [[1, 0.5, acc, 1, 0.1, 0.01]],
        }

    # nonShare's cells listed in another seed order, and one seed (3) without a FedGraph cell
    runs = [
        run("fixed", 0, 0.84),
        run("fixed", 1, 0.85),
        run("fixed", 2, 0.83),
        run("nonshare", 3, 0.10),
        run("nonshare", 2, 0.78),
        run("nonshare", 0, 0.77),
        run("nonshare", 1, 0.79),
        run("allshare", 0, 0.83),
    ]
    line = next(line for line in ablations.sharing_table(runs).splitlines() if line.startswith("| Cora | random"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # seed-paired gaps 7, 6, 5 points: mean 6.0, std 1.0; t(0.975, 2) = 4.302653 -> half width 2.48
    assert cells[6] == "6.0 ± 1.0"
    assert cells[7] == "[+3.5, +8.5]"
    # the figure draws the same pairs: FedGraph - nonShare by seed (7, 6, 5 points), FedGraph - allShare (seed 0)
    drawn = {}
    monkeypatch.setattr(ablations, "paired_figure", lambda rows, name, *a, **k: drawn.update(rows=rows, **k) or name)
    assert ablations.sharing_figure(runs, "x.png") == "x.png"
    assert [(label, [round(x, 6) for x in diffs], paper) for label, diffs, paper in drawn["rows"]] == [
        ("Cora, cut partition: FedGraph - nonShare", [7.0, 6.0, 5.0], None),
        ("Cora, cut partition: FedGraph - allShare", [1.0], None),
    ]
    assert drawn["target"] == ("issue: +5 over nonShare", 5.0)
