"""FL-AGCNS's report (``run.py``): the results file's body (:func:`results`) from the stored cells' rows: per split
Table 3 with the architectures found, the summary of the retrainings, the seed-paired targets and issue 72's
acceptance (:func:`table3`), the controls (``controls.py``) and Table 5 (:func:`table5`); the speed in Flower's
simulation and the cells from older code (:func:`speed_and_stale`); the figures are ``figures.py``'s. Their prose
is in ``templates/``."""

from __future__ import annotations

import statistics

from reproductions._runner.common import (  # noqa: E402
    ahead_level_behind,
    interval_text,
    paired_figure,
    t_interval,
    table,
)
from reproductions.flagcns.controls import controls, fmt, genes, output, paper_cell  # noqa: E402
from reproductions.flagcns.figures import plot, population_plot  # noqa: E402
from reproductions.flagcns.grid import (  # noqa: E402
    ACCEPTANCE,
    COLLAPSE,
    collapse_label,
    DATASETS,
    FINALISTS,
    FITNESS_VARIANTS,
    LABELS,
    PAPER3,
    PAPER5,
    PRE_FINALISTS,
    PUBLISHED,
    SEED_DRAWS,
    SPLIT_LABELS,
    TABLE3_ROWS,
    VARIANTS,
)
from reproductions._runner.prose import render  # noqa: E402


def best_of_retrainings(of, present: list[str]) -> str | None:
    """The Table 3 rows summarised two ways, each cell's mean and best retraining, beside the paper's single value
    (why: the table's own text)."""
    specs = (
        TABLE3_ROWS[:1]
        + [
            (
                f"FL-AGCNS, {FINALISTS} finalists (not the paper's rule)",
                "search",
                {"variant": "feo-finalists"},
                "FL-AGCNS",
            )
        ]
        + TABLE3_ROWS[1:2]
    )
    specs += [
        (f"authors' published code ({key}, fusion `all`)", "published", {"published": key, "fusion": "all"}, "FL-AGCNS")
        for key in dict.fromkeys(key for _, key in PUBLISHED)
    ]
    specs += TABLE3_ROWS[2:]
    body = []
    for label, kind, match, paper_key in specs:
        if not any(of(kind, d, **match) for d in present):
            continue
        line = [label]
        for d in present:
            cells = [c for c in of(kind, d, **match) if c.get("retrains")]
            mark = " †" if any(c.get("stale") for c in cells) else ""
            line += [
                fmt([statistics.mean(c["retrains"]) for c in cells]) + mark,
                fmt([max(c["retrains"]) for c in cells]) + mark,
                paper_cell(PAPER3.get(d, {}).get(paper_key, (None,))[0], 1),
            ]
        body.append(line)
    if not body:
        return None
    header = ["architecture / method"]
    for d in present:
        header += [f"{d}: mean of retrainings", "best of retrainings", "paper"]
    return "\n" + render("flagcns/best_of_retrainings") + "\n\n" + table(header, body)


