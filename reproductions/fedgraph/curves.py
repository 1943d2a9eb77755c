"""FedGraph's benchmark curves (``reproductions/fedgraph/run.py``): a cell's accuracy curve cut into episodes, on three
axes (the run's clock, cumulative work, the slowest clients' summed training time), the time to a target and the
accuracy at a budget, the episodes of a DDPG run, and which cells compare with which. The tables are
``report.py`` and ``learning.py``.

A curve row is [round, run clock s, accuracy, episode, largest client GMAC, slowest client s]
(``fedgraph_grid.run_cell``); an agent's run restarts training every episode, so its times count from the start of
its last episode."""

from __future__ import annotations

import statistics

import numpy as np

from reproductions.fedgraph.grid import AGENT_VARIANTS  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

TARGET = 0.75  # the paper's Fig. 7 statement for Cora
TARGET_HIGH = {"Cora": 0.85, "CiteSeer": 0.70}  # a second target: Cora near its curves' end, CiteSeer below


def episode_curves(row: dict) -> list[list[list]]:
    """The curve cut into the run's episodes (FedGraph restarts training every episode), each with its times from
    the episode's start; a run without episodes (the fixed policies and baselines) is one episode."""
    curve = row["curve"]
    if row["variant"] not in AGENT_VARIANTS:
        return [curve]
    out = []
    for i, c in enumerate(curve):
        if i == 0 or c[3] != curve[i - 1][3]:
            start = curve[i - 1][1] if i > 0 and curve[i - 1][0] == c[0] - 1 else 0.0
            out.append([])
        out[-1].append([c[0], c[1] - start, *c[2:]])
    return out


def last_episode(row: dict) -> list[list]:
    """The curve from the start of the run's last episode (FedGraph restarts training every episode), times from
    that start."""
    return episode_curves(row)[-1]


def cumulative_work(curve: list[list]) -> list[float] | None:
    """The running sum of every round's largest client work (GMAC) along ``curve``; None for cells that predate
    the work count."""
    if not curve or len(curve[0]) < 5 or any(c[4] is None for c in curve):
        return None
    return np.cumsum([c[4] for c in curve]).tolist()


def cumulative_client_time(curve: list[list]) -> list[float] | None:
    """The running sum of every round's slowest client's local training time (s) along ``curve``: the training's
    critical path if every client had its own machine and messages cost nothing (all clients share one process
    here, so the run's own clock sums them instead); None for cells that predate the count."""
    if not curve or len(curve[0]) < 6 or any(c[5] is None for c in curve):
        return None
    return np.cumsum([c[5] for c in curve]).tolist()


def curve_points(curve: list[list], by: str) -> list[tuple[float, float | None]] | None:
    """(x, accuracy) per round of ``curve`` (one episode), x = seconds of the run's clock from its start
    (``by="time"``), cumulative work in GMAC (``by="work"``) or the cumulative slowest client's training seconds
    (``by="client"``); None for cells that predate the count."""
    xs = (
        [c[1] for c in curve]
        if by == "time"
        else cumulative_work(curve)
        if by == "work"
        else cumulative_client_time(curve)
    )
    return None if xs is None else [(x, c[2]) for x, c in zip(xs, curve)]


def along(row: dict, by: str) -> list[tuple[float, float | None]] | None:
    """:func:`curve_points` along the run's last episode."""
    return curve_points(last_episode(row), by)


def curve_time_to(curve: list[list], target: float = TARGET, by: str = "time") -> float | None:
    """Seconds (GMAC with ``by="work"``, the slowest clients' training seconds with ``by="client"``) along one
    episode's ``curve`` until ``target`` is reached; None if never."""
    return next((x for x, acc in curve_points(curve, by) or [] if acc is not None and acc >= target), None)


def accuracy_at_work(row: dict, gmacs: float) -> float | None:
    """The accuracy of the last round whose cumulative work (last episode) is within ``gmacs``."""
    return accuracy_at(row, gmacs + 1e-12, by="work")


def time_to(row: dict, target: float = TARGET, by: str = "time") -> float | None:
    """Seconds of the run's clock (GMAC with ``by="work"``, the slowest clients' training seconds with
    ``by="client"``) of the last episode until ``target`` is reached; None if never."""
    return curve_time_to(last_episode(row), target, by)


def split_of(row: dict) -> str:
    return row.get("split", "public")


def data_of(row: dict) -> str:
    return row.get("data", "synthesis")


