"""ASFGNN's Table 6 report (``reproductions/asfgnn/run.py``): JS against no JS over alpha on Cora, with FL and SP
(Fig. 3's other curves), seed-paired, what the tuner saw against what the table reports, and Fig. 3's shape."""

from __future__ import annotations

import statistics
from typing import Callable

from reproductions.asfgnn.figures import plot_alpha  # noqa: E402
from reproductions.asfgnn.grid import ALPHAS, LABELS, PAPER6, paper_fig3  # noqa: E402
from reproductions.asfgnn.rows import accuracy, alpha_curves, fmt, paired  # noqa: E402
from reproductions._runner.common import table  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402


def gap(cs: list[dict]) -> str:
    """What the tuner saw / what the table reports (gap) / the selected-on-test bound, means over seeds."""
    oracle = [c["oracle_test"] for c in cs if c.get("oracle_test") is not None]
    return (
        f"{statistics.mean(c['best_val'] for c in cs):.3f} / {statistics.mean(accuracy(c) for c in cs):.3f}"
        f" ({statistics.mean(c['best_val'] - accuracy(c) for c in cs):+.3f}) / "
        + (f"{statistics.mean(oracle):.3f}" if len(oracle) == len(cs) else "-")
    )


def table6_row(a: float, cells: dict[str, list[dict]], n: int | None) -> list[str]:
    """Table 6's row at alpha ``a``: without and with JS against the paper, FL, SP, and which is ahead."""
    means = {m: statistics.mean(accuracy(c) for c in cs) for m, cs in cells.items() if cs}
    best_paper, sp_fl_paper = paper_fig3(a)
    best = (
        max(("sfgnn", "fl", "sp"), key=means.__getitem__).upper()
        if all(m in means for m in ("sfgnn", "fl", "sp"))
        else "-"
    )
    sp_fl = ("SP" if means["sp"] > means["fl"] else "FL") if all(m in means for m in ("fl", "sp")) else "-"
    return [
        f"{a:.1f}",
        f"{fmt([accuracy(c) for c in cells['sfgnn-nojs']], n=n)} \\| {PAPER6[a][0]:.4f}",
        f"{fmt([accuracy(c) for c in cells['sfgnn']], n=n)} \\| {PAPER6[a][1]:.4f}",
        fmt([accuracy(c) for c in cells["fl"]], n=n),
        fmt([accuracy(c) for c in cells["sp"]], n=n),
        f"{best} \\| {best_paper}",
        f"{sp_fl} \\| {sp_fl_paper}",
    ]


def table6(of: Callable[..., list[dict]], n: int | None, budget: str) -> list[str]:
    """Table 6 (Cora, with and without JS over alpha, with FL and SP as Fig. 3's other curves), its seed-paired JS
    table, what the tuner saw against what the table reports, and Fig. 3's shape; ``of(kind, **match)``: the rows
    of a kind matching the values; ``n``: the usual number of seeds per row."""
    t6 = [a for a in ALPHAS if of("tuned", dataset="Cora", setting="label", alpha=a, budget=budget)]
    if not t6:
        return []
    body, gaps, js_pairs, by_alpha = [], [], [], {}
    for a in sorted(t6, reverse=True):
        cells = by_alpha[a] = {
            m: of("tuned", dataset="Cora", setting="label", alpha=a, method=m, budget=budget)
            for m in ("sfgnn-nojs", "sfgnn", "fl", "sp")
        }
        if row := paired(cells["sfgnn"], cells["sfgnn-nojs"], paper=PAPER6[a][1] - PAPER6[a][0]):
            js_pairs.append([f"{a:.1f}", *row])
        body.append(table6_row(a, cells, n))
        gaps.append(
            [f"{a:.1f}"]
            + [gap(cells[m]) if cells[m] else "-" for m in ("fl", "sp", "sfgnn", "sfgnn-nojs")]
            + [f"{PAPER6[a][1]:.3f}"]
        )
    columns = ["alpha", "without JS (ours \\| paper)", "with JS (ours \\| paper)", "FL", "SP"]
    columns += ["best of SFGNN, FL, SP (ours \\| paper's text)", "SP or FL ahead (ours \\| paper's text)"]
    out = ["\n" + render("asfgnn/table6", budget=budget) + "\n", table(columns, body)]
    if js_pairs:
        columns = ["alpha", "seeds", "with JS", "without JS", "with - without", "ahead / level / behind"]
        columns += ["95% interval of the mean", "95% range of one run", "paper's improvement", "paper vs one run"]
        out += ["\n" + render("asfgnn/table6_paired") + "\n", table(columns, js_pairs)]
    columns = ["alpha", "FL: val / test (gap) / on test", "SP: val / test (gap) / on test"]
    columns += ["SFGNN: val / test (gap) / on test", "without JS: val / test (gap) / on test", "paper SFGNN"]
    out += ["\n" + render("asfgnn/tuner_gap") + "\n", table(columns, gaps)]
    if figure := plot_alpha(alpha_curves(by_alpha), budget):
        out += [f"\n![Fig. 3 shape: accuracy over alpha, and JS minus no JS seed-paired]({figure})"]
    return out


PAIRED = ["seeds", "control", "Table 6", "control - Table 6", "ahead / level / behind", "95% interval of the mean"]


def controls(of: Callable[..., list[dict]], budget: str) -> list[str]:
    """Table 6's controls against Table 6's cells of the same method, alpha and seed: the paper's client sizes
    (kind ``sizes``) and more local steps per round (kind ``steps``); with the paper's Table 6 number."""
    out: list[str] = []

    def base(a: float, m: str) -> list[dict]:
        return of("tuned", dataset="Cora", setting="label", alpha=a, method=m, budget=budget)

    def paper(a: float, m: str) -> str:
        return f"{PAPER6[a][0 if m == 'sfgnn-nojs' else 1]:.4f}" if m in ("sfgnn", "sfgnn-nojs") else "-"

    def rows(kind: str, key: str) -> tuple[list[list], list[list]]:
        cells = of(kind, dataset="Cora", setting="label", budget=budget)
        body, js = [], []
        for a in sorted({c["alpha"] for c in cells}, reverse=True):
            for value in sorted({c[key] for c in cells if c["alpha"] == a}, key=str):
                group = {
                    m: [c for c in cells if c["alpha"] == a and c[key] == value and c["method"] == m] for m in LABELS
                }
                for m, cs in group.items():
                    if cs and (row := paired(cs, base(a, m))):
                        body.append(
                            [f"{a:.1f}", value, LABELS[m], *row[:6], fmt([accuracy(c) for c in cs]), paper(a, m)]
                        )
                if row := paired(group["sfgnn"], group["sfgnn-nojs"], paper=PAPER6[a][1] - PAPER6[a][0]):
                    js.append([f"{a:.1f}", value, *row])
        return body, js

    head = ["alpha", "", "method", *PAIRED, "control over all its seeds", "paper"]
    sizes, js = rows("sizes", "sizes")
    if sizes:
        out += ["\n" + render("asfgnn/sizes", budget=budget) + "\n", table(head[:1] + ["sizes"] + head[2:], sizes)]
    if js:
        columns = ["seeds", "with JS", "without JS", "with - without", "ahead / level / behind"]
        columns += ["95% interval of the mean", "95% range of one run", "paper's improvement", "paper vs one run"]
        out += ["\n" + render("asfgnn/sizes_js") + "\n", table(["alpha", "sizes", *columns], js)]
    steps, _ = rows("steps", "local_steps")
    if steps:
        out += ["\n" + render("asfgnn/steps", budget=budget) + "\n", table(head[:1] + ["steps"] + head[2:], steps)]
    return out