def paired_targets(of, present: list[str], figure: str = "", split: str = "per-class") -> str | None:
    """The issue's targets seed by seed: the searched architecture's FLACC minus FL-Random's and each fixed row's,
    over the seeds that have both (a seed is one split and METIS partition, shared by every row), with the 95%
    t-interval of the mean difference; given ``figure`` (a file name stem), also one forest plot per dataset."""
    searched = [
        ("FL-AGCNS", {"variant": "feo"}),
        (f"FL-AGCNS, {FINALISTS} finalists (not the paper's rule)", {"variant": "feo-finalists"}),
    ]
    body, forests = [], {}
    for d in present:
        paper = PAPER3.get(d, {})
        for label, match in searched:
            mine = {c["seed"]: c for c in of("search", d, **match)}
            if not mine:
                continue
            for other_label, kind, other_match, key in TABLE3_ROWS[1:]:
                theirs = {c["seed"]: c for c in of(kind, d, **other_match)}
                both = sorted(set(mine) & set(theirs))
                if not both:
                    continue
                diff = [mine[k]["flacc"] - theirs[k]["flacc"] for k in both]
                interval = t_interval(diff)
                mark = " †" if any(mine[k].get("stale") or theirs[k].get("stale") for k in both) else ""
                spread = f" ± {statistics.stdev(diff):.1f}" if len(diff) > 1 else ""
                ours, their_paper = paper.get("FL-AGCNS", (None,))[0], paper.get(key, (None,))[0]
                body.append(
                    [
                        d,
                        label,
                        other_label,
                        f"{len(both)} ({', '.join(map(str, both))})",
                        f"{statistics.mean(diff):+.1f}{spread}{mark}",
                        ahead_level_behind(diff),
                        interval_text(interval),
                        "-" if ours is None or their_paper is None else f"{ours - their_paper:+.1f}",
                    ]
                )
                short = "FL-AGCNS" if match["variant"] == "feo" else f"{FINALISTS} finalists"
                forests.setdefault(d, []).append(
                    (
                        f"{short} - {other_label}{mark}",
                        diff,
                        None if ours is None or their_paper is None else ours - their_paper,
                    )
                )
    if not body:
        return None
    pictures = [
        (d, name)
        for d, rows in forests.items()
        if figure
        and (
            name := paired_figure(
                rows, f"{figure}_{d}.png", "searched - other (FLACC points)", f"{d}: the targets, seed-paired"
            )
        )
    ]
    return (
        "\n"
        + render("flagcns/paired_targets", seed_draws=SEED_DRAWS[split])
        + "\n\n"
        + table(
            [
                "dataset",
                "searched",
                "against",
                "seeds",
                "searched - other",
                "ahead / level / behind",
                "95% interval of the mean",
                "paper",
            ],
            body,
        )
        + "".join(
            f"\n\n![{d}: the targets seed-paired: each seed, the mean, its 95% interval, the 95% range "
            f"of one run and the paper's difference]({name})"
            for d, name in pictures
        )
    )


def acceptance(of, present: list[str]) -> str | None:
    """Issue 72's acceptance summary of the ``feo`` search cells: mean FLACC against the target and the paper, on
    how many seeds FL-AGCNS >= FL-Random (same seed), how many retrainings of the chosen codes fall under
    :data:`COLLAPSE`, and the Spearman correlation of FLL (and of the SuperNet's validation accuracy) with retrained
    FLACC over each seed's final population (``population`` cells)."""
    body = []
    for d in present:
        feo = {c["seed"]: c for c in of("search", d, variant="feo")}
        if not feo:
            continue
        seeds = sorted(feo)
        mean = statistics.mean(feo[k]["flacc"] for k in seeds)
        random_cells = {c["seed"]: c for c in of("random", d)}
        both = [k for k in seeds if k in random_cells]
        ahead = sum(feo[k]["flacc"] >= random_cells[k]["flacc"] for k in both)
        retrains = [a for k in seeds for a in feo[k].get("retrains", [])]
        line = COLLAPSE[d]
        low = [k for k in seeds if any(a < line for a in feo[k].get("retrains", []))]
        pops = {c["seed"]: c for c in of("population", d)}
        rho = [pops[k]["spearman_fll"] for k in seeds if k in pops and pops[k].get("spearman_fll") is not None]
        rho_acc = [
            pops[k]["spearman_val_accuracy"]
            for k in seeds
            if k in pops and pops[k].get("spearman_val_accuracy") is not None
        ]
        target = ACCEPTANCE.get(d)
        mark = " †" if any(c.get("stale") for c in feo.values()) else ""
        body.append(
            [
                d,
                f"{len(seeds)} ({', '.join(map(str, seeds))})",
                fmt([feo[k]["flacc"] for k in seeds]) + mark,
                "-" if target is None else f">= {target}: {'met' if mean >= target else 'not met'}",
                paper_cell(PAPER3.get(d, {}).get("FL-AGCNS", (None,))[0], 1),
                f"{ahead} of {len(both)}" if both else "-",
                f"{sum(a < line for a in retrains)} of {len(retrains)}"
                + (f" (seeds {', '.join(map(str, low))})" if low else ""),
                ", ".join(f"s{feo[k]['seed']}: {output(feo[k])}" for k in seeds),
                (fmt(rho, 2) + f" ({len(rho)} seed{'s' * (len(rho) > 1)})") if rho else "-",
                (fmt(rho_acc, 2) + f" ({len(rho_acc)} seed{'s' * (len(rho_acc) > 1)})") if rho_acc else "-",
            ]
        )
    if not body:
        return None
    return (
        "\n"
        + render("flagcns/acceptance")
        + "\n\n"
        + table(
            [
                "dataset",
                "seeds",
                "FLACC %",
                "target",
                "paper",
                "FL-AGCNS >= FL-Random",
                f"retrainings under the collapse line ({collapse_label()})",
                "output genes",
                "Spearman FLL vs FLACC",
                "Spearman SuperNet val acc vs FLACC",
            ],
            body,
        )
    )


