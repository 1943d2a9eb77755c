"""FedGraph's benchmark report (``reproductions/fedgraph/run.py``): the tables of a budget and split, built from the
stored cells' rows (:func:`tables`), their prose from ``reproductions/fedgraph/templates/``. The ablations
(heterogeneity, sharing, the fixed-policy grid) are ``ablations.py``, the learning budget's tables ``learning.py``; the
figures beside them ``figures.py``."""

from __future__ import annotations

import json
import statistics

import numpy as np

from reproductions._runner.common import ahead_level_behind, interval_text, t_interval, table  # noqa: E402
from reproductions.fedgraph.ablations import heterogeneity_table, policy_grid_table, sharing_figure, sharing_table  # noqa: E402
from reproductions.fedgraph.curves import (
    TARGET,
    TARGET_HIGH,
    accuracy_at_work,
    cumulative_work,
    data_of,  # noqa: E402
    last_episode,
    mean_std_pct,
    same_budget,
    spearman,
    split_of,
    time_summary,
    time_to,
    versus,
)
from reproductions.fedgraph.grid import (
    AGENT_VARIANTS,
    DATASETS,
    DDPG_VARIANTS,
    GRID_VARIANTS,
    LAYER_SIZES,  # noqa: E402
    VARIANTS,
)
from reproductions.fedgraph.learning import learning_section  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

WORK_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)  # of the work-rewarded agent's last episode, per seed


def layers_table(rows: list[dict]) -> str:
    body = []
    for d in DATASETS:
        cells = [r for r in rows if r["dataset"] == d]
        if cells:
            names = ["full"] + [f"fastgcn-{t}" for t in LAYER_SIZES]
            body.append(
                [d, len(cells), *[mean_std_pct([r["results"][n]["test_accuracy"] for r in cells]) for n in names]]
            )
    return table(["dataset", "seeds", "full batch acc %", *[f"FastGCN {t} acc %" for t in LAYER_SIZES]], body)


def summary(runs: list[dict]) -> str:
    """Means over seeds at variance 0.1 on the synthesis: one row per variant, five columns per dataset."""
    runs = [r for r in runs if r["var"] == 0.1 and data_of(r) == "synthesis"]
    datasets = [d for d in DATASETS if any(r["dataset"] == d for r in runs)]
    header = ["variant"]
    for d in datasets:
        header += [
            f"{d} acc %",
            f"{d} time to {TARGET:.0%} (s; reached)",
            f"{d} time to {TARGET_HIGH[d]:.0%} (s; reached)",
            f"{d} acc % at FedGraph's time",
            f"{d} MB moved",
        ]
    body = []
    for variant in VARIANTS:
        line = [variant]
        for d in datasets:
            cell = [r for r in runs if r["dataset"] == d and r["variant"] == variant]
            line += [
                mean_std_pct([r["final_accuracy"] for r in cell]),
                time_summary(cell) if cell else "-",
                time_summary(cell, TARGET_HIGH[d]) if cell else "-",
                mean_std_pct([same_budget(runs, r) for r in cell]),
                f"{statistics.mean(r['bytes'] for r in cell) / 1e6:.1f}" if cell else "-",
            ]
        if any(v != "-" for v in line[1:]):
            body.append(line)
    return table(header, body)


