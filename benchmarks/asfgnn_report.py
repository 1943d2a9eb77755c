"""ASFGNN's benchmark report (``benchmarks/asfgnn.py``): Tables 3, 5, 6, the control and Table 7's tuning cost
from the stored cells' rows (:func:`tables`), their prose from ``benchmarks/templates/asfgnn/``, and the cells parked
in progress (:func:`parked_note`). The figures are ``asfgnn_figures.py``."""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from asfgnn_figures import plot_alpha, plot_search, plot_traces  # noqa: E402
from asfgnn_grid import (
    ALPHAS,
    BUDGETS,
    LABELS,
    LANES,
    PAPER3,
    PAPER5,
    PAPER6,
    PAPER7,
    SOURCES,  # noqa: E402
    paper_fig3,
    parked_dir,
    read_parked,
)
from common import (
    _sources_hash,
    ahead_level_behind,
    interval_text,
    outside,
    paired_figure,  # noqa: E402
    t_interval,
    table,
)
from prose import render  # noqa: E402

TARGET = 0.005  # Table 7: within 0.5 points of the best validation accuracy


def parked_note(budget: str, root: Path | None = None) -> str:
    """A paragraph for the results file listing this budget's parked cells (in progress), '' if none."""
    folder = parked_dir(root)
    lines = []
    for path in sorted(folder.glob(f"*-{budget}-*.json.xz")) if folder.is_dir() else []:
        parked = read_parked(path)
        code = "" if parked.get("sources") == _sources_hash(SOURCES) else " (older code: will not be resumed)"
        lines.append(
            f"- {parked['cell']}: {parked['trials_finished']} of {parked['config']['asfgnn.trials']} trials "
            f"(round {parked['round']}), {parked['wall_s'] / 3600:.2f} h so far, parked "
            f"{parked['parked_at']}{code}"
        )
    if not lines:
        return ""
    return (
        "\n\n**In progress (parked, not in the tables above)**: resumed by the command that computes them "
        "(`benchmarks/cells/asfgnn/parked/`):\n\n" + "\n".join(lines)
    )


def fmt(values: list[float], digits: int = 4, n: int | None = None) -> str:
    """mean ± std; with ``n`` (the seeds a table is about), a cell over another number of seeds says how many."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    count = f" (n={len(values)})" if n is not None and len(values) != n else ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}{count}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}{count}"


def by_seed(a_cells: list[dict], b_cells: list[dict]) -> tuple[list[int], dict[int, float], dict[int, float]]:
    """The seeds that have both a cell of a and one of b, and each side's accuracy by seed."""
    a = {c["seed"]: accuracy(c) for c in a_cells}
    b = {c["seed"]: accuracy(c) for c in b_cells}
    return sorted(set(a) & set(b)), a, b


def seed_differences(a_cells: list[dict], b_cells: list[dict]) -> dict[int, float]:
    """a's accuracy minus b's, by seed, over the seeds that have both (in increasing order of seed)."""
    both, a, b = by_seed(a_cells, b_cells)
    return {k: a[k] - b[k] for k in both}


def paired(a_cells: list[dict], b_cells: list[dict], paper: float | None = None) -> list[str] | None:
    """a against b over the seeds that have both: [seeds, a, b, a - b, on how many seeds a is ahead / level /
    behind, the 95% t-interval of the mean difference, the 95% range of one run's difference] and, given the
    paper's difference (one run), it and where it lies against that one-run range (None if no seed has both)."""
    both, a, b = by_seed(a_cells, b_cells)
    if not both:
        return None
    diff = [a[k] - b[k] for k in both]
    spread = f" ± {statistics.stdev(diff):.4f}" if len(diff) > 1 else ""
    mean_ci, one_run = t_interval(diff), t_interval(diff, one_run=True)
    row = [
        f"{len(both)} ({', '.join(map(str, both))})",
        fmt([a[k] for k in both]),
        fmt([b[k] for k in both]),
        f"{statistics.mean(diff):+.4f}{spread}",
        ahead_level_behind(diff),
        interval_text(mean_ci, 4),
        interval_text(one_run, 4),
    ]
    if paper is not None:
        row += [f"{paper:+.4f}", outside(paper, one_run)]
    return row


