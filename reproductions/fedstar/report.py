"""FedStar's report (``run.py``): Table 1 with the paper's and the authors' code's numbers, the baselines against
FedAvg, FedStar's lead, the spread over splits, the ablations (Tables 2 and 3) and every cell, from the stored cells'
rows (:func:`tables`), their prose from ``templates/``; the figures are ``figures.py``'s."""

from __future__ import annotations

import functools
import statistics

from reproductions._runner.common import data_dir, table  # noqa: E402
from reproductions.fedstar.grid import (  # noqa: E402
    ABLATION_SHARING,
    CONTROLS,
    LABELS,
    LATE_ROUNDS,
    SETTINGS,
    SPLIT_SEED,
    SPREAD_VARIANTS,
    TABLE1,
    cell_name,
    datasets_of,
    gcfl_eps,
    legacy_rows,
)
from reproductions._runner.prose import render  # noqa: E402

# The authors' code (github.com/yuetan031/FedStar da01eace, seeds 1-5, this machine class; issue 21): CHEM only.
AUTHORS = {("CHEM", "fedstar"): 79.10, ("CHEM", "local"): 74.99}
AUTHORS_CLIENTS = {("CHEM", "fedstar"): (87.4, 83.9, 76.6, 71.1, 55.4, 98.8, 80.5)}
# Paper, Table 1 (mean over 5 seeds); local-decoupled = Table 2's "None, with decoupling" (no CHEM column).
PAPER = {
    "local": (75.38, 71.09, 69.37, 66.91),
    "fedavg": (75.26, 70.65, 68.92, 64.86),
    "fedprox": (75.30, 70.75, 69.21, 65.18),
    "fedper": (77.09, 71.97, 69.37, 62.23),
    "gcfl": (76.49, 71.60, 70.65, 66.31),
    "fedstar": (79.79, 74.54, 72.16, 69.49),
    "local-decoupled": (None, 74.08, 71.30, 68.76),
    "share-all": (None, 71.97, 69.85, 65.78),
    "share-feature": (None, 71.00, 68.53, 64.14),
}
PAPER_STD = {"fedstar": (2.44, 2.50, 2.43, 1.81), "local": (2.26, 1.21, 3.05, 2.84)}
# Paper, Table 3 (BIO-CHEM): structure embedding ablation.
PAPER_STRUCTURE = {"dse+rwse": 74.54, "dse": 74.42, "rwse": 72.74, "ones": 69.51}


