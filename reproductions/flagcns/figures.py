"""FL-AGCNS's figures (``run.py``), drawn from the stored cells' rows: the best fitness per generation
(:func:`plot`) and the final populations retrained (:func:`population_plot`); written to ``docs/results/``."""

from __future__ import annotations

from reproductions._runner.common import pyplot, save_figure
from reproductions.flagcns.grid import BUDGETS, COLLAPSE, DATASETS, FINALIST_VARIANTS, FITNESS_VARIANTS
from reproductions.flagcns.grid import STRUCTURE_VARIANTS


def plot(rows: list[dict], budget: str) -> str | None:
    plt = pyplot()

    if BUDGETS[budget].get("flagcns.fitness", "fll") == "accuracy":
        return None  # ranked by accuracy (code2021): its first member's FLL is no fitness curve (as FITNESS_VARIANTS)
    searches = [
        r
        for r in rows
        if r.get("kind") == "search"
        and r.get("budget") == budget
        and r.get("curve")
        and r["variant"] not in FITNESS_VARIANTS  # ranked by accuracy: their best member's FLL is no curve
        and r["variant"] not in FINALIST_VARIANTS  # the same search as feo's (only the choice differs)
        and r["variant"] not in STRUCTURE_VARIANTS
    ]  # a control, not one of the figure's searches
    if not searches:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, r in enumerate(
        sorted(searches, key=lambda r: (r.get("split", "per-class"), r["dataset"], r["variant"], r["seed"]))
    ):
        xs, ys = zip(*r["curve"])
        split = r.get("split", "per-class")
        ax.plot(
            xs,
            ys,
            label=f"{r['dataset']} {r['variant']} s{r['seed']} ({split})",
            color=plt.cm.tab20(i % 20),
            lw=1.2,
            ls="--" if split == "per-class" else "-",
        )
    ax.set_xlabel("epoch (generation)")
    ax.set_ylabel("best FLL in P_FL (lower is better)")
    ax.set_title(f"FL-AGCNS: best fitness per generation (budget {budget})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    name = f"flagcns_fitness{'' if budget == 'paper' else '_' + budget}.png"
    return save_figure(fig, name)


def population_plot(rows: list[dict], budget: str) -> str | None:
    """The final populations retrained (``population`` cells of ``budget``): each member's FLL (top) and SuperNet
    validation accuracy (bottom) against its retrained FLACC, a colour per seed, the seed's chosen code (its
    ``feo`` search's architecture) as a star; one column per dataset. None without population cells."""
    pops = [r for r in rows if r.get("kind") == "population" and r.get("budget") == budget]
    if not pops:
        return None
    plt = pyplot()
    present = [d for d in DATASETS if any(r["dataset"] == d for r in pops)]
    chosen = {
        (r["dataset"], r["seed"], r.get("split", "per-class")): list(r["architecture"])
        for r in rows
        if r.get("kind") == "search" and r.get("variant") == "feo" and r.get("budget") == budget
    }
    fig, axes = plt.subplots(2, len(present), figsize=(max(6.0, 4.6 * len(present)), 7.2), squeeze=False)
    for col, d in enumerate(present):
        for r in sorted((r for r in pops if r["dataset"] == d), key=lambda r: r["seed"]):
            color = plt.cm.tab10(r["seed"] % 10)
            pick = chosen.get((d, r["seed"], r.get("split", "per-class")))
            for row, (key, rho) in enumerate((("fll", "spearman_fll"), ("val_accuracy", "spearman_val_accuracy"))):
                ax = axes[row][col]
                members = [m for m in r["members"] if m.get(key) is not None]
                ax.scatter(
                    [m[key] for m in members],
                    [m["flacc"] for m in members],
                    s=14,
                    color=color,
                    alpha=0.7,
                    label=f"s{r['seed']}: rho {r[rho]:+.2f}" if r[rho] is not None else f"s{r['seed']}",
                )
                for m in members:
                    if pick is not None and list(m["architecture"]) == pick:
                        ax.scatter(m[key], m["flacc"], marker="*", s=160, color=color, edgecolors="black", zorder=3)
        for row, label in enumerate(
            ("FLL in the SuperNet (lower is better)", "SuperNet federated validation accuracy")
        ):
            ax = axes[row][col]
            ax.axhline(COLLAPSE[d], color="grey", lw=0.8, ls=":")
            ax.set_xlabel(label, fontsize=8)
            ax.set_ylabel("retrained FLACC %", fontsize=8)
            ax.set_title(f"{d}: final population (star: the chosen code)", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"FL-AGCNS (budget {budget}): the SuperNet's ranking against retrained accuracy", fontsize=10)
    return save_figure(fig, f"flagcns_population_{budget}.png")
