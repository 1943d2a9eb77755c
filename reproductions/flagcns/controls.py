"""FL-AGCNS's control tables (``run.py``), from the stored cells' rows of one split (:func:`controls`: each searched
architecture with every output and input activation, the authors' published architectures, what the EAs rank by, the
structures' FC layers, the server's Adam, the final population retrained, choosing by retraining the finalists), their
prose from ``templates/``; and the formats every FL-AGCNS table shares (:func:`fmt`, :func:`paper_cell`, :func:`output`,
:func:`genes`). Table 3 and 5 around them are ``report.py``'s."""

from __future__ import annotations

import statistics

from reproductions._runner.common import ahead_level_behind, interval_text, t_interval, table  # noqa: E402
from reproductions.flagcns.grid import (  # noqa: E402
    ADAM_VARIANTS,
    COLLAPSE,
    collapse_label,
    DATASETS,
    FINALIST_VARIANTS,
    FITNESS_VARIANTS,
    PAPER3,
    PUBLISHED,
    STRUCTURE_VARIANTS,
)
from reproductions._runner.prose import render  # noqa: E402


def fmt(values: list[float], digits: int = 1) -> str:
    """Mean ± std of ``values`` (one value as itself, none as "-")."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def paper_cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def paired_summary(diffs: list[float]) -> str:
    """A bold summary line's cell for seed-paired differences: the mean in bold, its 95% interval and the seeds ahead /
    level / behind."""
    return f"**{statistics.mean(diffs):+.1f}** {interval_text(t_interval(diffs))}, {ahead_level_behind(diffs)}"


def pick(members: list[dict], rule: str) -> dict:
    """The member of a population cell's final P that the search's final pick takes under ``rule`` (``fll``: the
    paper's; ``accuracy``: the 2021 code's): :func:`flowergraph.methods.flagcns.maths.evolution.final_candidates`
    itself, its ties and non-finite values included (the members are already one per network, in P's order)."""
    from flowergraph.methods.flagcns.maths import SearchSpace
    from flowergraph.methods.flagcns.maths import final_candidates

    codes = [tuple(m["architecture"]) for m in members]
    space = SearchSpace(num_layers=(len(codes[0]) - 2) // 2)  # only its canonical form is used: k = 1 keeps the best
    ((*_, index),) = final_candidates(space, codes, [(m["fll"], m["val_accuracy"]) for m in members], 1, rule)
    return members[index]


def output(row: dict) -> str:
    """The output activation (the last gene) of a search cell's chosen architecture."""
    from flowergraph.methods.flagcns.maths import ACTIVATIONS

    return ACTIVATIONS[row["architecture"][-1]]


def genes(row: dict) -> str:
    """The input and output activations (the first and last genes) of a search cell's chosen architecture."""
    from flowergraph.methods.flagcns.maths import ACTIVATIONS

    return f"{ACTIVATIONS[row['architecture'][0]]} in, {output(row)} out"


def activations(of, present: list[str]) -> list[str]:
    """The searched architecture retrained with each output (then input) activation in place of the one the
    search chose (``outputs`` / ``inputs`` cells)."""
    out: list[str] = []
    for kind, gene, where in (("outputs", "output", "last"), ("inputs", "input", "first")):
        cells = [r for d in present for r in of(kind, d)]
        if not cells:
            continue
        acts = list(cells[0][f"by_{gene}"])
        body = [
            [r["dataset"], r["seed"], r[f"chosen_{gene}"]]
            + [f"{r[f'by_{gene}'][a]['flacc']:.1f} ± {r[f'by_{gene}'][a]['flacc_std']:.1f}" for a in acts]
            for r in sorted(cells, key=lambda r: (r["dataset"], r["seed"]))
        ]
        means = [
            [d, "mean", ""] + [fmt([r[f"by_{gene}"][a]["flacc"] for r in cells if r["dataset"] == d]) for a in acts]
            for d in present
            if any(r["dataset"] == d for r in cells)
        ]
        out += [
            "\n" + render("flagcns/activations", gene=gene, where=where) + "\n",
            table(["dataset", "seed", "search chose"] + acts, body + means),
        ]
    return out


def published(of, present: list[str]) -> list[str]:
    """The architectures the authors published, translated into this space and retrained (``published`` cells),
    beside our FL-AGCNS and the paper's."""
    pub = [r for d in present for r in of("published", d)]
    if not pub:
        return []
    body = []
    for (d, key), fusion in sorted(
        {((r["dataset"], r["published"]), r["fusion"]) for r in pub},
        key=lambda k: (DATASETS.index(k[0][0]), k[0][1], k[1]),
    ):
        cells = sorted(
            [r for r in pub if r["dataset"] == d and r["published"] == key and r["fusion"] == fusion],
            key=lambda r: r["seed"],
        )
        feo = of("search", d, variant="feo")
        body.append(
            [
                d,
                f"`{PUBLISHED[(d, key)][0]}` ({key})",
                f"`{cells[0]['describe']}`",
                fusion,
                fmt([c["flacc"] for c in cells]) + (" †" if any(c.get("stale") for c in cells) else ""),
                ", ".join(f"s{c['seed']}: {c['flacc']:.1f}" for c in cells),
                fmt([c["parameters"] / 1e6 for c in cells], 3),
                fmt([c["flacc"] for c in feo]),
                paper_cell(PAPER3[d]["FL-AGCNS"][0], 1),
            ]
        )
    return [
        "\n" + render("flagcns/published") + "\n",
        table(
            [
                "dataset",
                "published code",
                "architecture",
                "fusion",
                "FLACC %",
                "per seed",
                "params M",
                "our FL-AGCNS",
                "paper FL-AGCNS",
            ],
            body,
        ),
    ]


def fitness(of, present: list[str]) -> list[str]:
    """What the EAs rank by: the paper's FLL against the authors' code's validation accuracy (``feo-accuracy``)."""
    fit = [(d, v) for d in present for v in ("feo-accuracy",) if of("search", d, variant=v)]
    if not fit:
        return []
    body = []
    for d, v in fit:
        for label, variant in (
            ("validation loss (FLL, the paper)", "feo"),
            (f"validation {FITNESS_VARIANTS[v][1]} (the authors' code)", v),
        ):
            cells = sorted(of("search", d, variant=variant), key=lambda r: r["seed"])
            body.append(
                [
                    d,
                    label,
                    fmt([c["flacc"] for c in cells]),
                    ", ".join(f"s{c['seed']}: {output(c)} {c['flacc']:.1f}" for c in cells),
                ]
            )
    return [
        "\n" + render("flagcns/fitness") + "\n",
        table(["dataset", "fitness", "FLACC %", "per seed: output gene, FLACC"], body),
    ]


def structure_fc(of, present: list[str]) -> list[str]:
    """One FC layer per input / output structure (the paper) against one shared (``feo-shared-fc``)."""
    shared_fc = [d for d in present if any(of("search", d, variant=v) for v in STRUCTURE_VARIANTS)]
    if not shared_fc:
        return []
    body = []
    for d in shared_fc:
        for label, variant in (
            ("one per option (`per-option`: Table 1, the 2021 code)", "feo"),
            ("one shared by the five options (`shared`: the 2022 rework)", "feo-shared-fc"),
        ):
            cells = sorted(of("search", d, variant=variant), key=lambda r: r["seed"])
            body.append(
                [
                    d,
                    label,
                    fmt([c["flacc"] for c in cells]),
                    ", ".join(f"s{c['seed']}: {output(c)} {c['flacc']:.1f}" for c in cells),
                ]
            )
    return [
        "\n" + render("flagcns/structure_fc") + "\n",
        table(
            ["dataset", "FC layers of the input and output structures", "FLACC %", "per seed: output gene, FLACC"], body
        ),
    ]


def adam(of, present: list[str]) -> list[str]:
    """The search's Adam on the parameters the step trains, or also on every one trained once
    (``feo-once-touched``)."""
    adam = [d for d in present if any(of("search", d, variant=v) for v in ADAM_VARIANTS)]
    if not adam:
        return []
    body = []
    for d in adam:
        by_variant = {}
        for label, variant in (
            ("the parameters the step's codes train (`this-step`)", "feo"),
            ("also every parameter trained once (`once-touched`: the 2021 code, torch 1.x)", "feo-once-touched"),
        ):
            cells = sorted(of("search", d, variant=variant), key=lambda r: r["seed"])
            by_variant[variant] = {c["seed"]: c["flacc"] for c in cells}
            body.append(
                [
                    d,
                    label,
                    fmt([c["flacc"] for c in cells]) + (" †" if any(c.get("stale") for c in cells) else ""),
                    ", ".join(f"s{c['seed']}: {output(c)} {c['flacc']:.1f}" for c in cells),
                ]
            )
        # seed-paired: once-touched minus this-step on the seeds that have both
        seeds = sorted(set(by_variant["feo"]) & set(by_variant["feo-once-touched"]))
        diffs = [by_variant["feo-once-touched"][s] - by_variant["feo"][s] for s in seeds]
        if len(diffs) > 1:
            body.append(
                [
                    f"**{d}**",
                    f"**`once-touched` - `this-step`, seed-paired ({len(diffs)} seeds)**",
                    paired_summary(diffs),
                    ", ".join(f"s{s}: {x:+.1f}" for s, x in zip(seeds, diffs)),
                ]
            )
    return [
        "\n" + render("flagcns/adam") + "\n",
        table(["dataset", "Adam steps", "FLACC %", "per seed: output gene, FLACC"], body),
    ]


def population(of, present: list[str]) -> list[str]:
    """The final population retrained: FLL (and the SuperNet's validation accuracy) against retrained FLACC
    (``population`` cells), and the seed's chosen code (its ``feo`` search cell's retrainings) against the
    population's mean: does the final pick beat a member of the final P drawn at random? Per dataset, the
    seed-paired difference with its 95% interval."""
    pops = sorted(
        (r for d in present for r in of("population", d)), key=lambda r: (DATASETS.index(r["dataset"]), r["seed"])
    )
    if not pops:
        return []
    body = []
    for d in present:
        feo = {c["seed"]: c for c in of("search", d, variant="feo")}
        diffs = []
        for r in (r for r in pops if r["dataset"] == d):
            accs = [m["flacc"] for m in r["members"]]
            mean = statistics.mean(accs)
            chosen = feo.get(r["seed"])
            if chosen is not None:
                diffs.append(chosen["flacc"] - mean)
            by_val = pick(r["members"], "accuracy")  # the 2021 code's get_best_supermask over the same P
            body.append(
                [
                    d,
                    r["seed"],
                    f"{r['distinct']} of {r['population']}",
                    "-" if r["spearman_fll"] is None else f"{r['spearman_fll']:+.2f}",
                    "-" if r["spearman_val_accuracy"] is None else f"{r['spearman_val_accuracy']:+.2f}",
                    f"{min(accs):.1f}-{max(accs):.1f}",
                    f"{mean:.1f}",
                    "-" if chosen is None else f"{chosen['flacc']:.1f} ({output(chosen)})",
                    "-" if chosen is None else f"{chosen['flacc'] - mean:+.1f}",
                    f"{by_val['flacc']:.1f} ({output(by_val)}, {100 * by_val['val_accuracy']:.1f})",
                    f"{sum(a < COLLAPSE[r['dataset']] for a in accs)}",
                    r["population_retrains"],
                ]
            )
        if len(diffs) > 1:
            body.append([f"**{d}**", f"**{len(diffs)} seeds**", *[""] * 6, paired_summary(diffs), *[""] * 3])
    return [
        "\n" + render("flagcns/population") + "\n",
        table(
            [
                "dataset",
                "seed",
                "distinct networks",
                "Spearman FLL vs FLACC",
                "Spearman val acc vs FLACC",
                "FLACC range %",
                "population mean %",
                "chosen code % (output)",
                "chosen - population mean",
                "highest SuperNet val acc % (output, val acc %)",
                f"members under the collapse line ({collapse_label()})",
                "retrainings each",
            ],
            body,
        ),
    ]


def finalists(of, present: list[str]) -> list[str]:
    """The selection control: the k lowest-FLL codes of the final P retrained once, the best by validation kept
    (``feo-finalists``), beside the same seed's search row."""
    fin = [r for d in present for v in FINALIST_VARIANTS for r in of("search", d, variant=v)]
    if not fin:
        return []
    body, means = [], []
    for r in sorted(fin, key=lambda r: (DATASETS.index(r["dataset"]), r["seed"])):
        feo = next(iter(of("search", r["dataset"], variant="feo", seed=r["seed"])), None)
        body.append(
            [
                r["dataset"],
                r["seed"],
                f"{output({'architecture': r['by_fll']})}",
                f"{r['by_fll_flacc']:.1f} ± {r['by_fll_flacc_std']:.1f}",
                ", ".join(
                    f"{output(f)} {f['val']:.1f}/{f['test']:.1f}" if f["val"] is not None else f"{output(f)} -"
                    for f in r["finalists"]
                ),
                f"{r['selection_kept']}: `{r['describe']}`",
                f"{r['flacc']:.1f} ± {r['flacc_std']:.1f}" + (" †" if r.get("stale") else ""),
                "-"
                if feo is None
                else f"{output(feo)} {feo['flacc']:.1f}"
                + ("" if feo["architecture"] == r["by_fll"] else " (another code)"),
                f"{r.get('cpu', 'not recorded')} / {feo.get('cpu', 'not recorded') if feo else '-'}",
            ]
        )
    for d in present:
        cells = [r for r in fin if r["dataset"] == d]
        if cells:
            feo = [c for r in cells for c in of("search", d, variant="feo", seed=r["seed"])]
            means.append(
                [
                    d,
                    "mean",
                    "",
                    fmt([r["by_fll_flacc"] for r in cells]),
                    "",
                    "",
                    fmt([r["flacc"] for r in cells]),
                    fmt([c["flacc"] for c in feo]),
                    "",
                ]
            )
    k = len(fin[0]["finalists"])
    return [
        "\n" + render("flagcns/finalists", k=k) + "\n",
        table(
            [
                "dataset",
                "seed",
                "lowest FLL: output",
                "its FLACC %",
                "finalists: output val/test",
                "kept (FLL rank)",
                "FLACC % of the kept",
                "search row: output, FLACC %",
                "CPU",
            ],
            body + means,
        ),
    ]


def controls(of, present: list[str]) -> list[str]:
    """The control tables of one split, in the results file's order (``of(kind, dataset, **match)``: its cells)."""
    return (
        activations(of, present)
        + published(of, present)
        + fitness(of, present)
        + structure_fc(of, present)
        + adam(of, present)
        + population(of, present)
        + finalists(of, present)
    )
