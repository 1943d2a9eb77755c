"""FedStar and its baselines on the paper's settings (Tan et al., AAAI 2023, Tables 1-3), with the paper's
numbers side by side.

Every cell (setting x variant x seed) is a federated run of 200 rounds, 1 local epoch, batch 128, Adam lr 1e-3,
weight decay 5e-4, hidden 64, split seed 123 (the paper's protocol), run through flowergraph's real ServerApp
and ClientApp code in one process (:mod:`flowergraph.app.inprocess`: the strategy, the clients, their persistent
state and the records are those of a Flower run; Flower's transport is left out, which changes no number: tests
check the two agree to 1e-6). The reported accuracy is the paper's: each client's test accuracy after the last
round, averaged over clients; mean +- std over seeds.

Resumable across sessions and fresh clones: a finished cell's row and accuracy curve are kept in the repository
(``benchmarks/cells/fedstar/<cell>.json``, a few KB, committed with the table) and skipped; its full run
directory stays under ``--work`` (ignored by git); a cell that was stopped resumes from its last checkpoint
there (every 50 rounds). ``--jobs 2`` runs two cells at once (one thread each).

    .venv/bin/python benchmarks/fedstar.py                         # Table 1: all settings (seeds 0-2 on CHEM and
                                                                   #   BIO-CHEM, seed 0 elsewhere)
    .venv/bin/python benchmarks/fedstar.py --settings CHEM --seeds 0 1 2 --jobs 2
    .venv/bin/python benchmarks/fedstar.py --ablation              # Tables 2 and 3 on BIO-CHEM
    .venv/bin/python benchmarks/fedstar.py --tables-only           # rewrite the tables from finished cells

COLLAB is not in the offline dataset collection: BIO-CHEM-SN and BIO-SN-CV run without it (12 and 8 datasets
instead of 13 and 9), which the tables say.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, data_dir, table, write_result  # noqa: E402

SETTINGS = ("CHEM", "BIO-CHEM", "BIO-CHEM-SN", "BIO-SN-CV")
TABLE1 = ("local", "local-decoupled", "fedavg", "fedprox", "fedper", "gcfl", "fedstar")
MULTI_SEED = ("CHEM", "BIO-CHEM")  # >= 3 seeds here, 1 elsewhere (the minimum)
# Paper, Table 1 (mean over 5 seeds); local-decoupled = Table 2's "None, with decoupling" (no CHEM column).
PAPER = {
    "local": (75.38, 71.09, 69.37, 66.91), "fedavg": (75.26, 70.65, 68.92, 64.86),
    "fedprox": (75.30, 70.75, 69.21, 65.18), "fedper": (77.09, 71.97, 69.37, 62.23),
    "gcfl": (76.49, 71.60, 70.65, 66.31), "fedstar": (79.79, 74.54, 72.16, 69.49),
    "local-decoupled": (None, 74.08, 71.30, 68.76),
    "share-all": (None, 71.97, 69.85, 65.78), "share-feature": (None, 71.00, 68.53, 64.14),
}
PAPER_STD = {"fedstar": (2.44, 2.50, 2.43, 1.81), "local": (2.26, 1.21, 3.05, 2.84)}
# Paper, Table 3 (BIO-CHEM): structure embedding ablation.
PAPER_STRUCTURE = {"dse+rwse": 74.54, "dse": 74.42, "rwse": 72.74, "ones": 69.51}
STORE = REPO / "benchmarks" / "cells" / "fedstar"  # finished cells, committed (see the module docstring)
LATE_ROUNDS = 50  # the steadier companion of the final-round number: the evaluations of the last 50 rounds
ABLATION_SHARING = ("fedstar", "share-all", "share-feature", "local-decoupled")
ABLATION_STRUCTURE = ("dse", "rwse", "ones")
LABELS = {"local": "Local (GIN)", "local-decoupled": "Local, FedStar's model", "fedavg": "FedAvg (GIN)",
          "fedprox": "FedProx (GIN, mu 0.01)", "fedper": "FedPer (GIN)", "gcfl": "GCFL (GIN)", "fedstar": "FedStar",
          "share-all": "share both encoders", "share-feature": "share the feature encoder"}


def datasets_of(setting: str) -> list[str]:
    from flowergraph.tasks.graphcls.data import parse_graph_datasets

    return list(parse_graph_datasets(setting, offline_only=True, data_dir=data_dir()))


def cell_name(setting: str, variant: str, seed: int, structure: str = "dse+rwse") -> str:
    extra = "" if structure == "dse+rwse" else f"-{structure}"
    return f"{setting}-{variant}{extra}-s{seed}"


def run_cell(work: str, setting: str, variant: str, seed: int, rounds: int, structure: str = "dse+rwse",
             eval_every: int = 10) -> dict:
    """One federated run (or its continuation from the last checkpoint); returns its row."""
    from flowergraph.app.inprocess import run_inprocess  # sets torch up as the Flower apps do (one thread, no denormals)
    from flowergraph.storage.results import read_run

    out = Path(work) / cell_name(setting, variant, seed, structure)
    summary_file = out / "summary.json"
    if summary_file.exists():
        summary = json.loads(summary_file.read_text())
        if summary.get("status") == "completed" and summary.get("rounds_completed") == rounds:
            return row_of(out, setting, variant, seed, structure)
    names = datasets_of(setting)
    config = {"method": "fedstar", "dataset": ",".join(names), "num-clients": len(names), "rounds": rounds,
              "seed": seed, "fedstar.variant": variant, "fedstar.structure": structure, "data-dir": data_dir(),
              "eval-every": eval_every, "checkpoint-every": 50, "out-dir": str(out),
              "state-dir": str(out / "client-state")}
    if variant == "gcfl":  # the GCFL authors' thresholds for the same datasets (strategies/gcfl.py: GCFL_EPS)
        from flowergraph.strategies.gcfl import GCFL_EPS

        config["fedstar.gcfl-eps1"], config["fedstar.gcfl-eps2"] = GCFL_EPS[setting]
    if (out / "checkpoints").is_dir() and list((out / "checkpoints").glob("round-*.npz")):
        config["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
    elif out.exists():
        import shutil

        shutil.rmtree(out)
    started, cpu_started = time.perf_counter(), time.process_time()
    run_inprocess(config)
    meta = out / "bench.json"
    previous = json.loads(meta.read_text()) if meta.exists() else {}
    # CPU seconds of this process (one torch thread): what the run cost, unaffected by other jobs or pauses
    meta.write_text(json.dumps({"wall_s": previous.get("wall_s", 0.0) + time.perf_counter() - started,
                                "cpu_s": previous.get("cpu_s", 0.0) + time.process_time() - cpu_started}) + "\n")
    read_run(out)  # written completely
    return row_of(out, setting, variant, seed, structure)


def row_of(out: Path, setting: str, variant: str, seed: int, structure: str) -> dict:
    from flowergraph.storage.results import read_run

    run = read_run(out)
    last = [r for r in run["rounds"] if r.get("round", 0) >= 1][-1]
    meta = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    clients = {int(k): v.get("accuracy") for k, v in last.get("clients", {}).items() if v.get("accuracy") is not None}
    train_rounds = [r["time_s"] for r in run["rounds"] if r.get("round", 0) >= 1 and r.get("time_s")]
    late = [r["mean_client_accuracy"] for r in run["rounds"]
            if r.get("round", 0) > last["round"] - LATE_ROUNDS and r.get("mean_client_accuracy") is not None]
    row = {"setting": setting, "variant": variant, "seed": seed, "structure": structure,
           "accuracy": 100 * last["mean_client_accuracy"], "late": 100 * statistics.mean(late), "clients": clients,
           "rounds": last["round"], "wall_s": meta.get("wall_s"), "cpu_s": meta.get("cpu_s"),
           "round_s": statistics.median(train_rounds) if train_rounds else None, "rounds_s": sum(train_rounds)}
    if meta.get("wall_s") is not None and meta["wall_s"] < 0.9 * sum(train_rounds):
        # stopped before it finished (its seconds until then were never written) and resumed from a checkpoint:
        # the CPU and wall seconds cover the resumed part only
        row["timing_partial"] = True
    if "gcfl" in last:  # GCFL: the final clusters (partition ids) and the rounds in which clusters split
        row["clusters"] = last["gcfl"]["clusters"]
        row["splits"] = [[s["round"], s["into"]] for r in run["rounds"] for s in r.get("gcfl", {}).get("split", [])]
    return row


def store_file(cell: tuple, rounds: int) -> Path:
    """The stored row of a cell; runs shorter than the paper's 200 rounds (smoke tests) get their own files."""
    return STORE / f"{cell_name(*cell)}{'' if rounds == 200 else f'-r{rounds}'}.json"


