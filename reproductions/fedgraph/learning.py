"""FedGraph's benchmark report for the learning budget (``reproductions/fedgraph/run.py --budget learning``): the DDPG
agent over many episodes, per block of LEARNING_BLOCK episodes (:func:`learning_table`), trained against the fixed
schemes on Fig. 7's axes (:func:`trained_agent_table`, :func:`trained_curves`) and whether it keeps what it learned
(:func:`stability_table`); their prose from ``reproductions/fedgraph/templates/``."""

from __future__ import annotations

import statistics

import numpy as np

from reproductions._runner.common import table  # noqa: E402
from reproductions.fedgraph.curves import (
    OTHER_CPU,
    OTHER_CPU_NOTE,
    TARGET,
    TARGET_HIGH,
    accuracy_at,  # noqa: E402
    accuracy_at_work,
    best_grid_at_work,
    cumulative_work,
    curve_time_to,
    episodes,
    fixed_reference,
    mean_std_pct,
    reached_text,
    references,
    same_cpu,
    spearman,
    split_of,
)
from reproductions.fedgraph.grid import (
    BUDGETS,
    DDPG_VARIANTS,
    GRID_VARIANTS,
    PAPER_TARGET,
    RELAPSE_VARIANTS,  # noqa: E402
    WORK_VARIANTS,
)
from reproductions._runner.prose import render  # noqa: E402

LEARNING_BLOCK = 10  # episodes per row of the learning table
LEARNING_WARMUP = 4  # blocks of LEARNING_BLOCK episodes in which every agent so far was still learning
DELTA = {
    "fedgraph": "the server's clock (the paper's)",
    "fedgraph-work": "work (GMAC, deterministic)",
    "fedgraph-client": "the slowest client's local training time",
    "fedgraph-work-lambda": "work (GMAC), the paper's Lambda",
    "fedgraph-work-td3": "work (GMAC), TD3's update rule",
    "fedgraph-work-floor": "work (GMAC), exploration noise >= 0.1",
}  # eq. 9's delta (and more), per variant


def block_row(block: list[dict], fixed: dict | None, grid: list[dict], by_work: bool, mark: str) -> list:
    """One block of episodes: its return, accuracy, time, work, the fixed and the best grid policy at the same
    work (or time), and the mean policy."""
    at = (
        [accuracy_at_work(fixed, e["gmacs"]) if by_work else accuracy_at(fixed, e["seconds"]) for e in block]
        if fixed
        else []
    )
    best = best_grid_at_work(grid, block)
    kappas = [float(np.mean([p[0] for p in e["policies"]])) for e in block if e["policies"]]
    probs = [float(np.mean([q for p in e["policies"] for q in p[1:]])) for e in block if e["policies"]]
    return [
        f"{block[0]['episode']}-{block[-1]['episode']}",
        f"{statistics.mean(e['return'] for e in block):.2f}",
        mean_std_pct([e["accuracy"] for e in block]),
        f"{statistics.mean(e['seconds'] for e in block):.2f}",
        f"{statistics.mean(e['gmacs'] for e in block):.3f}" if all(e["gmacs"] is not None for e in block) else "-",
        mean_std_pct([a for a in at if a is not None]) + mark if any(a is not None for a in at) else "-",
        (mean_std_pct([a for a in best if a is not None]) if any(a is not None for a in best) else "-")
        if by_work
        else "",
        f"{statistics.mean(kappas):.0f}" if kappas else "-",
        f"{statistics.mean(probs):.2f}" if probs else "-",
    ]