def accuracy(row: dict) -> float:
    """The paper's number: the mean of the clients' test accuracies (CM: of the owners' nodes in the union)."""
    if row["method"] == "cm":
        best = next(t for t in row["trials"] if t["trial"] == row["best_trial"])
        return best["owner_test"]
    return row["test"]


TOP = 10  # the selected-on-test control's middle column: the test accuracy of a cell's 10 best trials by validation


def top_by_validation(row: dict, top: int = TOP) -> float:
    """The mean test accuracy of the ``top`` trials of a tuned cell with the best validation accuracy (each trial's
    test accuracy at its own best validation; CM: the owners' nodes, as :func:`accuracy`)."""
    key = "owner_test" if row["method"] == "cm" else "test"
    best = sorted(row["trials"], key=lambda t: -t["best_val"])[:top]
    return statistics.mean(t[key] for t in best)


def tuning_trace(row: dict) -> list[tuple[float, float]]:
    """After each trial of a tuned cell, in trial order: the best validation accuracy so far and the test accuracy
    of the trial that holds it (the first on a tie, as the tuner's incumbent), i.e. what the table would report had
    tuning stopped there (CM: the owners' nodes, as :func:`accuracy`)."""
    key = "owner_test" if row["method"] == "cm" else "test"
    trace, best = [], None
    for t in sorted(row["trials"], key=lambda t: t["trial"]):
        if best is None or t["best_val"] > best["best_val"]:
            best = t
        trace.append((best["best_val"], best[key]))
    return trace


def mean_trace(cells: list[dict]) -> tuple[list[float], list[float], int]:
    """:func:`tuning_trace` averaged over cells (seeds), up to the fewest trials any of them ran: (validation,
    test, number of cells)."""
    traces = [tuning_trace(c) for c in cells]
    k = min(len(t) for t in traces)
    return (
        [statistics.mean(t[i][0] for t in traces) for i in range(k)],
        [statistics.mean(t[i][1] for t in traces) for i in range(k)],
        len(traces),
    )


def lane_of(row: dict) -> str:
    """A search cell's driver as Table 7 names it: SMAC's BlackBox facade (GP + EI) is ``smac-gp``; cells from
    before the facade was recorded ran the HPO facade."""
    return "smac-gp" if row["driver"] == "smac" and row.get("facade") == "blackbox" else row["driver"]


def wall_min(row: dict) -> str:
    """A cell's wall minutes. A cell stopped and resumed before stopped segments were timed (:func:`segments_before`)
    has a wall time under its trials' own (it covers the last segment only): then the trials' minutes, marked, a
    lower bound (the time between trials is not in them)."""
    trial_s = sum(t["time_s"] for t in row["trials"])
    if row["wall_s"] < 0.9 * trial_s:
        return f">= {trial_s / 60:.1f} (trials; resumed)"
    return f"{row['wall_s'] / 60:.1f}"


def reach(trials: list[dict], target: float) -> tuple[int, float] | None:
    """(trials, seconds) a search needed until its best validation accuracy reached ``target``."""
    best, spent = float("-inf"), 0.0
    for i, t in enumerate(sorted(trials, key=lambda t: t["trial"]), start=1):
        spent += t["time_s"]
        best = max(best, t["best_val"])
        if best >= target:
            return i, spent
    return None