def load_cell(cell: tuple, rounds: int) -> dict | None:
    """A finished cell's row from the committed store, or None (absent, or run with another round count)."""
    path = store_file(cell, rounds)
    if not path.exists():
        return None
    row = json.loads(path.read_text())
    row["clients"] = {int(k): v for k, v in row["clients"].items()}
    return row if row.get("rounds") == rounds else None


def keep_cell(out: Path, row: dict) -> dict:
    """Store a finished cell: its row and its curve (mean client accuracy after each evaluated round)."""
    from flowergraph.storage.results import read_run

    run = read_run(out)
    row = dict(row, curve=[[r["round"], r["mean_client_accuracy"]] for r in run["rounds"]
                           if r.get("round", 0) >= 1 and r.get("mean_client_accuracy") is not None])
    cell = (row["setting"], row["variant"], row["seed"], row["structure"])
    STORE.mkdir(parents=True, exist_ok=True)
    target = store_file(cell, row["rounds"])
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(row, indent=1) + "\n")
    tmp.replace(target)
    return row


def fmt(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f} (1 seed)"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} seeds)"


def paper(variant: str, setting: str) -> str:
    value = PAPER.get(variant, (None,) * 4)[SETTINGS.index(setting)]
    return "-" if value is None else f"{value:.2f}"