def learning_table(rows: list[dict], runs: list[dict]) -> str:
    """The agent over many episodes: blocks of LEARNING_BLOCK episodes, against the untrained agent (first block)
    and the fixed policy at the same wall time."""
    out = []
    for r in runs:
        eps = episodes(r)
        if not eps:
            continue
        fixed = fixed_reference(rows, r)
        by_work = r["variant"] in WORK_VARIANTS
        if by_work and fixed is not None and cumulative_work(fixed["curve"]) is None:
            fixed = None  # a fixed-policy cell from before the work count: no work axis
        grid = [g for g in references(rows, r, GRID_VARIANTS) if cumulative_work(g["curve"])] if by_work else []
        # accuracy at the same seconds compares only within one CPU model (work does not depend on it)
        mark = OTHER_CPU if fixed is not None and not by_work and not same_cpu(r, fixed) else ""
        body = [
            block_row(eps[b0 : b0 + LEARNING_BLOCK], fixed, grid, by_work, mark)
            for b0 in range(0, len(eps), LEARNING_BLOCK)
        ]
        last = [e for e in eps[-LEARNING_BLOCK:] if e["policies"]]
        per_client = np.mean([e["policies"] for e in last], axis=0) if last else None
        learned = (
            ""
            if per_client is None
            else f"Learned policies (mean over the last {len(last)} episodes), per client (nodes: kappa, p): "
            + "; ".join(
                f"{n}: {k:.0f}, {', '.join(f'{q:.2f}' for q in ps)}"
                for n, (k, *ps) in zip(r["client_nodes"], per_client.tolist())
            )
            + f". Spearman(size, kappa) {spearman(r['client_nodes'], per_client[:, 0].tolist())}.\n"
        )
        reward_by = DELTA[r["variant"]] + (
            f" {PAPER_TARGET[r['dataset']]:.2%}" if r["variant"] == "fedgraph-work-lambda" else ""
        )
        out += [
            f"**{r['dataset']}, variance {r['var']:g}, seed {r['seed']}, time penalty by {reward_by}** "
            f"({len(eps)} episodes of {eps[0]['rounds']} rounds, {r['cell_s'] / 60:.0f} min"
            f"{'; ' + r['stale'] if r['stale'] else ''})\n",
            table(
                [
                    "episodes",
                    "mean return",
                    "accuracy at episode end %",
                    "episode wall time (s)",
                    "episode work (GMAC)",
                    f"fixed policy at the same {'work' if by_work else 'time'} %",
                    "best grid policy at the same work % (chosen on test)",
                    "mean kappa",
                    "mean p",
                ],
                body,
            ),
            "",
            learned,
        ]
        if mark:
            out += [
                render(
                    "fedgraph/learning_other_cpu",
                    mark=OTHER_CPU,
                    fixed_cpu=fixed.get("cpu") or "a CPU it did not record",
                    agent_cpu=r.get("cpu") or "a CPU it did not record",
                )
                + "\n"
            ]
    return "\n".join(out)


FIG7_TARGET = {"Cora": TARGET, "CiteSeer": TARGET_HIGH["CiteSeer"]}  # CiteSeer's curves level off near 75%
FIG7_AXES = (("work", "GMAC", 3), ("client", "slowest-client s", 3), ("time", "run's clock s", 2))


def trained_agent_line(rows: list[dict], r: dict, wins: dict) -> tuple[list, bool] | None:
    """Fig. 7's line of one DDPG run (None under LEARNING_BLOCK episodes), and whether a baseline of another CPU
    is in it; on how many seeds the agent is ahead of each baseline is added to ``wins``."""
    eps = [e["curve"] for e in episodes(r)[-LEARNING_BLOCK:]]
    if len(eps) < LEARNING_BLOCK:
        return None
    target, horizon = FIG7_TARGET[r["dataset"]], len(eps[-1])  # the baselines within an episode's rounds

    def first(v: str) -> list[list] | None:
        ref = next(iter(references(rows, r, (v,))), None)
        return ref["curve"][:horizon] if ref else None

    refs = {v: next(iter(references(rows, r, (v,))), None) for v in ("full", "graphsage", "fixed")}
    bases = {v: ref["curve"][:horizon] if ref else None for v, ref in refs.items()}
    grid = [(v, curve_time_to(c, target, "work")) for v, c in ((v, first(v)) for v in GRID_VARIANTS) if c]
    best = min(((v, w) for v, w in grid if w is not None), key=lambda g: g[1], default=None)
    line = [r["dataset"], DELTA[r["variant"]], f"{r['seed']}{' (older code)' if r['stale'] else ''}"]
    marked = False
    for by, _, digits in FIG7_AXES:
        mine = [curve_time_to(c, target, by) for c in eps]
        theirs = {v: curve_time_to(b, target, by) if b else None for v, b in bases.items()}
        # seconds compare only within one CPU model; work (GMAC) does not depend on the machine
        other = {v for v, ref in refs.items() if by != "work" and ref is not None and not same_cpu(r, ref)}
        marked |= bool(other & {v for v, t in theirs.items() if t is not None})
        line.append(
            reached_text(mine, digits)
            + " / "
            + " / ".join(
                "-" if t is None else f"{t:.{digits}f}" + (OTHER_CPU if v in other else "") for v, t in theirs.items()
            )
        )
        reached = [x for x in mine if x is not None]
        for v, t in theirs.items():
            if reached and t is not None and v != "fixed" and v not in other:
                wins.setdefault((r["dataset"], r["variant"]), {}).setdefault((by, v), []).append(
                    statistics.mean(reached) < t
                )
    line.append("-" if best is None else f"{best[1]:.3f} ({best[0]})")
    return line, marked