def mean_std_pct(values: list[float], scale: float = 100.0) -> str:
    values = [scale * v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def reached_text(values: list[float | None], digits: int = 2) -> str:
    """The mean over the runs that reached a target, and how many did: '1.23 (2/3)' or 'never (0/3)'; '-' when
    there are no runs."""
    if not values:
        return "-"
    reached = [v for v in values if v is not None]
    if not reached:
        return f"never (0/{len(values)})"
    return f"{statistics.mean(reached):.{digits}f} ({len(reached)}/{len(values)})"


def time_summary(rows: list[dict], target: float = TARGET, by: str = "time") -> str:
    """:func:`reached_text` over ``rows``' last episodes: seconds of the run's clock (``by="time"``, 2 digits), GMAC
    (``by="work"``) or the slowest clients' training seconds (``by="client"``; both 3 digits) to ``target``."""
    return reached_text([time_to(r, target, by) for r in rows], 2 if by == "time" else 3)


def accuracy_at(row: dict, budget: float, by: str = "time") -> float | None:
    """The accuracy of the last round finished within ``budget`` seconds (or GMAC, ``by="work"``) of the
    (last-episode) curve's start."""
    done = [acc for x, acc in along(row, by) or [] if x <= budget and acc is not None]
    return done[-1] if done else None


def same_budget(runs: list[dict], row: dict) -> float | None:
    """``row``'s accuracy at the wall time of the same seed's FedGraph (DDPG) episode: the same time budget."""
    agent = [
        r
        for r in runs
        if r["variant"] == "fedgraph"
        and r["dataset"] == row["dataset"]
        and r["seed"] == row["seed"]
        and r["var"] == row["var"]
    ]
    return accuracy_at(row, last_episode(agent[0])[-1][1]) if agent else None


def versus(mine: float | None, theirs: float | None) -> int:
    """+1 if ``mine`` is the higher accuracy, -1 if lower, 0 if level; no round finished yet (None) loses."""
    if mine is None or theirs is None:
        return (mine is not None) - (theirs is not None)
    return (mine > theirs) - (mine < theirs)


def spearman(a: list[float], b: list[float]) -> str:
    if len(a) != len(b) or len(a) < 3:
        return "-"
    ra = np.argsort(np.argsort(np.asarray(a, dtype=float), kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(np.asarray(b, dtype=float), kind="stable"), kind="stable").astype(float)
    return f"{float(np.corrcoef(ra, rb)[0, 1]):+.2f}"


def episodes(row: dict) -> list[dict]:
    """Per finished episode of a DDPG run: its return, the accuracy after its last round, its wall time (from its
    start), each client's mean policy over its rounds (kappa, p per convolution; from ``policy_trace``), its work
    and its curve (:func:`episode_curves`)."""
    trace = row.get("policy_trace")
    out, first = [], 0
    for part in episode_curves(row):
        e, idx = part[0][3], range(first, first + len(part))
        first += len(part)
        policies = None
        if trace and all(trace[i] for i in idx):
            policies = np.mean(np.asarray([trace[i] for i in idx], dtype=float), axis=0).tolist()
        work = [c[4] for c in part] if len(part[0]) >= 5 else []
        out.append(
            {
                "episode": e,
                "return": row["returns"][e - 1] if e - 1 < len(row["returns"]) else None,
                "accuracy": part[-1][2],
                "seconds": part[-1][1],
                "rounds": len(part),
                "curve": part,
                "policies": policies,
                "gmacs": sum(work) if work and None not in work else None,
            }
        )
    return [x for x in out if x["return"] is not None]  # a finished episode has its return


OTHER_CPU = "‡"  # marks seconds from a cell measured on another CPU model than the row it is compared with
OTHER_CPU_NOTE = render("fedgraph/other_cpu", mark=OTHER_CPU)


def same_cpu(a: dict, b: dict) -> bool:
    """Whether cells ``a`` and ``b`` recorded the same CPU model: only then do their seconds compare."""
    cpu = a.get("cpu") or "not recorded"
    return cpu != "not recorded" and cpu == (b.get("cpu") or "not recorded")


def references(rows: list[dict], row: dict, variants: tuple[str, ...]) -> list[dict]:
    """The default budget's cells of ``variants`` with ``row``'s dataset, seed, variance, split, data and clients."""
    return [
        r
        for r in rows
        if r.get("kind") == "run"
        and r["variant"] in variants
        and r["budget"] == "default"
        and r["dataset"] == row["dataset"]
        and r["seed"] == row["seed"]
        and r["var"] == row["var"]
        and split_of(r) == split_of(row)
        and data_of(r) == data_of(row)
        and len(r["client_nodes"]) == len(row["client_nodes"])
    ]


def fixed_reference(rows: list[dict], row: dict) -> dict | None:
    """The fixed-policy cell (kappa 256, p = 1) matching ``row`` (:func:`references`)."""
    return next(iter(references(rows, row, ("fixed",))), None)


def round_times(row: dict) -> list[float]:
    times = [c[1] for c in row["curve"]]
    return [b - a for a, b in zip([0.0] + times[:-1], times)]


def best_grid_at_work(grid: list[dict], block: list[dict]) -> list[float | None]:
    """Per episode of ``block``: the best accuracy any of the ``grid`` cells reached at that episode's work."""
    return (
        [
            max((a for a in (accuracy_at_work(g, e["gmacs"]) for g in grid) if a is not None), default=None)
            for e in block
        ]
        if grid
        else []
    )