def work_table(runs: list[dict]) -> str:
    """Per variant (synthesis, variance 0.1): the slowest client's work and local training time per round, the
    cumulative work to the targets and the accuracy at the work the DDPG agent rewarded by work spent in its last
    episode; and how well work predicts the slowest client's time (Pearson r over the fixed policies' rounds)."""
    runs = [r for r in runs if r["var"] == 0.1 and data_of(r) == "synthesis" and cumulative_work(r["curve"])]
    body, notes = [], []
    for d in DATASETS:
        agent = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == "fedgraph-work"}
        pairs = []
        for variant in VARIANTS + GRID_VARIANTS:
            cells = [r for r in runs if r["dataset"] == d and r["variant"] == variant]
            if not cells:
                continue
            episodes = [last_episode(r) for r in cells]
            rounds = [c for ep in episodes for c in ep[1:] if c[5] is not None]
            clock = [b[1] - a[1] for ep in episodes for a, b in zip(ep[1:], ep[2:])]
            if variant not in AGENT_VARIANTS:
                pairs += [(c[4], c[5]) for c in rounds]
            budget = [
                accuracy_at_work(r, cumulative_work(last_episode(agent[r["seed"]]))[-1])
                for r in cells
                if r["seed"] in agent
            ]
            body.append(
                [
                    d,
                    variant,
                    len(cells),
                    f"{statistics.mean(c[4] for c in rounds):.4f}",
                    f"{statistics.mean(c[5] for c in rounds):.3f}",
                    f"{statistics.mean(clock):.3f}" if clock else "-",
                    *[time_summary(cells, t, by) for by in ("work", "client") for t in (TARGET, TARGET_HIGH[d])],
                    mean_std_pct(budget) if budget else "-",
                    mean_std_pct([r["final_accuracy"] for r in cells]),
                ]
            )
        if len(pairs) >= 3:
            x, y = np.asarray(pairs, dtype=float).T
            notes.append(f"{d}: r = {float(np.corrcoef(x, y)[0, 1]):.2f} over {len(pairs)} rounds")
    if not body:
        return ""
    return (
        render("fedgraph/work", correlations="; ".join(notes), critical_path=critical_path_note(runs))
        + "\n\n"
        + table(
            [
                "dataset",
                "variant",
                "seeds",
                "GMAC per round",
                "slowest client s per round",
                "run's clock s per round",
                f"GMAC to {TARGET:.0%} (reached)",
                "GMAC to 2nd target (reached)",
                f"slowest-client s to {TARGET:.0%} (reached)",
                "slowest-client s to 2nd target (reached)",
                "acc % at fedgraph-work's work",
                "final acc %",
            ],
            body,
        )
    )


def equal_work_table(runs: list[dict], fractions: tuple[float, ...] = WORK_FRACTIONS) -> str:
    """Accuracy at equal work (synthesis, variance 0.1): every variant's accuracy after the same cumulative work as
    fractions of the work-rewarded agent's last episode (per seed), and the agent's seed-paired difference to the
    fixed policy and GraphSAGE at each of them: "the agent beats a fixed policy at the same budget" at more than
    the one budget of its whole episode."""
    runs = [r for r in runs if r["var"] == 0.1 and data_of(r) == "synthesis" and cumulative_work(r["curve"])]
    body = []
    for d in DATASETS:
        agent = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == "fedgraph-work"}
        budgets = {s: [f * cumulative_work(last_episode(r))[-1] for f in fractions] for s, r in agent.items()}
        accs = {}
        for variant in VARIANTS:
            cells = {r["seed"]: r for r in runs if r["dataset"] == d and r["variant"] == variant and r["seed"] in agent}
            if not cells:
                continue
            accs[variant] = {s: [accuracy_at_work(r, b) for b in budgets[s]] for s, r in cells.items()}
            columns = list(zip(*accs[variant].values()))
            body.append(
                [
                    d,
                    variant,
                    len(cells),
                    *[
                        mean_std_pct(list(col))
                        + ("" if None not in col else f" ({sum(a is not None for a in col)}/{len(col)})")
                        for col in columns
                    ],
                ]
            )
        for base in ("fixed", "graphsage"):
            seeds = sorted(set(accs.get("fedgraph-work", {})) & set(accs.get(base, {})))
            if not seeds:
                continue
            cells = []
            for i in range(len(fractions)):
                pairs = [(accs["fedgraph-work"][s][i], accs[base][s][i]) for s in seeds]
                diffs = [100 * (a - b) for a, b in pairs if a is not None and b is not None]
                wins = [versus(a, b) for a, b in pairs]
                cells.append(
                    (f"{statistics.mean(diffs):+.1f}" if diffs else "-") + f" ({ahead_level_behind(wins, sep='/')})"
                )
            body.append([d, f"fedgraph-work - {base} (seed-paired, points)", len(seeds), *cells])
    if not body:
        return ""
    return (
        render("fedgraph/equal_work")
        + "\n\n"
        + table(
            [
                "dataset",
                "variant",
                "seeds",
                *[f"at {'all' if f == 1 else f'1/{round(1 / f)}'} of its work" for f in fractions],
            ],
            body,
        )
    )