def trained_agent_table(rows: list[dict], runs: list[dict]) -> str:
    """Fig. 7's comparison with a trained agent: per DDPG run of many episodes, the mean over its last block of
    LEARNING_BLOCK episodes (each restarts training) of the work, the slowest client's seconds and the run's clock
    to FIG7_TARGET, against the default budget's full-batch, GraphSAGE and fixed-policy cells of the same seed, split,
    synthesis and clients, and the least work to the target among the policy grid's fixed policies (chosen on the
    test accuracy itself: an upper bound for any fixed policy of the grid); then, per axis, on how many seeds the
    agent's mean is below each baseline."""
    body, wins, marked = [], {}, False
    for r in runs:
        if (done := trained_agent_line(rows, r, wins)) is not None:
            body.append(done[0])
            marked |= done[1]
    if not body:
        return ""
    counts = [
        [
            d,
            DELTA[variant],
            *[
                " / ".join(
                    f"{sum(c[(by, v)])} of {len(c[(by, v)])}" if (by, v) in c else "-" for v in ("full", "graphsage")
                )
                for by, _, _ in FIG7_AXES
            ],
        ]
        for (d, variant), c in wins.items()
    ]
    return (
        render(
            "fedgraph/trained_agent",
            cora=f"{FIG7_TARGET['Cora']:.0%}",
            citeseer=f"{FIG7_TARGET['CiteSeer']:.0%}",
            block=LEARNING_BLOCK,
            episode_rounds=BUDGETS["learning"]["fedgraph.episode-rounds"],
            table=table(
                [
                    "dataset",
                    "agent (time penalty by)",
                    "seed",
                    *[f"{n} to target: agent / full / GraphSAGE / fixed" for _, n, _ in FIG7_AXES],
                    "least grid work to target (policy)",
                ],
                body,
            ),
            other_cpu=f"\n\n{OTHER_CPU_NOTE}" if marked else "",
            counts=table(
                ["dataset", "agent (time penalty by)", *[f"{n}: ahead of full / GraphSAGE" for _, n, _ in FIG7_AXES]],
                counts,
            ),
        )
        + "\n\n"
    )


