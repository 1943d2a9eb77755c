"""FedGraph's ablation tables (``reproductions/fedgraph/run.py``, through ``fedgraph_report.tables``): heterogeneity
(Fig. 9's shape), sharing (FedGraph against nonShare and allShare, with its seed-paired figure) and the grid of fixed
policies; their prose from ``reproductions/fedgraph/templates/``."""

from __future__ import annotations

import statistics

from reproductions._runner.common import interval_text, paired_figure, t_interval, table  # noqa: E402
from reproductions.fedgraph.curves import (  # noqa: E402
    TARGET,
    TARGET_HIGH,
    data_of,
    last_episode,
    mean_std_pct,
    round_times,
    split_of,
    time_summary,
)
from reproductions.fedgraph.grid import DATASETS, GRID_VARIANTS, SHARING_VARIANTS, VARS  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402


def heterogeneity_table(runs: list[dict]) -> str:
    """Paper Fig. 9's shape: time to the target at each variance of xi, FedGraph against full batch, on the run's
    clock (the paper's measure; it depends on the machine and its load) and in work (GMAC, deterministic)."""
    body = []
    for d in DATASETS:
        for var in VARS:
            cells = {
                v: [
                    r
                    for r in runs
                    if r["dataset"] == d and r["var"] == var and data_of(r) == "synthesis" and r["variant"] == v
                ]
                for v in ("fedgraph", "full")
            }
            if not any(cells.values()):
                continue
            ratios = [min(r["client_nodes"]) / max(r["client_nodes"]) for r in cells["fedgraph"] + cells["full"]]
            body.append(
                [
                    d,
                    f"{var:g}",
                    f"{statistics.mean(ratios):.2f}" if ratios else "-",
                    *[time_summary(cells[v]) for v in ("fedgraph", "full")],
                    *[time_summary(cells[v], TARGET_HIGH[d]) for v in ("fedgraph", "full")],
                    *[time_summary(cells[v], by="work") for v in ("fedgraph", "full")],
                    *[time_summary(cells[v], TARGET_HIGH[d], by="work") for v in ("fedgraph", "full")],
                    *[mean_std_pct([r["final_accuracy"] for r in cells[v]]) for v in ("fedgraph", "full")],
                ]
            )
    return table(
        [
            "dataset",
            "var",
            "smallest/largest client",
            f"FedGraph time to {TARGET:.0%}",
            f"full time to {TARGET:.0%}",
            "FedGraph time to 2nd target",
            "full time to 2nd target",
            f"FedGraph GMAC to {TARGET:.0%}",
            f"full GMAC to {TARGET:.0%}",
            "FedGraph GMAC to 2nd target",
            "full GMAC to 2nd target",
            "FedGraph acc %",
            "full acc %",
        ],
        body,
    )


def sharing_table(runs: list[dict]) -> str:
    """FedGraph (fixed policy), nonShare and allShare on the synthesis and on a disjoint random partition."""
    body = []
    for d in DATASETS:
        for data in ("synthesis", "random"):
            cells = [
                r
                for r in runs
                if r["dataset"] == d and data_of(r) == data and r["var"] == 0.1 and r["variant"] in SHARING_VARIANTS
            ]
            if not cells:
                continue
            fractions = [r["cross_fraction"] for r in cells if r.get("cross_fraction") is not None]
            acc = {v: [r["final_accuracy"] for r in cells if r["variant"] == v] for v in SHARING_VARIANTS}
            gap = sharing_gap(cells, "nonshare")
            interval = t_interval([100 * g for g in gap])  # points
            body.append(
                [
                    d,
                    data,
                    f"{statistics.mean(fractions):.2f}" if fractions else "-",
                    *[mean_std_pct(acc[v]) for v in SHARING_VARIANTS],
                    mean_std_pct(gap) if gap else "-",
                    interval_text(interval),
                    *[time_summary([r for r in cells if r["variant"] == v]) for v in SHARING_VARIANTS],
                ]
            )
    return table(
        [
            "dataset",
            "clients' data",
            "cross-client edge ends",
            "FedGraph (fixed) acc %",
            "nonShare acc %",
            "allShare acc %",
            "FedGraph - nonShare (points, seed-paired)",
            "95% interval of the mean",
            f"FedGraph time to {TARGET:.0%}",
            f"nonShare time to {TARGET:.0%}",
            f"allShare time to {TARGET:.0%}",
        ],
        body,
    )


def sharing_gap(cells: list[dict], other: str) -> list[float]:
    """FedGraph (fixed policy) minus ``other``'s final accuracy, seed by seed (in seed order), over the seeds of
    ``cells`` (one dataset and clients' data) that have both."""
    acc = {v: {r["seed"]: r["final_accuracy"] for r in cells if r["variant"] == v} for v in ("fixed", other)}
    return [acc["fixed"][k] - acc[other][k] for k in sorted(set(acc["fixed"]) & set(acc[other]))]


def sharing_figure(runs: list[dict], name: str) -> str | None:
    """The sharing gaps seed by seed (:func:`common.paired_figure`): FedGraph (fixed policy) minus nonShare and
    minus allShare, per dataset and clients' data, in points, against the issue's 5 points over nonShare."""
    rows = []
    for d in DATASETS:
        for data in ("synthesis", "random"):
            cells = [r for r in runs if r["dataset"] == d and data_of(r) == data and r["var"] == 0.1]
            where = "synthesis" if data == "synthesis" else "cut partition"
            for other, label in (("nonshare", "nonShare"), ("allshare", "allShare")):
                if gap := sharing_gap(cells, other):
                    rows.append((f"{d}, {where}: FedGraph - {label}", [100 * g for g in gap], None))
    return paired_figure(
        rows,
        name,
        "FedGraph (fixed policy) - other (points of test accuracy)",
        "Where sharing's gain comes from, seed-paired",
        target=("issue: +5 over nonShare", 5.0),
    )


def policy_grid_table(grid: list[dict], rows: list[dict]) -> str:
    """Per dataset and fixed policy: seconds per round (rounds 2.., mean over seeds), accuracy after 10 rounds (an
    episode of the default budget) and after the last, time to the target; the DDPG agent's rows of the same
    budget for comparison."""
    body = []
    for dataset in DATASETS:
        for variant in GRID_VARIANTS + ("fedgraph",):
            cells = [
                r
                for r in (grid if variant != "fedgraph" else rows)
                if r.get("kind") == "run"
                and r["dataset"] == dataset
                and r["variant"] == variant
                and r["budget"] == grid[0]["budget"]
                and split_of(r) == split_of(grid[0])
                and r["var"] == 0.1
                and data_of(r) == "synthesis"
            ]
            if not cells:
                continue
            per_round = [statistics.mean(round_times(r)[1:]) for r in cells]
            label = (
                "DDPG agent (last episode)"
                if variant == "fedgraph"
                else "kappa {}, p {}".format(*variant.removeprefix("fixed-k").split("-p"))
            )
            curves = [last_episode(r) for r in cells]
            body.append(
                [
                    dataset,
                    label,
                    len(cells),
                    f"{statistics.mean(per_round):.3f}",
                    mean_std_pct([next((c[2] for c in cv if c[0] - cv[0][0] + 1 == 10), None) for cv in curves]),
                    mean_std_pct([r["final_accuracy"] for r in cells]),
                    time_summary(cells),
                ]
            )
    return (
        render("fedgraph/policy_grid")
        + "\n\n"
        + table(
            [
                "dataset",
                "policy",
                "seeds",
                "s per round",
                "acc % after 10 rounds",
                "final acc %",
                f"time to {TARGET:.0%} (s; reached)",
            ],
            body,
        )
    )
