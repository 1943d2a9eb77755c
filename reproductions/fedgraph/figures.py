"""FedGraph's benchmark figures (``reproductions/fedgraph/run.py``): accuracy against wall time and the clients'
critical path with the DDPG learning curve (:func:`plot`), and for the learning budget the returns, the work per episode
and the trained agent on Fig. 7's axes (:func:`plot_learning`); written to ``docs/results/``."""

from __future__ import annotations


import numpy as np

from reproductions._runner.common import pyplot, save_figure  # noqa: E402
from reproductions.fedgraph.curves import TARGET, TARGET_HIGH, along, data_of, episodes, split_of, time_to  # noqa: E402
from reproductions.fedgraph.grid import DATASETS, DDPG_VARIANTS, RELAPSE_TESTS, RELAPSE_VARIANTS, VARIANTS  # noqa: E402
from reproductions.fedgraph.learning import DELTA, FIG7_TARGET, LEARNING_BLOCK, TRAINED_CURVES, trained_curves  # noqa: E402


def plot(rows: list[dict], budget: str, split: str) -> str | None:
    plt = pyplot()

    every = rows
    rows = [
        r
        for r in rows
        if r.get("budget") == budget
        and split_of(r) == split
        and data_of(r) == "synthesis"
        and r.get("kind") == "run"
        and r["variant"] in VARIANTS
    ]
    if not rows:
        return None
    if budget == "learning":
        return plot_learning(rows, split, every)
    runs = [r for r in rows if r["var"] == 0.1 and r["seed"] == min(x["seed"] for x in rows)]
    if not runs:
        return None
    datasets = sorted({r["dataset"] for r in runs})
    fig, grid = plt.subplots(2, len(datasets) + 1, figsize=(5 * (len(datasets) + 1), 8), squeeze=False)
    axes = grid[0]
    clocks = (
        ("time", "wall time of the run (s)", "accuracy vs wall time"),
        ("client", "slowest client's training, summed (s)", "accuracy vs the clients' critical path"),
    )
    for row, (by, xlabel, title) in zip(grid, clocks):
        for ax, dataset in zip(row, datasets):
            for i, r in enumerate(
                sorted((r for r in runs if r["dataset"] == dataset), key=lambda r: VARIANTS.index(r["variant"]))
            ):
                points = [(x, acc) for x, acc in along(r, by) or [] if acc is not None]
                if points:
                    ax.plot(*zip(*points), label=r["variant"], color=plt.cm.tab10(i % 10))
            ax.axhline(TARGET, color="grey", lw=0.8, ls=":")
            reach = [
                t
                for r in runs
                if r["dataset"] == dataset
                for t in [time_to(r, TARGET_HIGH[dataset], by)]
                if t is not None
            ]
            if reach:  # the first rounds, where the variants differ (the rest is a plateau)
                ax.set_xlim(0, 3 * max(reach))
            ax.set_xlabel(xlabel)
            ax.set_ylabel("test accuracy")
            ax.set_title(f"{dataset}: {title}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    grid[1][-1].axis("off")
    fig.suptitle(f"budget {budget}, split {split}, seed {runs[0]['seed']}, variance 0.1", fontsize=10)
    ax = axes[-1]
    for r in runs:
        if r["variant"] in DDPG_VARIANTS and r["returns"]:
            ax.plot(range(1, len(r["returns"]) + 1), r["returns"], marker="o", label=f"{r['dataset']} {r['variant']}")
    ax.set_xlabel("episode")
    ax.set_ylabel("cumulative reward")
    ax.set_title("DDPG learning curve", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    name = f"fedgraph{'' if budget == 'paper' else '_' + budget}{'' if split == 'public' else '_' + split}.png"
    return save_figure(fig, name)


LEARNING_STYLES = {
    "fedgraph": "-",
    "fedgraph-work": "--",
    "fedgraph-client": ":",
    "fedgraph-work-lambda": "-.",
    "fedgraph-work-td3": "-",
    "fedgraph-work-floor": ":",
}


def run_color(plt, r: dict):
    """A colour per (dataset, seed): Cora's seeds 0-2 first, CiteSeer's after them."""
    return plt.cm.tab10((DATASETS.index(r["dataset"]) * 3 + r["seed"]) % 10)


def smooth(values: list[float]) -> tuple[int, np.ndarray]:
    """The running mean over LEARNING_BLOCK values (the values themselves under that many), and its window."""
    v = np.asarray(values, dtype=float)
    if len(v) < LEARNING_BLOCK:
        return 1, v
    return LEARNING_BLOCK, np.convolve(v, np.ones(LEARNING_BLOCK) / LEARNING_BLOCK, mode="valid")


def work_panel(plt, ax, which: list[dict], title: str) -> None:
    """The slowest client's work per episode (running mean) of each run in ``which``."""
    for r in which:
        eps = [e for e in episodes(r) if e["gmacs"] is not None]
        if not eps:
            continue
        k, mean = smooth([e["gmacs"] for e in eps])
        ax.plot(
            [e["episode"] for e in eps][k - 1 :],
            mean,
            color=run_color(plt, r),
            ls=LEARNING_STYLES[r["variant"]],
            label=f"{r['dataset']} {r['variant']} seed {r['seed']}",
        )
    ax.set_title(title, fontsize=8)
    ax.set_ylabel("GMAC per episode")


def return_panels(plt, axes, variants: list[str], runs: list[dict]) -> None:
    """One panel per variant: each seed's return per episode and its running mean."""
    for ax, variant in zip(axes, variants):
        for r in (r for r in runs if r["variant"] == variant):
            eps = episodes(r)
            x = [e["episode"] for e in eps]
            color = run_color(plt, r)
            ax.plot(x, [e["return"] for e in eps], color=color, alpha=0.25, lw=0.8)
            k, mean = smooth([e["return"] for e in eps])
            ax.plot(x[k - 1 :], mean, color=color, label=f"{r['dataset']} seed {r['seed']}")
        ax.set_title(f"return per episode, delta = {DELTA[variant]}", fontsize=8)
        ax.set_ylabel("return (eq. 9 summed over the episode)")


def trained_panels(plt, axes, trained: dict) -> None:
    """Per dataset, Fig. 7's shape for the trained agents: accuracy against the slowest client's work."""
    for ax, (d, curves) in zip(axes, trained.items()):
        for i, (v, (work, acc)) in enumerate(curves.items()):
            ax.plot(work, [100 * a for a in acc], marker="o", ms=3, color=plt.cm.tab10(i), label=TRAINED_CURVES[v])
        ax.axhline(100 * FIG7_TARGET[d], color="grey", ls=":", lw=1)
        ax.set_title(
            f"{d}: trained agents (last {LEARNING_BLOCK} episodes) against fixed schemes, mean over seeds", fontsize=8
        )
        ax.set_xlabel("slowest client's work, cumulative (GMAC)")
        ax.set_ylabel("test accuracy %")


def plot_learning(rows: list[dict], split: str, every: list[dict] | None = None) -> str | None:
    """One panel per measure of eq. 9's round time: the return per episode (running mean over LEARNING_BLOCK
    episodes) of every seed; a panel with the slowest client's work per episode (the same unit for every agent);
    and per dataset Fig. 7's shape for the trained agent, accuracy against work (:func:`trained_curves`)."""
    plt = pyplot()

    runs = [r for r in rows if r["variant"] in DDPG_VARIANTS and r["returns"]]
    if not runs:
        return None
    variants = [v for v in DDPG_VARIANTS if any(r["variant"] == v for r in runs)]
    relapse = [r for r in runs if r["variant"] in RELAPSE_TESTS]  # the relapse tests, if run
    trained = {d: trained_curves(every or rows, runs, d) for d in DATASETS}
    trained = {d: c for d, c in trained.items() if c}
    panels = len(variants) + 1 + bool(relapse) + len(trained)
    cols = min(panels, 4)
    rows_ = -(-panels // cols)
    fig, grid = plt.subplots(rows_, cols, figsize=(4.6 * cols, 4 * rows_), squeeze=False)
    axes = list(grid.reshape(-1))
    for ax in axes[panels:]:
        ax.set_visible(False)
    axes = axes[:panels]
    return_panels(plt, axes, variants, runs)
    work_panel(
        plt,
        axes[len(variants)],
        [r for r in runs if r["variant"] not in RELAPSE_TESTS],
        f"slowest client's work per episode (running mean over {LEARNING_BLOCK})",
    )
    if relapse:
        work_panel(
            plt,
            axes[len(variants) + 1],
            [
                r
                for r in runs
                if r["variant"] in RELAPSE_VARIANTS
                and any(q["dataset"] == r["dataset"] and q["seed"] == r["seed"] for q in relapse)
            ],
            "relapse tests: DDPG (--), TD3 (-), noise >= 0.1 (:); work per episode",
        )
    for ax in axes[: panels - len(trained)]:
        ax.set_xlabel("episode")
    trained_panels(plt, axes[panels - len(trained) :], trained)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    name = f"fedgraph_learning_{split}.png"
    return save_figure(fig, name)