def stability_table(rows: list[dict], runs: list[dict]) -> str:
    """Per work-rewarded agent and seed: its best block of LEARNING_BLOCK episodes (least work per episode) against
    its last block, and the best grid policy at the last block's work: how much of what it learned it keeps."""
    body = []
    for r in runs:
        if r["variant"] not in RELAPSE_VARIANTS:
            continue
        eps = episodes(r)
        blocks = [eps[b : b + LEARNING_BLOCK] for b in range(0, len(eps), LEARNING_BLOCK)]
        blocks = [b for b in blocks if len(b) == LEARNING_BLOCK and all(e["gmacs"] is not None for e in b)]
        if len(blocks) < 2:
            continue
        work = [statistics.mean(e["gmacs"] for e in b) for b in blocks]
        ret = [statistics.mean(e["return"] for e in b) for b in blocks]
        best = int(np.argmin(work))
        grid = [g for g in references(rows, r, GRID_VARIANTS) if cumulative_work(g["curve"])]
        at = best_grid_at_work(grid, blocks[-1])
        last_acc = [e["accuracy"] for e in blocks[-1]]
        body.append(
            [
                r["dataset"],
                DELTA[r["variant"]],
                f"{r['seed']}{' (older code)' if r['stale'] else ''}",
                f"{work[0]:.3f}",
                f"{blocks[best][0]['episode']}-{blocks[best][-1]['episode']}: {work[best]:.3f}",
                f"{work[-1]:.3f}",
                f"{work[-1] / work[0] - 1:+.0%}",
                f"{max(work[LEARNING_WARMUP:]):.3f}" if len(work) > LEARNING_WARMUP else "-",
                f"{ret[best]:.2f} / {ret[-1]:.2f}",
                mean_std_pct(last_acc),
                mean_std_pct([a for a in at if a is not None]) if any(a is not None for a in at) else "-",
            ]
        )
    if not body:
        return ""
    return (
        render(
            "fedgraph/stability",
            block=LEARNING_BLOCK,
            after=LEARNING_WARMUP * LEARNING_BLOCK + 1,
            table=table(
                [
                    "dataset",
                    "agent (time penalty by)",
                    "seed",
                    "work, first block",
                    "best block: work",
                    "work, last block",
                    "last vs first",
                    "largest after learning",
                    "return best / last block",
                    "accuracy last block %",
                    "best grid policy at the same work %",
                ],
                body,
            ),
        )
        + "\n\n"
    )


TRAINED_CURVES = {
    "fedgraph-work": "agent, work-rewarded",
    "fedgraph": "agent, the paper's reward",
    "full": "full batch",
    "graphsage": "GraphSAGE",
    "fixed-k256-p0.1": "fixed kappa 256, p 0.1",
}


def trained_curves(every: list[dict], runs: list[dict], dataset: str) -> dict[str, tuple[list[float], list[float]]]:
    """Fig. 7's shape in work for a trained agent (:func:`trained_agent_table`): per curve of TRAINED_CURVES, the
    cumulative work and the accuracy per round of an episode, averaged over the last LEARNING_BLOCK episodes and the
    seeds (the baselines: the default budget's cells of the work-rewarded agent's seeds, their first rounds)."""
    out = {}
    finished = {id(r): episodes(r) for r in runs if r["dataset"] == dataset}
    agents = {
        v: [r for r in runs if r["dataset"] == dataset and r["variant"] == v and len(finished[id(r)]) >= LEARNING_BLOCK]
        for v in ("fedgraph-work", "fedgraph")
    }
    curves = {v: [e["curve"] for r in rs for e in finished[id(r)][-LEARNING_BLOCK:]] for v, rs in agents.items()}
    horizon = min((len(c) for cs in curves.values() for c in cs), default=0)
    for v in ("full", "graphsage", "fixed-k256-p0.1"):
        curves[v] = [ref["curve"] for r in agents["fedgraph-work"] for ref in references(every, r, (v,))]
    for v, cs in curves.items():
        cs = [c[:horizon] for c in cs if len(c) >= horizon and cumulative_work(c[:horizon])]
        if horizon and cs:
            out[v] = (
                np.mean([cumulative_work(c) for c in cs], axis=0).tolist(),
                np.mean([[x[2] for x in c] for c in cs], axis=0).tolist(),
            )
    return out if any(v in out for v in ("fedgraph-work", "fedgraph")) else {}


def learning_section(rows: list[dict], split: str) -> str:
    """The learning budget's tables of ``split`` (the DDPG agent over many episodes); '' without its cells."""
    runs = sorted(
        (
            r
            for r in rows
            if r.get("budget") == "learning"
            and split_of(r) == split
            and r.get("kind") == "run"
            and r["variant"] in DDPG_VARIANTS
        ),
        key=lambda r: (r["dataset"], r["var"], r["variant"], r["seed"]),
    )
    if not runs:
        return ""
    return (
        render("fedgraph/learning", split=split)
        + "\n\n"
        + trained_agent_table(rows, runs)
        + stability_table(rows, runs)
        + learning_table(rows, runs)
    )