def fmt(values: list[float], unit: str = "seed") -> str:
    """Mean ± std over runs, with how many runs (``unit``: what varies between them, seeds or splits)."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f} (1 {unit})"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} {unit}s)"


def paper(variant: str, setting: str) -> str:
    value = PAPER.get(variant, (None,) * 4)[SETTINGS.index(setting)]
    return "-" if value is None else f"{value:.2f}"


def values(
    rows: list[dict],
    setting: str,
    variant: str,
    structure: str = "dse+rwse",
    key: str = "accuracy",
    seed: int | None = None,
    split_seed: int | None = SPLIT_SEED,
) -> list:
    """``key`` of every finished cell of (setting, variant, structure, split seed), in row order; of one training
    seed if given; of every split seed if ``split_seed`` is None."""
    return [
        r[key]
        for r in rows
        if (r["setting"], r["variant"], r["structure"]) == (setting, variant, structure)
        and seed in (None, r["seed"])
        and split_seed in (None, r.get("split_seed", SPLIT_SEED))
    ]


def stale_mark(rows: list[dict], setting: str, variant: str, structure: str = "dse+rwse") -> str:
    return " †" if any(values(rows, setting, variant, structure, key="stale")) else ""


def spread(values_: list[float]) -> str:
    return f"{statistics.stdev(values_):.2f} ({len(values_)})" if len(values_) > 1 else "-"


def split_spread(rows: list[dict]) -> list[str]:
    """CHEM over split seeds (training seed 1) beside CHEM over training seeds (split 123): what the paper does not
    report."""
    have = [v for v in SPREAD_VARIANTS if len(values(rows, "CHEM", v, seed=1, split_seed=None)) > 1]
    if not have:
        return []
    lines, by_split = [], {}
    for v in have:
        over_splits = values(rows, "CHEM", v, seed=1, split_seed=None)
        over_seeds = values(rows, "CHEM", v)
        lines.append([LABELS[v], fmt(over_seeds), spread(over_seeds), fmt(over_splits, "split"), spread(over_splits)])
        for r in rows:
            if (r["setting"], r["variant"], r["seed"], r["structure"]) == ("CHEM", v, 1, "dse+rwse"):
                by_split.setdefault(r.get("split_seed", SPLIT_SEED), {})[v] = r["accuracy"]
    gaps = []
    for split_seed, accs in sorted(by_split.items()):
        gaps.append(
            [split_seed]
            + [f"{accs[v]:.2f}" if v in accs else "-" for v in have]
            + [
                f"{accs['fedstar'] - accs[o]:+.2f}" if "fedstar" in accs and o in accs else "-"
                for o in have
                if o != "fedstar"
            ]
        )
    tests = sorted(len(g) for g in _chem_test_sizes())
    return [
        "\n" + render("fedstar/split_spread", splits=", ".join(map(str, sorted(by_split)))) + "\n",
        table(["method", "over training seeds (split 123)", "std", "over splits (seed 1)", "std"], lines),
        "\nPer split (training seed 1), and FedStar's lead:\n",
        table(
            ["split seed"] + [LABELS[v] for v in have] + [f"FedStar - {LABELS[o]}" for o in have if o != "fedstar"],
            gaps,
        ),
        "\n" + render("fedstar/chem_tests", sizes=", ".join(map(str, tests)), points=f"{100 / 7 / tests[0]:.2f}"),
    ] + pooled_pairs(rows)


def pooled_pairs(rows: list[dict]) -> list[str]:
    """Differences paired run by run over every CHEM run on the authors' split family: the training seeds on split
    123 and training seed 1 on the other split seeds (each (seed, split) pair once)."""
    runs: dict[str, dict[tuple[int, int], float]] = {}
    for r in rows:
        split_seed = r.get("split_seed", SPLIT_SEED)
        if (r["setting"], r["structure"]) == ("CHEM", "dse+rwse") and (split_seed == SPLIT_SEED or r["seed"] == 1):
            runs.setdefault(r["variant"], {})[(r["seed"], split_seed)] = r["accuracy"]
    lines = []
    for a, b in (
        ("fedstar", "local"),
        ("fedstar", "fedavg"),
        ("fedstar", "local-decoupled"),
        ("local-decoupled", "local"),
    ):
        common = sorted(set(runs.get(a, {})) & set(runs.get(b, {})))
        if len(common) < 2:
            continue
        diffs = [runs[a][k] - runs[b][k] for k in common]
        sd = statistics.stdev(diffs)
        lines.append(
            [
                f"{LABELS[a]} - {LABELS[b]}",
                len(common),
                f"{statistics.mean(diffs):+.2f}",
                f"{sd:.2f}",
                f"{sd / len(diffs) ** 0.5:.2f}",
                f"{min(diffs):+.2f} to {max(diffs):+.2f}",
                sum(d > 0 for d in diffs),
            ]
        )
    if not lines:
        return []
    return [
        "\n" + render("fedstar/pooled_pairs") + "\n",
        table(["difference", "runs", "mean", "std", "std error", "range", "runs > 0"], lines),
    ]


def _chem_test_sizes() -> list:
    from flowergraph.data import GraphTaskSpec, client_graph_data

    spec = GraphTaskSpec(datasets=tuple(datasets_of("CHEM")), data_dir=data_dir())
    return [client_graph_data(spec, k).test for k in range(len(spec.datasets))]


def by_seed(rows: list[dict], setting: str, variant: str) -> dict:
    """Training seed -> final accuracy of the variant's cells on the authors' split."""
    return dict(zip(values(rows, setting, variant, key="seed"), values(rows, setting, variant)))


def against_fedavg(rows: list[dict]) -> list[str]:
    """Each GIN baseline minus FedAvg, paired by training seed (same split, same data order, dropout and
    initialisation: with mu = 0 FedProx is FedAvg to the last bit, tests/test_fedstar.py), with the paper's
    difference of means."""
    lines = []
    for s in SETTINGS:
        base = by_seed(rows, s, "fedavg")
        for v in ("fedprox", "fedper", "gcfl") + CONTROLS:
            mine = by_seed(rows, s, v)
            common = sorted(set(base) & set(mine))
            if not common:
                continue
            diffs = [mine[k] - base[k] for k in common]
            sd = f"{statistics.stdev(diffs):.2f}" if len(diffs) > 1 else "-"
            p, pa = PAPER.get(v, (None,) * 4)[SETTINGS.index(s)], PAPER["fedavg"][SETTINGS.index(s)]
            lines.append(
                [
                    s,
                    LABELS[v],
                    len(common),
                    f"{statistics.mean(diffs):+.2f}",
                    sd,
                    " ".join(f"{d:+.2f}" for d in diffs),
                    f"{p - pa:+.2f}" if p is not None else "-",
                ]
            )
    if not lines:
        return []
    return [
        "\n" + render("fedstar/against_fedavg") + "\n",
        table(["setting", "method", "seeds", "mean", "std", "per seed", "paper (difference of means)"], lines),
    ]


def claims(rows: list[dict]) -> list[str]:
    """The README's claims about FedStar, re-checked on these cells: its lead over Local and FedAvg per setting
    (paired by training seed: over the seeds both methods have, with their count when it is fewer than FedStar's),
    and how much of it the decoupled model alone gives."""
    lines = []
    for s in SETTINGS:
        seeds = {v: by_seed(rows, s, v) for v in ("fedstar", "local", "fedavg", "local-decoupled")}
        if not seeds["fedstar"]:
            continue

        def lead(a: str, b: str) -> str:
            common = sorted(set(seeds[a]) & set(seeds[b]))
            if not common:
                return "-"
            diff = statistics.mean(seeds[a][k] - seeds[b][k] for k in common)
            fewer = f" ({len(common)} seeds)" if len(common) < len(seeds["fedstar"]) else ""
            return f"{diff:+.2f}{fewer}"

        lines.append(
            [
                s,
                len(seeds["fedstar"]),
                lead("fedstar", "local"),
                lead("fedstar", "fedavg"),
                lead("fedstar", "local-decoupled"),
                lead("local-decoupled", "local"),
                spread(list(seeds["fedstar"].values())),
            ]
        )
    if not lines:
        return []
    return [
        "\n" + render("fedstar/claims") + "\n",
        table(
            [
                "setting",
                "seeds",
                "FedStar - Local",
                "FedStar - FedAvg",
                "FedStar - Local decoupled",
                "decoupled alone",
                "FedStar seed std",
            ],
            lines,
        ),
    ]


def legacy_section() -> list[str]:
    rows = legacy_rows()
    if not rows:
        return []
    lines = []
    for s in SETTINGS:
        for v in ("local", "fedavg", "fedstar"):
            accs = [
                r["accuracy"] for r in rows if (r["setting"], r["variant"], r.get("structure")) == (s, v, "dse+rwse")
            ]
            if accs:
                lines.append([s, LABELS[v], fmt(accs)])
    return ["\n" + render("fedstar/legacy") + "\n", table(["setting", "method", "accuracy (per-class split)"], lines)]


def authors(variant: str, setting: str) -> str:
    value = AUTHORS.get((setting, variant))
    return "-" if value is None else f"{value:.2f}"


def table1(rows: list[dict], present: list[str], shown: tuple, rounds: int, eval_every: int) -> list[str]:
    """Table 1 (ours | paper | the authors' code), the gain over Local, and the late-rounds table."""
    acc = functools.partial(values, rows)
    sizes = {s: len(datasets_of(s)) for s in present}
    header = ["method"] + [f"{s} ({sizes[s]} datasets): ours \\| paper \\| authors' code" for s in present]
    body = []
    for variant in shown:
        body.append(
            [LABELS[variant]]
            + [
                f"{fmt(acc(s, variant))}{stale_mark(rows, s, variant)} \\| "
                f"{paper(variant, s)} \\| {authors(variant, s)}"
                for s in present
            ]
        )
    gains = []
    for variant in shown:
        cells = []
        for s in present:
            ours, local = acc(s, variant), acc(s, "local")
            p, pl = PAPER.get(variant, (None,) * 4)[SETTINGS.index(s)], PAPER["local"][SETTINGS.index(s)]
            mine = f"{statistics.mean(ours) - statistics.mean(local):+.2f}" if ours and local else "-"
            cells.append(f"{mine} \\| {p - pl:+.2f}" if p is not None else f"{mine} \\| -")
        gains.append([LABELS[variant]] + cells)
    late = [[LABELS[v]] + [fmt(acc(s, v, key="late")) for s in present] for v in shown]
    return [
        render("fedstar/table1", rounds=rounds) + "\n",
        table(header, body),
        "\n**Gain over Local (GIN), percentage points** (ours | paper):\n",
        table(["method"] + present, gains),
        "\n"
        + render(
            "fedstar/late",
            late=LATE_ROUNDS,
            eval_every=eval_every,
            first=max(1, rounds - LATE_ROUNDS + 1),
            rounds=rounds,
        )
        + "\n",
        table(["method"] + present, late),
    ]


def per_client(rows: list[dict], present: list[str]) -> list[str]:
    """Each client's test accuracy (mean over seeds) of Local, Local decoupled and FedStar, with the authors'."""
    lines = []
    for s in present:
        for variant in ("local", "local-decoupled", "fedstar"):
            clients = values(rows, s, variant, key="clients")
            if clients:
                per = [statistics.mean(100 * c[k] for c in clients) for k in range(len(datasets_of(s)))]
                lines.append([s, LABELS[variant]] + [f"{v:.1f}" for v in per])
            if (s, variant) in AUTHORS_CLIENTS:
                lines.append(
                    [s, LABELS[variant] + ", authors' code"] + [f"{v:.1f}" for v in AUTHORS_CLIENTS[s, variant]]
                )
    if not lines:
        return []
    width = max(len(line) for line in lines)
    lines = [line + [""] * (width - len(line)) for line in lines]
    return [
        "\n**Per client** (test accuracy %, mean over seeds; clients in the setting's dataset order: "
        + "; ".join(f"{s}: {', '.join(datasets_of(s))}" for s in present)
        + "):\n",
        table(["setting", "method"] + [f"client {k}" for k in range(width - 2)], lines),
    ]


def ablations(rows: list[dict]) -> list[str]:
    """Tables 2 and 3 on BIO-CHEM: what is shared, and FedStar's structure embedding."""
    acc = functools.partial(values, rows)
    abl = [
        r
        for r in rows
        if r["setting"] == "BIO-CHEM" and (r["variant"] in ABLATION_SHARING[1:3] or r["structure"] != "dse+rwse")
    ]
    if not abl:
        return []
    seed = min(r["seed"] for r in abl)  # the ablations run on one seed: every row also on that seed alone

    def same_seed(variant, structure="dse+rwse"):
        return [
            f"{v[0]:.2f}" if v else "-"
            for v in (acc("BIO-CHEM", variant, structure, key, seed) for key in ("accuracy", "late"))
        ]

    share = [[LABELS[v], fmt(acc("BIO-CHEM", v)), *same_seed(v), paper(v, "BIO-CHEM")] for v in ABLATION_SHARING]
    struct = [
        [k, fmt(acc("BIO-CHEM", "fedstar", k)), *same_seed("fedstar", k), f"{v:.2f}"]
        for k, v in PAPER_STRUCTURE.items()
    ]
    cols = ["ours, all seeds", f"ours, seed {seed}", f"seed {seed}, last {LATE_ROUNDS} rounds", "paper"]
    return [
        "\n" + render("fedstar/ablations", seed=seed, late=LATE_ROUNDS) + "\n",
        table(["shared"] + cols, share),
        "\nStructure embedding of FedStar (`fedstar.structure`; `ones` = an all-ones vector):\n",
        table(["structure embedding"] + cols, struct),
    ]


def gcfl_clusters(rows: list[dict]) -> list[str]:
    """GCFL's thresholds, splits and final clusters per run."""
    gcfl = [r for r in rows if r["variant"] == "gcfl" and "clusters" in r]
    if not gcfl:
        return []
    lines = [
        [
            r["setting"],
            r["seed"],
            "{} / {}".format(*gcfl_eps(r["setting"])),
            ", ".join(f"r{rnd}: {a} / {b}" for rnd, (a, b) in r["splits"]) or "none",
            " ".join(str(c) for c in r["clusters"]),
        ]
        for r in gcfl
    ]
    return [
        "\n**GCFL's clusters** (the authors' thresholds eps1 / eps2 for these datasets; clients by partition "
        "id in the setting's dataset order):\n",
        table(["setting", "seed", "eps1 / eps2", "splits (round: one side / other)", "final clusters"], lines),
    ]


def every_cell(rows: list[dict]) -> list[str]:
    """The cells of older code, then every cell with its times."""
    out = []
    stale = [r for r in rows if r.get("stale")]
    if stale:
        out += [
            "\n**Cells from older code** (†: re-run them with `--rerun-stale`):\n",
            "\n".join(
                f"- {cell_name(r['setting'], r['variant'], r['seed'], r['structure'], r['split_seed'])}{r['stale']}"
                for r in stale
            ),
        ]
    timing = [
        [
            r["setting"],
            LABELS[r["variant"]] + ("" if r["structure"] == "dse+rwse" else f" ({r['structure']})"),
            r["seed"],
            r.get("split_seed", SPLIT_SEED),
            f"{r['cpu_s']:.0f}" if r.get("cpu_s") and not r.get("timing_partial") else "-",
            f"{r['wall_s']:.0f}"
            if r.get("wall_s") and not r.get("timing_partial")
            else f"{r['rounds_s']:.0f} (rounds only: resumed)"
            if r.get("rounds_s")
            else "-",
            f"{r['round_s']:.2f}" if r.get("round_s") else "-",
            f"{r['accuracy']:.2f}",
        ]
        for r in rows
    ]
    return out + [
        "\n" + render("fedstar/every_cell") + "\n",
        table(["setting", "method", "seed", "split seed", "CPU s", "wall s", "round s", "accuracy %"], timing),
    ]


def tables(rows: list[dict], rounds: int, eval_every: int = 10) -> str:
    """docs/results/fedstar.md's tables, from the stored cells' ``rows``."""
    present = [s for s in SETTINGS if any(r["setting"] == s for r in rows)]
    shown = TABLE1 + tuple(v for v in CONTROLS if any(r["variant"] == v for r in rows))
    out = table1(rows, present, shown, rounds, eval_every) + against_fedavg(rows)
    out += per_client(rows, present) + ablations(rows) + gcfl_clusters(rows)
    out += claims(rows) + split_spread(rows) + legacy_section() + every_cell(rows)
    return "\n".join(out)