def critical_path_note(runs: list[dict]) -> str:
    """Seed-paired differences of the agents' slowest-client seconds to the target against full batch and
    GraphSAGE (the issue's comparison, on the clock that dedicated machines would show)."""

    def by_seed(dataset: str, variant: str) -> dict[int, float]:
        times = {
            r["seed"]: time_to(r, by="client") for r in runs if r["dataset"] == dataset and r["variant"] == variant
        }
        return {seed: t for seed, t in times.items() if t is not None}

    parts = []
    for d in DATASETS:
        for agent in ("fedgraph", "fedgraph-work", "fedgraph-client"):
            mine = by_seed(d, agent)
            for base in ("full", "graphsage"):
                theirs = by_seed(d, base)
                diffs = [mine[k] - theirs[k] for k in sorted(mine) if k in theirs]
                if diffs:
                    interval = t_interval(diffs)
                    summary = (
                        ""
                        if interval is None
                        else f"; mean {statistics.mean(diffs):+.3f}, 95% interval {interval_text(interval, 3)}"
                    )
                    shown = [round(x, 3) + 0.0 for x in diffs]  # counted as printed: -0.0002 s is level, not ahead
                    level = sum(x == 0 for x in shown)
                    parts.append(
                        f"{d} {agent} - {base}: "
                        + ", ".join(f"{x:+.3f}" for x in shown)
                        + f" s ({sum(x < 0 for x in shown)} of {len(diffs)} seeds ahead"
                        + (f", {level} level" if level else "")
                        + f"{summary})"
                    )
    if not parts:
        return ""
    return render("fedgraph/critical_path", target=f"{TARGET:.0%}", pairs="; ".join(parts))


def cpu_note(runs: list[dict]) -> str:
    """A warning when the cells behind a table's seconds were measured on more than one CPU model (the CPU each
    cell records), naming which cells ran on which: seconds compare only within one CPU; work does not depend
    on it. '' when every cell ran on one model (or none recorded it)."""
    by_cpu: dict[str, dict[str, list[int]]] = {}
    for r in runs:
        group = (
            f"{r['dataset']} {r['variant']}"
            + ("" if r["var"] == 0.1 else f" var {r['var']}")
            + ("" if data_of(r) == "synthesis" else f" {data_of(r)}")
        )
        by_cpu.setdefault(r.get("cpu") or "not recorded", {}).setdefault(group, []).append(r["seed"])
    if len(by_cpu) < 2:
        return ""
    models = len(by_cpu) - ("not recorded" in by_cpu)
    cells = "; ".join(
        f"{cpu} ({sum(map(len, groups.values()))} cells): "
        + ", ".join(f"{g} (seeds {', '.join(map(str, sorted(seeds)))})" for g, seeds in groups.items())
        for cpu, groups in sorted(by_cpu.items())
    )
    return (
        render(
            "fedgraph/cpu_note",
            models=f"{models} CPU model" + ("s" if models > 1 else ""),
            unrecorded=", some on one they did not record" if "not recorded" in by_cpu else "",
            cells=cells,
        )
        + "\n"
    )


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def every_cell(runs: list[dict]) -> list[str]:
    """Every run cell of the split with its final accuracy, time to the target and bytes."""
    body = [
        [
            r["dataset"],
            data_of(r),
            f"{r['var']:g}",
            r["variant"],
            r["seed"],
            fmt(100 * r["final_accuracy"] if r["final_accuracy"] is not None else None),
            fmt(time_to(r), 2),
            fmt(last_episode(r)[-1][1]),
            f"{r['bytes'] / 1e6:.1f}",
            fmt(r.get("cross_fraction"), 2),
            r["stale"] or "",
        ]
        for r in runs
    ]
    columns = ["dataset", "data", "var", "variant", "seed", "final acc %", f"time to {TARGET:.0%} (s)"]
    columns += ["time of the curve (s)", "MB moved", "cross-client edge ends", "note"]
    return ["### Every cell\n", table(columns, body)]