def values(rows: list[dict], setting: str, variant: str, structure: str = "dse+rwse", key: str = "accuracy",
           seed: int | None = None) -> list[float]:
    """``key`` of every finished cell of (setting, variant, structure), in row order; of one seed if given."""
    return [r[key] for r in rows if (r["setting"], r["variant"], r["structure"]) == (setting, variant, structure)
            and seed in (None, r["seed"])]


def tables(rows: list[dict], rounds: int, eval_every: int = 10) -> str:
    acc = functools.partial(values, rows)

    present = [s for s in SETTINGS if any(r["setting"] == s for r in rows)]
    sizes = {s: len(datasets_of(s)) for s in present}
    header = ["method"] + [f"{s} ({sizes[s]} datasets): ours \\| paper" for s in present]
    body = []
    for variant in TABLE1:
        body.append([LABELS[variant]] + [f"{fmt(acc(s, variant))} \\| {paper(variant, s)}" for s in present])
    gains = []
    for variant in TABLE1:
        cells = []
        for s in present:
            ours, local = acc(s, variant), acc(s, "local")
            p, pl = PAPER.get(variant, (None,) * 4)[SETTINGS.index(s)], PAPER["local"][SETTINGS.index(s)]
            mine = f"{statistics.mean(ours) - statistics.mean(local):+.2f}" if ours and local else "-"
            cells.append(f"{mine} \\| {p - pl:+.2f}" if p is not None else f"{mine} \\| -")
        gains.append([LABELS[variant]] + cells)
    late = [[LABELS[v]] + [fmt(acc(s, v, key="late")) for s in present] for v in TABLE1]
    out = [f"Mean over clients of each client's test accuracy after round {rounds} (%), mean ± std over seeds; "
           "the paper's numbers are means over 5 seeds.\n", table(header, body),
           "\n**Gain over Local (GIN), percentage points** (ours | paper):\n",
           table(["method"] + present, gains),
           f"\n**The same, averaged over the evaluations of the last {LATE_ROUNDS} rounds** (clients evaluate "
           f"every {eval_every} rounds and after the last; rounds {max(1, rounds - LATE_ROUNDS + 1)}..{rounds}: "
           "the final round alone moves by a test graph or two on the small datasets: one MUTAG test graph is 0.75 "
           "points of CHEM's mean):\n", table(["method"] + present, late)]
    lines = []
    for s in present:
        for variant in ("local", "local-decoupled", "fedstar"):
            clients = acc(s, variant, key="clients")
            if clients:
                per = [statistics.mean(100 * c[k] for c in clients) for k in range(len(datasets_of(s)))]
                lines.append([s, LABELS[variant]] + [f"{v:.1f}" for v in per])
    if lines:
        width = max(len(line) for line in lines)
        lines = [line + [""] * (width - len(line)) for line in lines]
        out += ["\n**Per client** (test accuracy %, mean over seeds; clients in the setting's dataset order: "
                + "; ".join(f"{s}: {', '.join(datasets_of(s))}" for s in present) + "):\n",
                table(["setting", "method"] + [f"client {k}" for k in range(width - 2)], lines)]
    abl = [r for r in rows if r["setting"] == "BIO-CHEM" and (r["variant"] in ABLATION_SHARING[1:3] or
                                                              r["structure"] != "dse+rwse")]
    if abl:
        seed = min(r["seed"] for r in abl)  # the ablations run on one seed: every row also on that seed alone

        def same_seed(variant, structure="dse+rwse"):
            return [f"{v[0]:.2f}" if v else "-" for v in (acc("BIO-CHEM", variant, structure, key, seed)
                                                          for key in ("accuracy", "late"))]

        share = [[LABELS[v], fmt(acc("BIO-CHEM", v)), *same_seed(v), paper(v, "BIO-CHEM")] for v in ABLATION_SHARING]
        struct = [[k, fmt(acc("BIO-CHEM", "fedstar", k)), *same_seed("fedstar", k), f"{v:.2f}"]
                  for k, v in PAPER_STRUCTURE.items()]
        cols = ["ours, all seeds", f"ours, seed {seed}", f"seed {seed}, last {LATE_ROUNDS} rounds", "paper"]
        out += ["\n## Ablations on BIO-CHEM (paper Tables 2 and 3)\n",
                f"The ablations run on seed {seed}; compare them with the other rows on that seed (the final-round "
                f"accuracy and its steadier companion, the mean over the evaluations of the last {LATE_ROUNDS} "
                "rounds).\n\n"
                "What the decoupled model shares (all with decoupling; the paper's rows without decoupling are "
                "not reproduced):\n", table(["shared"] + cols, share),
                "\nStructure embedding of FedStar (`fedstar.structure`; `ones` = an all-ones vector):\n",
                table(["structure embedding"] + cols, struct)]
    gcfl = [r for r in rows if r["variant"] == "gcfl" and "clusters" in r]
    if gcfl:
        from flowergraph.strategies.gcfl import GCFL_EPS

        lines = [[r["setting"], r["seed"], "{} / {}".format(*GCFL_EPS[r["setting"]]),
                  ", ".join(f"r{rnd}: {a} / {b}" for rnd, (a, b) in r["splits"]) or "none",
                  " ".join(str(c) for c in r["clusters"])] for r in gcfl]
        out += ["\n**GCFL's clusters** (the authors' thresholds eps1 / eps2 for these datasets; clients by partition "
                "id in the setting's dataset order):\n",
                table(["setting", "seed", "eps1 / eps2", "splits (round: one side / other)", "final clusters"],
                      lines)]
    timing = [[r["setting"], LABELS[r["variant"]] + ("" if r["structure"] == "dse+rwse" else f" ({r['structure']})"),
               r["seed"], f"{r['cpu_s']:.0f}" if r.get("cpu_s") and not r.get("timing_partial") else "-",
               f"{r['wall_s']:.0f}" if r.get("wall_s") and not r.get("timing_partial") else
               f"{r['rounds_s']:.0f} (rounds only: resumed)" if r.get("rounds_s") else "-",
               f"{r['round_s']:.2f}" if r.get("round_s") else "-"] for r in rows]
    out += ["\n**Every cell**: CPU seconds of the run's process (one torch thread), wall seconds (other jobs on the 2 "
            "cores included), median training-round time. A cell stopped mid-run and resumed from its last "
            "checkpoint shows `-` for CPU and, as wall, the sum of its training-round times:\n",
            table(["setting", "method", "seed", "CPU s", "wall s", "round s"], timing)]
    return "\n".join(out)


