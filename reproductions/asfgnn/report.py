"""ASFGNN's benchmark report (``reproductions/asfgnn/run.py``): Tables 3, 5, the control and Table 7's tuning cost from
the stored cells' rows (:func:`tables`; Table 6 is ``table6.py``, the rows' helpers ``rows.py``), their
prose from ``reproductions/asfgnn/templates/``, and the cells parked in progress (:func:`parked_note`). The figures are
``figures.py``."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from reproductions.asfgnn.figures import plot_search, plot_traces  # noqa: E402
from reproductions.asfgnn.grid import (  # noqa: E402
    BUDGETS,
    LABELS,
    LANES,
    PAPER3,
    PAPER5,
    PAPER6,
    PAPER7,
    SOURCES,
    same_computation,
)
from reproductions.asfgnn.parking import parked_dir, read_parked  # noqa: E402
from reproductions.asfgnn.rows import (  # noqa: E402
    TOP,
    accuracy,
    fmt,
    lane_of,
    mean_trace,
    paired,
    reach,
    seed_differences,
    top_by_validation,
    wall_min,
)
from reproductions.asfgnn.table6 import controls, table6  # noqa: E402
from reproductions._runner.cells import _sources_hash  # noqa: E402
from reproductions._runner.common import paired_figure, table  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

TARGET = 0.005  # Table 7: within 0.5 points of the best validation accuracy


def parked_note(budget: str, root: Path | None = None) -> str:
    """A paragraph for the results file listing this budget's parked cells (in progress), '' if none."""
    folder = parked_dir(root)
    lines = []
    for path in sorted(folder.glob(f"*-{budget}-*.json.xz")) if folder.is_dir() else []:
        parked = read_parked(path)
        current = parked.get("sources") in same_computation(_sources_hash(SOURCES))
        code = "" if current else " (older code: will not be resumed)"
        lines.append(
            f"- {parked['cell']}: {parked['trials_finished']} of {parked['config']['asfgnn.trials']} trials "
            f"(round {parked['round']}), {parked['wall_s'] / 3600:.2f} h so far, parked "
            f"{parked['parked_at']}{code}"
        )
    if not lines:
        return ""
    return (
        "\n\n**In progress (parked, not in the tables above)**: resumed by the command that computes them "
        "(`reproductions/asfgnn/cells/asfgnn/parked/`):\n\n" + "\n".join(lines)
    )


def mark(cells: list[dict]) -> str:
    return " †" if any(c.get("stale") for c in cells) else ""


def tables(rows: list[dict], budget: str) -> str:
    """The results file's tables for ``budget``, from the stored cells' ``rows``."""

    def of(kind, **match):
        return [r for r in rows if r.get("kind") == kind and all(r.get(k) == v for k, v in match.items())]

    seeds = sorted({r["seed"] for r in rows})
    # the usual number of seeds per tuned row; a cell over another number says so
    groups = Counter(
        tuple(r.get(k) for k in ("dataset", "setting", "alpha", "method")) for r in rows if r.get("kind") == "tuned"
    )
    n = statistics.mode(groups.values()) if groups else None
    out = table3(of, n, budget) + table5(of, budget) + table6(of, n, budget) + controls(of, budget)
    out += control(of, budget) + table7(of, seeds, budget)
    stale = [r for r in rows if r.get("stale")]
    if stale:
        out += ["\n**Cells from older code** (†):\n", "\n".join(f"- {r['cell']}{r['stale']}" for r in stale)]
    return "\n".join(out) if out else "No cells yet."


def table3(of, n: int | None, budget: str) -> list[str]:
    """Table 3 (Cora and CiteSeer, label skew, alpha 1), its seed-paired order, selection on test and traces."""
    t3 = [d for d in ("Cora", "CiteSeer") if of("tuned", dataset=d, setting="label", alpha=1.0, budget=budget)]
    if not t3:
        return []
    body, t3_seeds = [], set()
    for d in t3:
        line = [d]
        for m in ("cm", "fl", "sp", "sfgnn"):
            cells = of("tuned", dataset=d, setting="label", alpha=1.0, method=m, budget=budget)
            t3_seeds.update(c["seed"] for c in cells)
            line.append(f"{fmt([accuracy(c) for c in cells], n=n)}{mark(cells)} \\| {PAPER3[d][m]:.4f}")
        body.append(line)
    out = [
        # the seeds of this table's cells, not of every part's (Table 6 may have more)
        render("asfgnn/table3", budget=budget, seeds=sorted(t3_seeds), n=n) + "\n",
        table(["dataset"] + [f"{LABELS[m]} (ours \\| paper)" for m in ("cm", "fl", "sp", "sfgnn")], body),
    ]
    out += table3_paired(of, t3, budget) + selected_on_test(of, t3, n, budget)
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
    return out


def table3_paired(of, t3: list[str], budget: str) -> list[str]:
    """Table 3's order (SFGNN > SP > FL > CM), each pair's differences paired by seed, with its forest plot."""
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
    if not pairs:
        return []
    out = [
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
    return out


def selected_on_test(of, t3: list[str], n: int | None, budget: str) -> list[str]:
    """Table 3's methods with the trial selected on validation, the mean of the best few, and selected on test."""
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
    if not oracle:
        return []
    paper = {d: {**PAPER3[d], **({"sfgnn-nojs": PAPER6[1.0][0]} if d == "Cora" else {})} for d in t3}
    return [
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


def table5(of, budget: str) -> list[str]:
    """Table 5: non-IID labels and graph (the degree split)."""
    t5 = [d for d in ("Cora", "CiteSeer") if of("tuned", dataset=d, setting="graph", budget=budget)]
    if not t5:
        return []
    body = [
        [d]
        + [
            f"{fmt([accuracy(c) for c in of('tuned', dataset=d, setting='graph', method=m, budget=budget)])}"
            f" \\| {PAPER5[d][m]:.4f}"
            for m in ("fl", "sfgnn")
        ]
        for d in t5
    ]
    return [
        f"\n## Paper Table 5: non-IID labels and graph (degree split), budget `{budget}`\n",
        table(["dataset", "FL (ours \\| paper)", "SFGNN (ours \\| paper)"], body),
    ]


def control(of, budget: str) -> list[str]:
    """The control: Table 4's fixed hyper-parameters, no search."""
    if not of("control", budget=budget):
        return []
    body = [
        [
            LABELS[m],
            fmt([c["test"] for c in of("control", method=m, budget=budget)]),
            fmt([c["best_val"] for c in of("control", method=m, budget=budget)]),
        ]
        for m in ("sfgnn", "sfgnn-nojs", "sp")
        if of("control", method=m, budget=budget)
    ]
    return [
        "\n" + render("asfgnn/control", rounds=BUDGETS[budget]["asfgnn.trial-rounds"]) + "\n",
        table(["method", "mean client test", "best mean val"], body),
    ]


def search_rows(searches: dict, seeds: list[int]) -> tuple[list[list], dict]:
    """Table 7's rows, one per (seed, driver): its best, the trials and minutes to its seed's target (within
    ``TARGET`` of the best any driver reached) and its speed-up over grid search; and the targets by seed."""
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
    return body, targets


def table7(of, seeds: list[int], budget: str) -> list[str]:
    """Table 7: the tuning cost of SMAC against grid and random search, per seed and over the seeds."""
    searches = {lane: [c for c in of("search", budget=budget) if lane_of(c) == lane] for lane in LANES}
    searches = {lane: cells for lane, cells in searches.items() if cells}
    if not searches:
        return []
    body, targets = search_rows(searches, seeds)
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
    out = [
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
    return out
