"""ASFGNN's figures (``run.py``): Fig. 3's shape over alpha (:func:`plot_alpha`), Table 3's tuning over trials
(:func:`plot_traces`) and Table 7's race of the tuners (:func:`plot_search`); written to ``docs/results/``."""

from __future__ import annotations


from reproductions.asfgnn.grid import LABELS, LANES, PAPER3, PAPER6  # noqa: E402
from reproductions._runner.common import pyplot, save_figure  # noqa: E402


# one colour per method in every figure; the legend order of plot_traces
COLOURS = {"cm": "C4", "fl": "C2", "sp": "C3", "sfgnn-nojs": "C1", "sfgnn": "C0"}


def plot_alpha(curves: dict[str, list[tuple[float, float, float, int]]], budget: str) -> str | None:
    """Paper Fig. 3's shape: mean client test accuracy over alpha (mean ± std over seeds) for SFGNN with and
    without JS, FL and SP, the paper's Table 6 as open markers; beside it JS minus no JS, seed-paired, against the
    paper's improvement. None (no figure) where our cells cover fewer than two alphas."""
    if len({a for m in ("sfgnn", "sfgnn-nojs", "fl", "sp") for a, *_ in curves.get(m, [])}) < 2:
        return None  # a curve needs two alphas at least (the paper budget's cells are alpha 1 only)
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    for m in ("sfgnn", "sfgnn-nojs", "fl", "sp"):
        if m in curves:
            a, mean, std, _ = zip(*curves[m])
            left.errorbar(a, mean, yerr=std, marker="o", ms=4, capsize=3, color=COLOURS[m], label=LABELS[m])
    paper = sorted(PAPER6)
    left.plot(
        paper, [PAPER6[a][1] for a in paper], "o--", mfc="none", color=COLOURS["sfgnn"], lw=0.8, label="paper: SFGNN"
    )
    left.plot(
        paper,
        [PAPER6[a][0] for a in paper],
        "s--",
        mfc="none",
        color=COLOURS["sfgnn-nojs"],
        lw=0.8,
        label="paper: without JS",
    )
    left.set_xlabel("alpha (share of a client's own label part)")
    left.set_ylabel("mean client test accuracy")
    left.legend(fontsize=7)
    left.grid(alpha=0.3)
    right.axhline(0.0, color="grey", lw=0.8)
    if "js-diff" in curves:
        a, mean, std, n = zip(*curves["js-diff"])
        seeds = f"{min(n)}-{max(n)}" if max(n) > min(n) else f"{min(n)}"
        right.errorbar(
            a,
            [100 * v for v in mean],
            yerr=[100 * v for v in std],
            marker="o",
            ms=4,
            capsize=3,
            color=COLOURS["sfgnn"],
            label=f"ours, seed-paired ({seeds} seeds)",
        )
    right.plot(
        paper,
        [100 * (PAPER6[a][1] - PAPER6[a][0]) for a in paper],
        "o--",
        mfc="none",
        color="black",
        lw=0.8,
        label="paper (one run each)",
    )
    right.set_xlabel("alpha")
    right.set_ylabel("with JS - without JS (points)")
    right.legend(fontsize=7)
    right.grid(alpha=0.3)
    fig.suptitle(
        f"ASFGNN on Cora over alpha (Fig. 3 / Table 6 shape, budget {budget}); bars: std over seeds", fontsize=10
    )
    return save_figure(fig, f"asfgnn_alpha_{budget}.png")


def plot_traces(traces: dict[str, dict[str, tuple[list[float], list[float], int]]], budget: str) -> str | None:
    """Table 3's tuning over trials, one panel per dataset: per method, the best mean client validation accuracy
    so far (solid) and the test accuracy of the trial holding it (dashed), means over seeds (:func:`mean_trace`);
    the paper's number dotted. None where no method ran two trials."""
    if not any(len(v) > 1 for per in traces.values() for v, _, _ in per.values()):
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(traces), figsize=(1.8 + max(5.0, 4.6 * len(traces)), 4.0), squeeze=False)
    shown: dict[str, object] = {}
    for ax, (dataset, per) in zip(axes[0], traces.items()):
        for m, (val, test, _) in per.items():
            x = range(1, len(val) + 1)
            shown[m] = ax.plot(x, val, color=COLOURS[m], lw=1.2)[0]
            ax.plot(x, test, color=COLOURS[m], lw=1.2, ls="--")
            if m in PAPER3[dataset]:
                ax.axhline(PAPER3[dataset][m], color=COLOURS[m], lw=0.8, ls=":")
        counts = sorted({n for _, _, n in per.values()})
        seeds = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        ax.set_title(f"{dataset} ({seeds} seed{'s' * (counts[-1] > 1)})", fontsize=9)
        ax.set_xlabel("trial")
        ax.grid(alpha=0.3)
        lows = [min(v[len(v) // 10 :] + t[len(t) // 10 :]) for v, t, _ in per.values()]  # past the first tenth
        ax.set_ylim(
            min(lows + [PAPER3[dataset][m] for m in per if m in PAPER3[dataset]]) - 0.01,
            max(max(v) for v, _, _ in per.values()) + 0.01,
        )
    axes[0][0].set_ylabel("mean client accuracy")
    order = [m for m in COLOURS if m in shown]
    axes[0][-1].legend(
        [shown[m] for m in order],
        [LABELS[m] for m in order],
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=7,
        frameon=False,
    )  # beside the last panel
    fig.suptitle(
        f"ASFGNN tuning at alpha 1 (Table 3, budget {budget}): the incumbent after each trial, mean over "
        "seeds\nsolid: best validation accuracy so far; dashed: its trial's test accuracy; dotted: the "
        "paper's test accuracy",
        fontsize=8,
    )
    return save_figure(fig, f"asfgnn_trace_{budget}.png")


def plot_search(
    searches: dict[str, list[dict]], seeds: list[int], targets: dict[int, float], budget: str
) -> str | None:
    """Best validation accuracy so far against trials, one panel per seed, one line per driver; the dashed line is
    the seed's target (0.5 points under the best any driver reached)."""
    shown = [s for s in seeds if s in targets]
    if not shown:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, len(shown), figsize=(3.6 * len(shown), 3.4), sharey=True, squeeze=False)
    for ax, seed in zip(axes[0], shown):
        for d in searches:
            c = next((c for c in searches[d] if c["seed"] == seed), None)
            if c is None:
                continue
            vals = [t["best_val"] for t in sorted(c["trials"], key=lambda t: t["trial"])]
            best = [max(vals[: k + 1]) for k in range(len(vals))]
            ax.step(range(1, len(best) + 1), best, where="post", label=d, color=plt.cm.tab10(LANES.index(d)))
        ax.axhline(targets[seed], ls="--", color="grey", lw=0.8)
        ax.set_title(f"seed {seed}", fontsize=9)
        ax.set_xlabel("trial")
        ax.grid(alpha=0.3)
    # the race is decided within a few points of the target: early trials far below it would flatten the curves
    axes[0][0].set_ylim(min(targets[s] for s in shown) - 0.05, max(targets[s] for s in shown) + 0.015)
    axes[0][0].set_ylabel("best mean client val. accuracy so far")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"ASFGNN tuning on Cora (SFGNN, budget {budget})", fontsize=10)
    return save_figure(fig, f"asfgnn_search_{budget}.png")