def plot_summary(rows: list[dict]) -> str | None:
    """Table 1 as a picture: per setting, each method's final mean client accuracy (bar: mean over seeds; black
    ticks: the seeds) with the paper's number (a white diamond): ``docs/results/fedstar_table1.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
                ax.plot(x, value, "D", color="white", markeredgecolor="black", markersize=5,
                        label="paper" if (i, j) == (0, 0) else None)
        ax.bar(xs, means, width, label=LABELS[variant], color=plt.cm.tab10(j))
    ax.set_xticks(range(len(present)), present)
    low = min(a for s in present for v in TABLE1 for a in values(rows, s, v))
    ax.set_ylim(max(0, low - 8), 100)
    ax.set_ylabel("mean client test accuracy after round 200 (%)")
    ax.set_title("FedStar and baselines: bars ours (mean over seeds), ticks the seeds, diamonds the paper",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    target = REPO / "docs" / "results" / "fedstar_table1.png"
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target.name


def plot_settings(rows: list[dict]) -> list[str]:
    """Per setting, the mean client accuracy of Table 1's methods against the round (first seed that has at least
    two of them), drawn from the stored curves: ``docs/results/fedstar_<setting>_accuracy_vs_round.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for setting in SETTINGS:
        seeds = sorted({r["seed"] for r in rows if r["setting"] == setting and r["structure"] == "dse+rwse"})
        for seed in seeds:
            have = [r for v in TABLE1 for r in rows if (r["setting"], r["variant"], r["seed"], r["structure"]) ==
                    (setting, v, seed, "dse+rwse") and r.get("curve")]
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
            fig.tight_layout()
            target = REPO / "docs" / "results" / f"fedstar_{setting.lower()}_accuracy_vs_round.png"
            fig.savefig(target, dpi=110)
            plt.close(fig)
            written.append(f"{target.name} (seed {seed})")
            break
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--variants", nargs="+", default=list(TABLE1), choices=list(LABELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="seeds for CHEM and BIO-CHEM (other settings: the first one unless --all-seeds)")
    parser.add_argument("--all-seeds", action="store_true", help="every seed on every setting")
    parser.add_argument("--ablation", action="store_true", help="the BIO-CHEM ablations (first seed)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedstar"))
    parser.add_argument("--tables-only", action="store_true", help="no new runs: the tables from finished cells")
    args = parser.parse_args()
    cells = []
    for setting in args.settings:
        seeds = args.seeds if setting in MULTI_SEED or args.all_seeds else args.seeds[:1]
        cells += [(setting, v, s, "dse+rwse") for s in seeds for v in args.variants]
    if args.ablation:
        cells += [("BIO-CHEM", v, args.seeds[0], "dse+rwse") for v in ABLATION_SHARING]
        cells += [("BIO-CHEM", "fedstar", args.seeds[0], k) for k in ABLATION_STRUCTURE]
    cells = list(dict.fromkeys(cells))
    rows, pending = [], []
    for cell in cells:
        out = Path(args.work) / cell_name(*cell)
        done = out / "summary.json"
        stored = load_cell(cell, args.rounds)
        if stored is not None:
            rows.append(stored)
        elif done.exists() and json.loads(done.read_text()).get("rounds_completed") == args.rounds and \
                json.loads(done.read_text()).get("status") == "completed":
            rows.append(keep_cell(out, row_of(out, *cell)))  # finished in --work, not yet in the store
        elif not args.tables_only:
            pending.append(cell)
    print(f"{len(rows)} finished cells kept, {len(pending)} to run", flush=True)
    if pending:
        import multiprocessing

        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run_cell, args.work, s, v, seed, args.rounds, k, args.eval_every):
                       (s, v, seed, k) for s, v, seed, k in pending}
            for future in as_completed(futures):
                row = future.result()
                rows.append(keep_cell(Path(args.work) / cell_name(*futures[future]), row))
                print(f"{cell_name(row['setting'], row['variant'], row['seed'], row['structure'])}: "
                      f"{row['accuracy']:.2f}% after {row['rounds']} rounds ({row['wall_s']:.0f} s)", flush=True)
    rows.sort(key=lambda r: (SETTINGS.index(r["setting"]), list(LABELS).index(r["variant"]), r["structure"],
                             r["seed"]))
    missing = [c for c in cells if not any((r["setting"], r["variant"], r["seed"], r["structure"]) == c
                                           for r in rows)]
    body = (f"Settings as in the paper (App. A.3), client k owns dataset k; {args.rounds} rounds, 1 local epoch, "
            "batch 128, Adam lr 1e-3, weight decay 5e-4, hidden 64, 3 layers, dropout 0.5, stratified 80/10/10 "
            "split with seed 123, client-side evaluation every "
            f"{args.eval_every} rounds and after the last. In-process runs of the real ServerApp/ClientApp code "
            f"(flowergraph.app.inprocess), {os.cpu_count()} cores. BIO-CHEM-SN and BIO-SN-CV run without COLLAB (not "
            "in the offline dataset collection); the paper's columns for them include it.\n\n"
            + tables(rows, args.rounds, args.eval_every))
    plots = plot_settings(rows)
    summary_plot = plot_summary(rows)
    if summary_plot:
        body += f"\n\nTable 1 as a picture: `{summary_plot}`."
    if plots:
        body += "\n\nCurves (mean client accuracy vs round): " + ", ".join(f"`{p}`" for p in plots) + "."
    if missing:
        body += ("\n\n**Not run yet** (the table is resumable: the same command runs only these): "
                 + ", ".join(cell_name(*c) for c in missing))
    write_result("fedstar", "FedStar and baselines vs the paper (Tables 1-3)", body)


if __name__ == "__main__":
    main()