def ddpg_returns(runs: list[dict]) -> list[str]:
    """The DDPG runs' return per episode and the last policies against the clients' sizes."""
    ddpg = [r for r in runs if r["variant"] in DDPG_VARIANTS and r["returns"]]
    if not ddpg:
        return []
    columns = ["dataset", "var", "variant", "seed", "returns (episode 1, 2, ...)", "client nodes"]
    columns += ["last policies (kappa, p)", "Spearman(size, kappa)"]
    body = [
        [
            r["dataset"],
            f"{r['var']:g}",
            r["variant"],
            r["seed"],
            ", ".join(f"{x:.2f}" for x in r["returns"]),
            r["client_nodes"],
            json.dumps([[k, [round(p, 2) for p in ps]] for k, ps in (r["last_policies"] or [])]),
            spearman(r["client_nodes"], [k for k, _ in r["last_policies"] or []]),
        ]
        for r in ddpg
    ]
    return [
        "\n### DDPG: return per episode\n",
        "Spearman: rank correlation between the clients' sizes and the kappa the agent gave them in the "
        "last round (ties broken by order).\n",
        table(columns, body),
    ]


def ablation_sections(rows: list[dict], runs: list[dict], grid: list[dict], layers: list[dict], budget, split):
    """Work, equal work, heterogeneity, sharing, the policy grid and FastGCN's layer size, where they have cells."""
    out = []
    work = work_table(runs + grid)
    if work:
        out += ["### Work instead of wall time (deterministic)\n", work, ""]
    equal = equal_work_table(runs)
    if equal:
        out += ["### The work-rewarded agent against fixed policies at equal work\n", equal, ""]
    if any(r["var"] != 0.1 for r in runs):
        second = ", ".join(f"{d} {t:.0%}" for d, t in TARGET_HIGH.items())
        out += [f"### Heterogeneity (paper Fig. 9's shape; 2nd target: {second})\n", heterogeneity_table(runs), ""]
    if any(data_of(r) != "synthesis" for r in runs):
        out += ["### Where sharing's gain comes from\n", sharing_table(runs), ""]
        if figure := sharing_figure(runs, f"fedgraph_sharing_{budget}_{split}.png"):
            out += [
                f"![The sharing gaps seed-paired: each seed, the mean, its 95% interval, the 95% range of one run "
                f"and the issue's target]({figure})",
                "",
            ]
    if grid:
        out += [
            "### Fixed policies across the agent's action range (what the agent could gain)\n",
            policy_grid_table(grid, rows),
            "",
        ]
    if layers:
        out += [
            f"### FastGCN against its layer size (client 0 alone, {layers[0]['rounds']} rounds, no sharing)\n",
            layers_table(layers),
            "",
        ]
    return out


def tables(rows: list[dict], budget: str, split: str) -> str:
    """The tables of one split from the stored cells' ``rows`` (the learning budget's: :func:`learning_section`)."""
    if budget == "learning":
        return learning_section(rows, split)

    def runs_of(variants) -> list[dict]:
        return [
            r
            for r in rows
            if r.get("budget") == budget
            and split_of(r) == split
            and r.get("kind") == "run"
            and r["variant"] in variants
        ]

    layers = [r for r in rows if r.get("kind") == "layers" and split_of(r) == split and budget == "default"]
    grid = runs_of(GRID_VARIANTS)
    runs = sorted(
        runs_of(VARIANTS), key=lambda r: (r["dataset"], data_of(r), r["var"], VARIANTS.index(r["variant"]), r["seed"])
    )
    if not runs:
        return ""
    labelled = {
        d: sorted(
            n
            for r in runs
            if r["dataset"] == d and r["var"] == 0.1 and data_of(r) == "synthesis"
            for n in r.get("labelled") or []
        )
        for d in DATASETS
    }
    labelled = ", ".join(f"{d} {ns[0]}-{ns[-1]}" for d, ns in labelled.items() if ns)
    out = [
        f"## Split `{split}`\n",
        (f"Labelled nodes per client (synthesis, variance 0.1): {labelled}.\n" if labelled else ""),
        render("fedgraph/split", target=f"{TARGET:.0%}") + "\n",
        *filter(None, [cpu_note(runs)]),
        "### Summary (variance 0.1)\n",
        summary(runs),
        "",
    ]
    out += ablation_sections(rows, runs, grid, layers, budget, split)
    out += every_cell(runs) + ddpg_returns(runs)
    return "\n".join(out)