def table3(of, rows: list[dict], present: list[str], budget: str, split: str) -> list[str]:
    """Table 3 of one split (``rows``: its cells, ``of(kind, dataset, **match)``: those of a kind) and what goes
    with it: the architectures found, the mean or the best of the retrainings, the seed-paired targets, the
    acceptance."""
    if not present:
        return []
    out: list[str] = []
    header = ["architecture / method"]
    for d in present:
        header += [f"{d}: FLACC % (ours \\| paper)", "params M (ours \\| paper)", "inference s (ours \\| paper)"]
    body = []
    for label, kind, match, key in TABLE3_ROWS:
        if kind == "reference" and not any(of(kind, d, **match) for d in present):
            continue
        line = [label]
        for d in present:
            cells = of(kind, d, **match)
            paper = PAPER3.get(d, {}).get(key, (None, None, None))
            mark = " †" if any(c.get("stale") for c in cells) else ""
            line += [
                f"{fmt([c['flacc'] for c in cells])}{mark} \\| {paper_cell(paper[0], 1)}",
                f"{fmt([c['parameters'] / 1e6 for c in cells], 3)} \\| {paper_cell(paper[1], 3)}",
                f"{fmt([c['inference_s'] for c in cells], 4)} \\| {paper_cell(paper[2], 4)}",
            ]
        body.append(line)
    seeds = sorted({r["seed"] for r in rows if r.get("budget") == budget and "seed" in r})  # speed: no seed
    out += [
        render(
            "flagcns/table3",
            budget=budget,
            split=split,
            split_label=SPLIT_LABELS[split],
            seeds=seeds,
            seed_draws=SEED_DRAWS[split],
        )
        + "\n",
        table(header, body),
    ]
    searched = []
    for d in present:
        for r in of("search", d, variant="feo") + of("random", d):
            searched.append(
                [
                    d,
                    LABELS["random"] if r["kind"] == "random" else "FL-AGCNS",
                    r["seed"],
                    f"`{r['describe']}`",
                    f"{r['flacc']:.1f} ± {r['flacc_std']:.1f}",
                    r.get("tried", "-"),
                    f"{r.get('fll', float('nan')):.3f}" if r.get("fll") is not None else "-",
                    f"{r['search_s'] / 60:.1f}"
                    if r.get("search_s")
                    else f"{r['used_s'] / 60:.1f}"
                    if r.get("used_s")
                    else "-",
                ]
            )
    if searched:
        out += [
            "\n" + render("flagcns/found") + "\n",
            table(["dataset", "method", "seed", "architecture", "FLACC %", "tried", "FLL", "search min"], searched),
        ]
    best = best_of_retrainings(of, present)
    if best:
        out += [best]
    if targets := paired_targets(of, present, f"flagcns_paired_{budget}_{split}", split):
        out += [targets]
    if accepted := acceptance(of, present):
        out += [accepted]
    return out


def table5(of, split: str) -> list[str]:
    """Table 5: the ablations on Cora."""
    abl = [v for v in VARIANTS + tuple(FITNESS_VARIANTS) if of("search", "Cora", variant=v)]
    if not abl:
        return []
    body = []
    for v in abl:
        cells = sorted(of("search", "Cora", variant=v), key=lambda r: r["seed"])
        paper = PAPER5[FITNESS_VARIANTS.get(v, (v,))[0]]
        body.append(
            [
                LABELS[v],
                fmt([c["flacc"] for c in cells]),
                paper_cell(paper[0], 1),
                ", ".join(f"s{c['seed']}: {c['flacc']:.1f} ({genes(c)})" for c in cells),
                fmt([c["parameters"] / 1e6 for c in cells], 3),
                paper_cell(paper[1], 3),
                fmt([c["inference_s"] for c in cells], 4),
                paper_cell(paper[2], 4),
            ]
        )
    return [
        "\n" + render("flagcns/table5", split=split) + "\n",
        table(
            [
                "variant",
                "FLACC % ours",
                "paper",
                "per seed: FLACC % (input, output genes)",
                "params M ours",
                "paper",
                "inference s ours",
                "paper",
            ],
            body,
        ),
    ]


