"""FedStar's figures (``run.py``), drawn from the stored cells' rows: Table 1 as a picture (:func:`plot_summary`) and
each setting's accuracy against the round (:func:`plot_settings`); written to ``docs/results/``."""

from __future__ import annotations

import statistics

from reproductions._runner.common import pyplot, save_figure  # noqa: E402
from reproductions.fedstar.grid import LABELS, SETTINGS, SPLIT_SEED, TABLE1  # noqa: E402
from reproductions.fedstar.report import PAPER, values  # noqa: E402


def plot_summary(rows: list[dict]) -> str | None:
    """Table 1 as a picture: per setting, each method's final mean client accuracy (bar: mean over seeds; black
    ticks: the seeds) with the paper's number (a white diamond): ``docs/results/fedstar_table1.png``."""
    plt = pyplot()

    rows = [r for r in rows if r.get("split_seed", SPLIT_SEED) == SPLIT_SEED]
    present = [s for s in SETTINGS if any(r["setting"] == s and r["structure"] == "dse+rwse" for r in rows)]
    if not present:
        return None
    width = 0.8 / len(TABLE1)
    fig, ax = plt.subplots(figsize=(2.6 * len(present) + 4.5, 4.8))
    for j, variant in enumerate(TABLE1):
        xs, means = [], []
        for i, setting in enumerate(present):
            accs = values(rows, setting, variant)
            x = i + (j - (len(TABLE1) - 1) / 2) * width
            if accs:
                xs.append(x)
                means.append(statistics.mean(accs))
                ax.plot([x] * len(accs), accs, "_", color="black", markersize=7)
            value = PAPER.get(variant, (None,) * 4)[SETTINGS.index(setting)]
            if value is not None:
                ax.plot(
                    x,
                    value,
                    "D",
                    color="white",
                    markeredgecolor="black",
                    markersize=5,
                    label="paper" if (i, j) == (0, 0) else None,
                )
        ax.bar(xs, means, width, label=LABELS[variant], color=plt.cm.tab10(j))
    ax.set_xticks(range(len(present)), present)
    low = min(a for s in present for v in TABLE1 for a in values(rows, s, v))
    ax.set_ylim(max(0, low - 8), 100)
    ax.set_ylabel("mean client test accuracy after round 200 (%)")
    ax.set_title("FedStar and baselines: bars ours (mean over seeds), ticks the seeds, diamonds the paper", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, "fedstar_table1.png")


def plot_settings(rows: list[dict]) -> list[str]:
    """Per setting, the mean client accuracy of Table 1's methods against the round (first seed that has at least
    two of them), drawn from the stored curves: ``docs/results/fedstar_<setting>_accuracy_vs_round.png``."""
    plt = pyplot()

    written = []
    rows = [r for r in rows if r.get("split_seed", SPLIT_SEED) == SPLIT_SEED]
    for setting in SETTINGS:
        seeds = sorted({r["seed"] for r in rows if r["setting"] == setting and r["structure"] == "dse+rwse"})
        for seed in seeds:
            have = [
                r
                for v in TABLE1
                for r in rows
                if (r["setting"], r["variant"], r["seed"], r["structure"]) == (setting, v, seed, "dse+rwse")
                and r.get("curve")
            ]
            if len(have) < 2:
                continue
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for r in have:
                xs, ys = zip(*r["curve"])
                ax.plot(xs, [100 * y for y in ys], marker=".", label=LABELS[r["variant"]])
            ax.set_xlabel("round")
            ax.set_ylabel("mean client test accuracy (%)")
            ax.set_title(f"{setting}, seed {seed}")
            ax.grid(alpha=0.3)
            ax.legend()
            name = save_figure(fig, f"fedstar_{setting.lower()}_accuracy_vs_round.png")
            written.append(f"{name} (seed {seed})")
            break
    return written
