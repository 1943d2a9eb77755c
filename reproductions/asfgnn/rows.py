"""ASFGNN's benchmark rows (``reproductions/asfgnn/run.py``): what the report reads from a stored cell's row (its
accuracy, its tuning trace, its wall time), mean ± std over seeds, and seed-paired differences. The tables are
``report.py`` and ``table6.py``."""

from __future__ import annotations

import statistics

from reproductions._runner.common import ahead_level_behind, interval_text, outside, t_interval  # noqa: E402


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