def lookup(rows: list[dict], **fixed):
    """The tables' cell finder over ``rows``: ``of(kind, dataset, **match)`` is every row of that kind and dataset whose
    keys equal ``match`` and ``fixed`` (a key a row lacks matches None only)."""

    def of(kind: str, dataset: str, **match) -> list[dict]:
        want = {**fixed, **match, "kind": kind, "dataset": dataset}
        return [r for r in rows if all(r.get(k) == v for k, v in want.items())]

    return of


def tables(rows: list[dict], budget: str, split: str) -> str:
    """Tables 3 and 5 of one split, the controls between them (``rows``: every stored cell of the budget)."""
    rows = [r for r in rows if r.get("split", "per-class") == split and r.get("kind") != "speed"]
    present = [d for d in DATASETS if any(r.get("dataset") == d for r in rows)]
    of = lookup(rows, budget=budget)
    return "\n".join(table3(of, rows, present, budget, split) + controls(of, present) + table5(of, split))


def speed_and_stale(rows: list[dict]) -> str:
    """The speed table and the list of cells from older code."""
    out: list[str] = []
    stale = [r for r in rows if r.get("stale")]
    speed = [r for r in rows if r.get("kind") == "speed"]
    if speed:
        body = []
        for b in ("quick", "default", "paper"):
            pair = {r["method"]: r for r in speed if r["budget"] == b}
            if "flagcns" not in pair:
                continue
            real, noop = pair["flagcns"], pair.get("flagcns-noop")
            share = f"{100 * noop['generation_s'] / real['generation_s']:.0f}%" if noop else "-"
            body.append(
                [
                    b,
                    f"L={real['layers']}, P={real['population']}, {real['sample']} codes/step",
                    f"{real['generation_s']:.2f}",
                    f"{real['step_s']:.2f}" if real.get("step_s") else "-",
                    f"{real['feo_s']:.2f}" if real.get("feo_s") else "-",
                    f"{noop['generation_s']:.2f}" if noop else "-",
                    share,
                    f"{real['wall_s']:.0f}",
                ]
            )
        if body:
            out += [
                "\n" + render("flagcns/speed") + "\n",
                table(
                    [
                        "budget",
                        "search",
                        "s / generation",
                        "s / SuperNet step",
                        "s / FEO",
                        "no-op s / generation",
                        "no-op share",
                        "run wall s",
                    ],
                    body,
                ),
            ]
    if stale:
        out += [
            "\n" + render("flagcns/stale", pre_finalists=PRE_FINALISTS) + "\n",
            "\n".join(
                f"- {r['cell']}{r['stale']}"
                + (" *before the finalists option*" if r.get("sources") == PRE_FINALISTS else "")
                for r in stale
            ),
        ]
    return "\n".join(out)


def results(rows: list[dict], budget: str) -> str:
    """The results file's body: every split's tables (public, first-per-class, per-class: those with cells), the
    speed and the cells from older code, the best fitness per generation, the final populations retrained."""
    figure = plot(rows, budget)
    population_figure = population_plot(rows, budget)
    splits = [
        sp
        for sp in ("public", "first-per-class", "per-class")
        if any(r.get("split", "per-class") == sp and r.get("kind") != "speed" for r in rows)
    ]
    body = "\n\n".join(tables(rows, budget, sp) for sp in splits)
    extra = speed_and_stale(rows)
    if extra:
        body += "\n" + extra
    if figure:
        body += f"\n\n## Best fitness per generation\n\n![best FLL per generation]({figure})\n"
    if population_figure:
        body += (
            "\n\n## The final populations retrained\n\n"
            f"![FLL and SuperNet validation accuracy against retrained FLACC]({population_figure})\n"
        )
    return body