def tables(rows: list[dict], budget: str) -> str:
    out: list[str] = []
    stale = [r for r in rows if r.get("stale")]

    def of(kind, **match):
        return [r for r in rows if r.get("kind") == kind and all(r.get(k) == v for k, v in match.items())]

    def mark(cells):
        return " †" if any(c.get("stale") for c in cells) else ""

    seeds = sorted({r["seed"] for r in rows})
    # the usual number of seeds per tuned row; a cell over another number says so
    groups = Counter(
        tuple(r.get(k) for k in ("dataset", "setting", "alpha", "method")) for r in rows if r.get("kind") == "tuned"
    )
    n = statistics.mode(groups.values()) if groups else None
    t3 = [d for d in ("Cora", "CiteSeer") if of("tuned", dataset=d, setting="label", alpha=1.0, budget=budget)]
    if t3:
        body = []
        for d in t3:
            line = [d]
            for m in ("cm", "fl", "sp", "sfgnn"):
                cells = of("tuned", dataset=d, setting="label", alpha=1.0, method=m, budget=budget)
                line.append(f"{fmt([accuracy(c) for c in cells], n=n)}{mark(cells)} \\| {PAPER3[d][m]:.4f}")
            body.append(line)
        out += [
            render("asfgnn/table3", budget=budget, seeds=seeds, n=n) + "\n",
            table(["dataset"] + [f"{LABELS[m]} (ours \\| paper)" for m in ("cm", "fl", "sp", "sfgnn")], body),
        ]
        pairs, forest = [], []
        for d in t3:
            for a, b in (("sfgnn", "sp"), ("sp", "fl"), ("fl", "cm")):
                a_cells, b_cells = (
                    of("tuned", dataset=d, setting="label", alpha=1.0, method=m, budget=budget) for m in (a, b)
                )
                row = paired(a_cells, b_cells, paper=PAPER3[d][a] - PAPER3[d][b])
                if row:
                    pairs.append([d, f"{LABELS[a]} - {LABELS[b]}", *row])
                    forest.append(
                        (
                            f"{d}: {LABELS[a]} - {LABELS[b]}",
                            [100 * x for x in seed_differences(a_cells, b_cells).values()],
                            100 * (PAPER3[d][a] - PAPER3[d][b]),
                        )
                    )
        if pairs:
            out += [
                "\n" + render("asfgnn/table3_paired") + "\n",
                table(
                    [
                        "dataset",
                        "pair",
                        "seeds",
                        "first",
                        "second",
                        "first - second",
                        "ahead / level / behind",
                        "95% interval of the mean",
                        "95% range of one run",
                        "paper",
                        "paper vs one run",
                    ],
                    pairs,
                ),
            ]
            if figure := paired_figure(
                forest,
                f"asfgnn_paired_{budget}.png",
                "first - second (points of accuracy)",
                f"Table 3's order, seed-paired (budget {budget})",
            ):
                out += [
                    f"\n![Table 3's order seed-paired: each seed, the mean, its 95% interval, the 95% range of "
                    f"one run and the paper's single run]({figure})"
                ]
        oracle = []  # (dataset, method, its cells that have the control's column)
        for d in t3:
            for m in ("cm", "fl", "sp", "sfgnn-nojs", "sfgnn"):
                cells = [
                    c
                    for c in of("tuned", dataset=d, setting="label", alpha=1.0, method=m, budget=budget)
                    if c.get("oracle_test") is not None
                ]
                if cells:
                    oracle.append((d, m, cells))
        if oracle:
            paper = {d: {**PAPER3[d], **({"sfgnn-nojs": PAPER6[1.0][0]} if d == "Cora" else {})} for d in t3}
            out += [
                "\n" + render("asfgnn/selected_on_test", top=TOP) + "\n",
                table(
                    [
                        "dataset",
                        "method",
                        "selected on validation",
                        f"mean of the {TOP} best by validation",
                        "selected on test",
                        "paper",
                    ],
                    [
                        [
                            d,
                            LABELS[m],
                            fmt([accuracy(c) for c in cells], n=n),
                            fmt([top_by_validation(c) for c in cells], n=n),
                            fmt([c["oracle_test"] for c in cells], n=n),
                            f"{paper[d][m]:.4f}" if m in paper[d] else "-",
                        ]
                        for d, m, cells in oracle
                    ],
                ),
            ]
        traces = {
            d: {
                m: mean_trace(cells)
                for m in ("cm", "fl", "sp", "sfgnn")
                if (cells := of("tuned", dataset=d, setting="label", alpha=1.0, method=m, budget=budget))
            }
            for d in t3
        }
        if figure := plot_traces(traces, budget):
            out += ["\n" + render("asfgnn/trace") + "\n", f"![Table 3's incumbent after each trial]({figure})"]
    t5 = [d for d in ("Cora", "CiteSeer") if of("tuned", dataset=d, setting="graph", budget=budget)]
    if t5:
        body = [
            [d]
            + [
                f"{fmt([accuracy(c) for c in of('tuned', dataset=d, setting='graph', method=m, budget=budget)])}"
                f" \\| {PAPER5[d][m]:.4f}"
                for m in ("fl", "sfgnn")
            ]
            for d in t5
        ]
        out += [
            f"\n## Paper Table 5: non-IID labels and graph (degree split), budget `{budget}`\n",
            table(["dataset", "FL (ours \\| paper)", "SFGNN (ours \\| paper)"], body),
        ]
    t6 = [a for a in ALPHAS if of("tuned", dataset="Cora", setting="label", alpha=a, budget=budget)]
    if t6:

        def gap(cs: list[dict]) -> str:
            """What the tuner saw / what the table reports (gap) / the selected-on-test bound, means over seeds."""
            oracle = [c["oracle_test"] for c in cs if c.get("oracle_test") is not None]
            return (
                f"{statistics.mean(c['best_val'] for c in cs):.3f} / {statistics.mean(accuracy(c) for c in cs):.3f}"
                f" ({statistics.mean(c['best_val'] - accuracy(c) for c in cs):+.3f}) / "
                + (f"{statistics.mean(oracle):.3f}" if len(oracle) == len(cs) else "-")
            )

        body, gaps, js_pairs, by_alpha = [], [], [], {}
        for a in sorted(t6, reverse=True):
            cells = by_alpha[a] = {
                m: of("tuned", dataset="Cora", setting="label", alpha=a, method=m, budget=budget)
                for m in ("sfgnn-nojs", "sfgnn", "fl", "sp")
            }
            if row := paired(cells["sfgnn"], cells["sfgnn-nojs"], paper=PAPER6[a][1] - PAPER6[a][0]):
                js_pairs.append([f"{a:.1f}", *row])
            means = {m: statistics.mean(accuracy(c) for c in cs) for m, cs in cells.items() if cs}
            best_paper, sp_fl_paper = paper_fig3(a)
            best = (
                max(("sfgnn", "fl", "sp"), key=means.__getitem__).upper()
                if all(m in means for m in ("sfgnn", "fl", "sp"))
                else "-"
            )
            sp_fl = ("SP" if means["sp"] > means["fl"] else "FL") if all(m in means for m in ("fl", "sp")) else "-"
            body.append(
                [
                    f"{a:.1f}",
                    f"{fmt([accuracy(c) for c in cells['sfgnn-nojs']], n=n)} \\| {PAPER6[a][0]:.4f}",
                    f"{fmt([accuracy(c) for c in cells['sfgnn']], n=n)} \\| {PAPER6[a][1]:.4f}",
                    fmt([accuracy(c) for c in cells["fl"]], n=n),
                    fmt([accuracy(c) for c in cells["sp"]], n=n),
                    f"{best} \\| {best_paper}",
                    f"{sp_fl} \\| {sp_fl_paper}",
                ]
            )
            gaps.append(
                [f"{a:.1f}"]
                + [gap(cells[m]) if cells[m] else "-" for m in ("fl", "sp", "sfgnn", "sfgnn-nojs")]
                + [f"{PAPER6[a][1]:.3f}"]
            )
        out += [
            "\n" + render("asfgnn/table6", budget=budget) + "\n",
            table(
                [
                    "alpha",
                    "without JS (ours \\| paper)",
                    "with JS (ours \\| paper)",
                    "FL",
                    "SP",
                    "best of SFGNN, FL, SP (ours \\| paper's text)",
                    "SP or FL ahead (ours \\| paper's text)",
                ],
                body,
            ),
        ]
        if js_pairs:
            out += [
                "\n" + render("asfgnn/table6_paired") + "\n",
                table(
                    [
                        "alpha",
                        "seeds",
                        "with JS",
                        "without JS",
                        "with - without",
                        "ahead / level / behind",
                        "95% interval of the mean",
                        "95% range of one run",
                        "paper's improvement",
                        "paper vs one run",
                    ],
                    js_pairs,
                ),
            ]
        out += [
            "\n" + render("asfgnn/tuner_gap") + "\n",
            table(
                [
                    "alpha",
                    "FL: val / test (gap) / on test",
                    "SP: val / test (gap) / on test",
                    "SFGNN: val / test (gap) / on test",
                    "without JS: val / test (gap) / on test",
                    "paper SFGNN",
                ],
                gaps,
            ),
        ]
        if figure := plot_alpha(alpha_curves(by_alpha), budget):
            out += [f"\n![Fig. 3 shape: accuracy over alpha, and JS minus no JS seed-paired]({figure})"]
    control = of("control", budget=budget)
    if control:
        body = [
            [
                LABELS[m],
                fmt([c["test"] for c in of("control", method=m, budget=budget)]),
                fmt([c["best_val"] for c in of("control", method=m, budget=budget)]),
            ]
            for m in ("sfgnn", "sfgnn-nojs", "sp")
            if of("control", method=m, budget=budget)
        ]
        out += [
            "\n" + render("asfgnn/control", rounds=BUDGETS[budget]["asfgnn.trial-rounds"]) + "\n",
            table(["method", "mean client test", "best mean val"], body),
        ]
    searches = {lane: [c for c in of("search", budget=budget) if lane_of(c) == lane] for lane in LANES}
    searches = {lane: cells for lane, cells in searches.items() if cells}
    if searches:
        body, targets = [], {}
        for seed in seeds:
            cells = {d: next((c for c in searches[d] if c["seed"] == seed), None) for d in searches}
            found = [c for c in cells.values() if c is not None]
            if not found:
                continue
            target = targets[seed] = max(c["best_val"] for c in found) - TARGET
            reached = {d: reach(c["trials"], target) if c else None for d, c in cells.items()}
            for d in searches:
                c, r = cells[d], reached[d]
                if c is None:
                    continue
                speed = "-"
                if d != "grid" and r and cells.get("grid") is not None:
                    # grid did not reach the target in its whole run: its run time is a lower bound on its time
                    speed = (
                        f"{reached['grid'][1] / r[1]:.2f}"
                        if reached["grid"]
                        else f"> {sum(t['time_s'] for t in cells['grid']['trials']) / r[1]:.2f}"
                    )
                body.append(
                    [
                        seed,
                        d,
                        f"{c['best_val']:.4f}",
                        f"{c['test']:.4f}",
                        len(c["trials"]),
                        f"{target:.4f}",
                        r[0] if r else "not reached",
                        f"{r[1] / 60:.1f}" if r else "-",
                        speed,
                        wall_min(c),
                    ]
                )
        summary = []
        for d in searches:
            done = [c for c in searches[d] if c["seed"] in seeds]
            hits = [reach(c["trials"], targets[c["seed"]]) for c in done if c["seed"] in targets]
            got = [h for h in hits if h]
            summary.append(
                [
                    d,
                    f"{len(got)} of {len(hits)}",
                    f"{statistics.mean(h[0] for h in got):.1f}" if got else "-",
                    f"{statistics.mean(h[1] for h in got) / 60:.1f}" if got else "-",
                    f"{statistics.mean(c['best_val'] for c in done):.4f}" if done else "-",
                ]
            )
        figure = plot_search(searches, seeds, targets, budget)
        out += [
            "\n" + render("asfgnn/table7", budget=budget, points=f"{100 * TARGET:.1f}", **PAPER7) + "\n",
            table(
                [
                    "seed",
                    "driver",
                    "best val",
                    "its test",
                    "trials run",
                    "target",
                    "trials to target",
                    "min to target",
                    "speed-up vs grid",
                    "wall min",
                ],
                body,
            ),
            "\nOver the seeds: in how many each driver reached its seed's target, and the mean trials and minutes "
            "it needed where it did.\n",
            table(["driver", "reached", "mean trials to target", "mean min to target", "mean best val"], summary),
        ]
        if figure:
            out += [f"\n![best validation accuracy so far per trial]({figure})"]
    if stale:
        out += ["\n**Cells from older code** (†):\n", "\n".join(f"- {r['cell']}{r['stale']}" for r in stale)]
    return "\n".join(out) if out else "No cells yet."


def alpha_curves(by_alpha: dict[float, dict[str, list[dict]]]) -> dict[str, list[tuple[float, float, float, int]]]:
    """Fig. 3's points from Table 6's cells (``{alpha: {method: cells}}``): for each method, ``(alpha, mean, std,
    seeds)`` of the mean client test accuracy over its cells, and under ``"js-diff"`` the seed-paired difference with
    JS minus without over the seeds that have both (std 0.0 where there is one value); alphas in increasing order."""
    curves: dict[str, list[tuple[float, float, float, int]]] = {}

    def point(a: float, values: list[float]) -> tuple[float, float, float, int]:
        return a, statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)

    for a in sorted(by_alpha):
        for m, cells in by_alpha[a].items():
            if cells:
                curves.setdefault(m, []).append(point(a, [accuracy(c) for c in cells]))
        if diff := seed_differences(by_alpha[a].get("sfgnn", []), by_alpha[a].get("sfgnn-nojs", [])):
            curves.setdefault("js-diff", []).append(point(a, list(diff.values())))
    return curves
