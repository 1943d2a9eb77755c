"""FedStar and its baselines on the paper's settings (Tan et al., AAAI 2023, Tables 1-3), with the paper's
numbers and, where known, the authors' code's side by side.

Every cell (setting x variant x training seed x structure x split seed) is a federated run of 200 rounds, 1 local
epoch, batch 128, Adam lr 1e-3, weight decay 5e-4, hidden 64, on the authors' split (scikit-learn's stratified
train_test_split with split seed 123, ``graph.split=paper``), run through flowergraph's real ServerApp and
ClientApp code in one process (:mod:`flowergraph.app.inprocess`: the strategy, the clients, their persistent state
and the records are those of a Flower run; Flower's transport is left out, which changes no number: tests check
the two agree to 1e-6). The reported accuracy is the paper's: each client's test accuracy after the last round,
averaged over clients; mean +- std over training seeds (the authors' seeds 1-5).

Resumable across sessions and fresh clones: a finished cell is kept in the repository
(``benchmarks/cells/fedstar-paper-split.jsonl.xz`` (``common.CellStore``), a few KB: its settings, its row, its accuracy curve and
the code state that produced it, see ``benchmarks/common.py: CellStore``) and skipped; its full run directory stays
under ``--work`` (ignored by git); a cell that was stopped resumes from its last checkpoint there (every 50
rounds). A cell computed by other code than the current one (another hash of the sources on FedStar's path) is
flagged in the tables; ``--rerun-stale`` runs it again. ``--jobs 2`` runs two cells at once (one thread each).
``tests/test_fedstar_cells.py`` re-runs a stored cell for 10 rounds and compares it with its stored curve.

    .venv/bin/python benchmarks/fedstar.py                   # Table 1: CHEM seeds 1-5, BIO-CHEM 1-3, others seed 1
    .venv/bin/python benchmarks/fedstar.py --settings CHEM --seeds 1 2 --jobs 2
    .venv/bin/python benchmarks/fedstar.py --ablation        # Tables 2 and 3 on BIO-CHEM (seed 1)
    .venv/bin/python benchmarks/fedstar.py --split-spread    # CHEM over 5 split seeds, training seed 1
    .venv/bin/python benchmarks/fedstar.py --tables-only     # rewrite the tables from finished cells

COLLAB is not in the offline dataset collection: BIO-CHEM-SN and BIO-SN-CV run without it (12 and 8 datasets
instead of 13 and 9), which the tables say. The cells of flowergraph's earlier per-class split (an unrecorded older
code state, ``benchmarks/cells/fedstar/``) are summarised at the end for comparison, never mixed in.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (REPO, CellStore, add_jobs, data_dir, prepare_run_dir, pyplot, run_cells,  # noqa: E402
                    run_dir_current, save_figure, table, write_result)

SETTINGS = ("CHEM", "BIO-CHEM", "BIO-CHEM-SN", "BIO-SN-CV")
TABLE1 = ("local", "local-decoupled", "fedavg", "fedprox", "fedper", "gcfl", "fedstar")
SEEDS = {"CHEM": (1, 2, 3, 4, 5), "BIO-CHEM": (1, 2, 3), "BIO-CHEM-SN": (1,), "BIO-SN-CV": (1,)}  # training seeds
SPLIT_SEED = 123  # the authors' seed_dataSplit
SPREAD_SPLITS = (123, 1, 2, 3, 4)  # --split-spread: CHEM over these split seeds, training seed 1
SPREAD_VARIANTS = ("fedstar", "local", "local-decoupled", "fedavg")
BASELINE_METHODS = ("fedavg", "fedprox", "fedper", "gcfl")  # methods of their own; the rest are fedstar.variant
# The authors' code (github.com/yuetan031/FedStar da01eace, seeds 1-5, this machine class; issue 21): CHEM only.
AUTHORS = {("CHEM", "fedstar"): 79.10, ("CHEM", "local"): 74.99}
AUTHORS_CLIENTS = {("CHEM", "fedstar"): (87.4, 83.9, 76.6, 71.1, 55.4, 98.8, 80.5)}
# The modules that compute a cell's numbers (data, split, features, model, training, what is shared and how it is
# aggregated): a change to the code of any of them (not its docstrings) makes a cell stale. The orchestration around
# them (app/, records, evaluation scheduling) is left out: the loopback and in-process tests pin it.
SOURCES = ("flowergraph/tasks/graphcls/*.py", "flowergraph/tasks/compute.py", "flowergraph/tasks/datasets.py",
           "flowergraph/tasks/partition.py", "flowergraph/tasks/torch_state.py", "flowergraph/clients/fedstar.py",
           "flowergraph/methods/fedstar.py", "flowergraph/methods/graph.py", "flowergraph/methods/baselines.py",
           "flowergraph/strategies/base.py", "flowergraph/strategies/bank.py", "flowergraph/strategies/aggregation.py",
           "flowergraph/strategies/weighted.py", "flowergraph/strategies/fedstar.py", "flowergraph/strategies/gcfl.py")
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
STORE_NAME = "fedstar-paper-split"  # finished cells, committed (see the module docstring)
LEGACY = "fedstar"  # the store of the per-class split's cells (older code), for comparison only
LATE_ROUNDS = 50  # the steadier companion of the final-round number: the evaluations of the last 50 rounds
ABLATION_SHARING = ("fedstar", "share-all", "share-feature", "local-decoupled")
ABLATION_STRUCTURE = ("dse", "rwse", "ones")
LABELS = {"local": "Local (GIN)", "local-decoupled": "Local, FedStar's model", "fedavg": "FedAvg (GIN)",
          "fedprox": "FedProx (GIN, mu 0.01)", "fedper": "FedPer (GIN)", "gcfl": "GCFL (GIN)", "fedstar": "FedStar",
          "share-all": "share both encoders", "share-feature": "share the feature encoder",
          "fedavg-all": "FedAvg (GIN), hidden FC shared too"}
# A control, not in Table 1: FedAvg with `graph.baseline-share=all` (the convolutions and the hidden FC(h, h), every
# layer whose shape does not depend on the dataset). Across datasets FedPer (all but the classifier, without the
# dataset-dependent input layer) shares exactly the convolutions, which is what FedAvg shares by default, so the
# two are one algorithm there; the paper reports them apart (FedPer +1.83 on CHEM). This control asks whether a
# FedAvg sharing the hidden FC too explains that (on CHEM it does not: +0.36 over FedAvg). Its rows appear once it
# has cells (`--variants fedavg-all`).
CONTROLS = ("fedavg-all",)


def datasets_of(setting: str) -> list[str]:
    from flowergraph.tasks.graphcls.data import parse_graph_datasets

    return list(parse_graph_datasets(setting, offline_only=True, data_dir=data_dir()))


Cell = tuple  # (setting, variant, seed, structure, split_seed)


def cell_name(setting: str, variant: str, seed: int, structure: str = "dse+rwse", split_seed: int = SPLIT_SEED) -> str:
    extra = "" if structure == "dse+rwse" else f"-{structure}"
    split = "" if split_seed == SPLIT_SEED else f"-split{split_seed}"
    return f"{setting}-{variant}{extra}-s{seed}{split}"


def cell_settings(setting: str, variant: str, seed: int, structure: str, split_seed: int, rounds: int,
                  eval_every: int = 10) -> dict:
    """The run configuration of a cell (without the machine's paths): what the store records beside its row."""
    names = datasets_of(setting)
    config = {"dataset": ",".join(names), "num-clients": len(names), "rounds": rounds, "seed": seed,
              "graph.split": "paper", "graph.split-seed": split_seed, "fedstar.structure": structure,
              "eval-every": eval_every}
    if variant in BASELINE_METHODS:
        config["method"] = variant
    elif variant == "fedavg-all":
        config.update({"method": "fedavg", "graph.baseline-share": "all"})
    else:
        config.update({"method": "fedstar", "fedstar.variant": variant})
    if variant == "gcfl":  # the GCFL authors' thresholds for the same datasets (strategies/gcfl.py: GCFL_EPS)
        from flowergraph.strategies.gcfl import GCFL_EPS

        config["gcfl.eps1"], config["gcfl.eps2"] = GCFL_EPS[setting]
    return config


def run_cell(work: str, cell: Cell, rounds: int, eval_every: int = 10) -> dict:
    """One federated run (or its continuation from the last checkpoint); returns its row."""
    # run_inprocess sets torch up as the Flower apps do (one thread, no denormals)
    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.storage.results import read_run

    out = Path(work) / cell_name(*cell)
    state = prepare_run_dir(out, SOURCES)  # a run folder of other code is removed, never read back
    if state == "completed":
        if json.loads((out / "summary.json").read_text()).get("rounds_completed") == rounds:
            return row_of(out, cell)
        if any((out / "checkpoints").glob("round-*.npz")):
            state = "resume"  # a finished shorter run continues to ``rounds``
        else:
            import shutil

            shutil.rmtree(out)
            state = prepare_run_dir(out, SOURCES)
    config = {**cell_settings(*cell, rounds, eval_every), "data-dir": data_dir(), "checkpoint-every": 50,
              "checkpoint-keep": 1, "out-dir": str(out), "state-dir": str(out / "client-state")}
    if state == "resume":
        config["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
    started, cpu_started = time.perf_counter(), time.process_time()
    run_inprocess(config)
    meta = out / "bench.json"
    previous = json.loads(meta.read_text()) if meta.exists() else {}
    # CPU seconds of this process (one torch thread): what the run cost, unaffected by other jobs or pauses
    meta.write_text(json.dumps({"wall_s": previous.get("wall_s", 0.0) + time.perf_counter() - started,
                                "cpu_s": previous.get("cpu_s", 0.0) + time.process_time() - cpu_started}) + "\n")
    read_run(out)  # written completely
    return row_of(out, cell)


def row_of(out: Path, cell: Cell) -> dict:
    from flowergraph.storage.results import read_run

    setting, variant, seed, structure, split_seed = cell
    run = read_run(out)
    last = [r for r in run["rounds"] if r.get("round", 0) >= 1][-1]
    meta = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    clients = {int(k): v.get("accuracy") for k, v in last.get("clients", {}).items() if v.get("accuracy") is not None}
    train_rounds = [r["time_s"] for r in run["rounds"] if r.get("round", 0) >= 1 and r.get("time_s")]
    late = [r["mean_client_accuracy"] for r in run["rounds"]
            if r.get("round", 0) > last["round"] - LATE_ROUNDS and r.get("mean_client_accuracy") is not None]
    row = {"setting": setting, "variant": variant, "seed": seed, "structure": structure, "split_seed": split_seed,
           "accuracy": 100 * last["mean_client_accuracy"], "late": 100 * statistics.mean(late), "clients": clients,
           "rounds": last["round"], "wall_s": meta.get("wall_s"), "cpu_s": meta.get("cpu_s"),
           "round_s": statistics.median(train_rounds) if train_rounds else None, "rounds_s": sum(train_rounds),
           "curve": [[r["round"], r["mean_client_accuracy"]] for r in run["rounds"]
                     if r.get("round", 0) >= 1 and r.get("mean_client_accuracy") is not None]}
    if meta.get("wall_s") is not None and meta["wall_s"] < 0.9 * sum(train_rounds):
        # stopped before it finished (its seconds until then were never written) and resumed from a checkpoint:
        # the CPU and wall seconds cover the resumed part only
        row["timing_partial"] = True
    if "gcfl" in last:  # GCFL: the final clusters (partition ids) and the rounds in which clusters split
        row["clusters"] = last["gcfl"]["clusters"]
        row["splits"] = [[s["round"], s["into"]] for r in run["rounds"] for s in r.get("gcfl", {}).get("split", [])]
    return row


def store_key(cell: Cell, rounds: int) -> str:
    """A cell's name in the store; runs shorter than the paper's 200 rounds (smoke tests) get their own."""
    return cell_name(*cell) + ("" if rounds == 200 else f"-r{rounds}")


def as_row(record: dict, store: CellStore) -> dict:
    row = dict(record["row"], clients={int(k): v for k, v in record["row"]["clients"].items()})
    row["stale"] = store.flag(record)
    return row


def load_cell(store: CellStore, cell: Cell, rounds: int, rerun_stale: bool = False) -> dict | None:
    """A finished cell's row from the committed store, or None (absent, run with another round count, or from
    other code when ``rerun_stale``)."""
    record = store.load(store_key(cell, rounds))
    if record is None or record["row"].get("rounds") != rounds or (rerun_stale and not store.current(record)):
        return None
    return as_row(record, store)


def keep_cell(store: CellStore, cell: Cell, row: dict, rounds: int, eval_every: int) -> dict:
    """Store a finished cell: its settings, its row (curve included) and the code state that produced it."""
    record = store.save(store_key(cell, rounds), cell_settings(*cell, rounds, eval_every), row)
    return as_row(record, store)


def legacy_rows() -> list[dict]:
    """The cells of flowergraph's earlier per-class split (``benchmarks/cells/fedstar/``: older code, recorded
    without its code state): for the comparison section only."""
    rows = []
    for row in CellStore(LEGACY).records():
        if row.get("rounds") == 200:
            rows.append(row)
    return rows


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


def values(rows: list[dict], setting: str, variant: str, structure: str = "dse+rwse", key: str = "accuracy",
           seed: int | None = None, split_seed: int | None = SPLIT_SEED) -> list:
    """``key`` of every finished cell of (setting, variant, structure, split seed), in row order; of one training
    seed if given; of every split seed if ``split_seed`` is None."""
    return [r[key] for r in rows if (r["setting"], r["variant"], r["structure"]) == (setting, variant, structure)
            and seed in (None, r["seed"]) and split_seed in (None, r.get("split_seed", SPLIT_SEED))]


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
        gaps.append([split_seed] + [f"{accs[v]:.2f}" if v in accs else "-" for v in have] +
                    [f"{accs['fedstar'] - accs[o]:+.2f}" if "fedstar" in accs and o in accs else "-"
                     for o in have if o != "fedstar"])
    tests = sorted(len(g) for g in _chem_test_sizes())
    return ["\n## The spread over splits (CHEM; not in the paper)\n",
            "The same runs on other train/val/test splits (the authors' scikit-learn split with split seeds "
            f"{', '.join(map(str, sorted(by_split)))}; training seed 1) beside the training seeds on "
            "split 123. "
            "Std = standard deviation of the mean client accuracy (number of runs):\n",
            table(["method", "over training seeds (split 123)", "std", "over splits (seed 1)", "std"], lines),
            "\nPer split (training seed 1), and FedStar's lead:\n",
            table(["split seed"] + [LABELS[v] for v in have] + [f"FedStar - {LABELS[o]}" for o in have
                                                                  if o != "fedstar"], gaps),
            f"\nCHEM's test sets have {', '.join(map(str, tests))} graphs: one test graph of the smallest moves "
            f"the mean over the 7 clients by {100 / 7 / tests[0]:.2f} points."] + pooled_pairs(rows)


def pooled_pairs(rows: list[dict]) -> list[str]:
    """Differences paired run by run over every CHEM run on the authors' split family: the training seeds on split
    123 and training seed 1 on the other split seeds (each (seed, split) pair once)."""
    runs: dict[str, dict[tuple[int, int], float]] = {}
    for r in rows:
        split_seed = r.get("split_seed", SPLIT_SEED)
        if (r["setting"], r["structure"]) == ("CHEM", "dse+rwse") and (split_seed == SPLIT_SEED or r["seed"] == 1):
            runs.setdefault(r["variant"], {})[(r["seed"], split_seed)] = r["accuracy"]
    lines = []
    for a, b in (("fedstar", "local"), ("fedstar", "fedavg"), ("fedstar", "local-decoupled"),
                 ("local-decoupled", "local")):
        common = sorted(set(runs.get(a, {})) & set(runs.get(b, {})))
        if len(common) < 2:
            continue
        diffs = [runs[a][k] - runs[b][k] for k in common]
        sd = statistics.stdev(diffs)
        lines.append([f"{LABELS[a]} - {LABELS[b]}", len(common), f"{statistics.mean(diffs):+.2f}", f"{sd:.2f}",
                      f"{sd / len(diffs) ** 0.5:.2f}", f"{min(diffs):+.2f} to {max(diffs):+.2f}",
                      sum(d > 0 for d in diffs)])
    if not lines:
        return []
    return ["\nPaired run by run over every CHEM run above (training seeds on split 123, training seed 1 on the "
            "other splits; each run is one (training seed, split seed)): `decoupled alone` is the last row, "
            "sharing the structure encoder on top of it the third:\n",
            table(["difference", "runs", "mean", "std", "std error", "range", "runs > 0"], lines)]


def _chem_test_sizes() -> list:
    from flowergraph.tasks.graphcls.data import GraphTaskSpec, client_graph_data

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
            lines.append([s, LABELS[v], len(common), f"{statistics.mean(diffs):+.2f}", sd,
                          " ".join(f"{d:+.2f}" for d in diffs), f"{p - pa:+.2f}" if p is not None else "-"])
    if not lines:
        return []
    return ["\n**The baselines against FedAvg (GIN)**, paired by training seed (percentage points; the seeds both "
            "have). FedPer equals FedAvg to the last digit across datasets: with the dataset-dependent input and "
            "output layers private, all but the classifier is the GIN convolutions, which FedAvg shares by default "
            "(`graph.baseline-share=convs`). The last row, where present, is FedAvg sharing the hidden FC too "
            "(`graph.baseline-share=all`):\n",
            table(["setting", "method", "seeds", "mean", "std", "per seed", "paper (difference of means)"], lines)]


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

        lines.append([s, len(seeds["fedstar"]), lead("fedstar", "local"), lead("fedstar", "fedavg"),
                      lead("fedstar", "local-decoupled"), lead("local-decoupled", "local"),
                      spread(list(seeds["fedstar"].values()))])
    if not lines:
        return []
    return ["\n## FedStar's lead, per setting\n",
            "Differences paired by training seed (split 123), averaged over the seeds both methods have. "
            "`decoupled alone` = Local with FedStar's model minus Local GIN "
            "(the part of the lead that needs no federation):\n",
            table(["setting", "seeds", "FedStar - Local", "FedStar - FedAvg", "FedStar - Local decoupled",
                   "decoupled alone", "FedStar seed std"], lines)]


def legacy_section() -> list[str]:
    rows = legacy_rows()
    if not rows:
        return []
    lines = []
    for s in SETTINGS:
        for v in ("local", "fedavg", "fedstar"):
            accs = [r["accuracy"] for r in rows if (r["setting"], r["variant"], r.get("structure")) ==
                    (s, v, "dse+rwse")]
            if accs:
                lines.append([s, LABELS[v], fmt(accs)])
    return ["\n## Before: flowergraph's per-class split (for comparison only)\n",
            "The earlier cells (`benchmarks/cells/fedstar/`, seeds 0-2): a per-class shuffle instead of the authors' "
            "split, FedAvg/FedProx sharing the hidden FC too, the first classifier layer after pooling; produced by "
            "an older code state that was not recorded (they do not reproduce exactly with today's code). Same "
            "protocol otherwise:\n", table(["setting", "method", "accuracy (per-class split)"], lines)]


def authors(variant: str, setting: str) -> str:
    value = AUTHORS.get((setting, variant))
    return "-" if value is None else f"{value:.2f}"


def tables(rows: list[dict], rounds: int, eval_every: int = 10) -> str:
    acc = functools.partial(values, rows)

    present = [s for s in SETTINGS if any(r["setting"] == s for r in rows)]
    sizes = {s: len(datasets_of(s)) for s in present}
    header = ["method"] + [f"{s} ({sizes[s]} datasets): ours \\| paper \\| authors' code" for s in present]
    shown = TABLE1 + tuple(v for v in CONTROLS if any(r["variant"] == v for r in rows))
    body = []
    for variant in shown:
        body.append([LABELS[variant]] + [f"{fmt(acc(s, variant))}{stale_mark(rows, s, variant)} \\| "
                                         f"{paper(variant, s)} \\| {authors(variant, s)}" for s in present])
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
    out = [f"Mean over clients of each client's test accuracy after round {rounds} (%), mean ± std over training "
           "seeds on the authors' split (split seed 123); the paper's numbers and the authors' code's (CHEM, run on "
           "this machine class, issue 21) are means over seeds 1-5. A cell marked † was computed by older code "
           "than the current one (listed at the end).\n", table(header, body),
           "\n**Gain over Local (GIN), percentage points** (ours | paper):\n",
           table(["method"] + present, gains),
           f"\n**The same, averaged over the evaluations of the last {LATE_ROUNDS} rounds** (clients evaluate "
           f"every {eval_every} rounds and after the last; rounds {max(1, rounds - LATE_ROUNDS + 1)}..{rounds}: "
           "the final round alone moves by a test graph or two on the small datasets: one MUTAG test graph is 0.75 "
           "points of CHEM's mean):\n", table(["method"] + present, late)] + against_fedavg(rows)
    lines = []
    for s in present:
        for variant in ("local", "local-decoupled", "fedstar"):
            clients = acc(s, variant, key="clients")
            if clients:
                per = [statistics.mean(100 * c[k] for c in clients) for k in range(len(datasets_of(s)))]
                lines.append([s, LABELS[variant]] + [f"{v:.1f}" for v in per])
            if (s, variant) in AUTHORS_CLIENTS:
                lines.append([s, LABELS[variant] + ", authors' code"]
                             + [f"{v:.1f}" for v in AUTHORS_CLIENTS[s, variant]])
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
    out += claims(rows) + split_spread(rows) + legacy_section()
    stale = [r for r in rows if r.get("stale")]
    if stale:
        out += ["\n**Cells from older code** (†: re-run them with `--rerun-stale`):\n",
                "\n".join(f"- {cell_name(r['setting'], r['variant'], r['seed'], r['structure'], r['split_seed'])}"
                          f"{r['stale']}" for r in stale)]
    timing = [[r["setting"], LABELS[r["variant"]] + ("" if r["structure"] == "dse+rwse" else f" ({r['structure']})"),
               r["seed"], r.get("split_seed", SPLIT_SEED),
               f"{r['cpu_s']:.0f}" if r.get("cpu_s") and not r.get("timing_partial") else "-",
               f"{r['wall_s']:.0f}" if r.get("wall_s") and not r.get("timing_partial") else
               f"{r['rounds_s']:.0f} (rounds only: resumed)" if r.get("rounds_s") else "-",
               f"{r['round_s']:.2f}" if r.get("round_s") else "-", f"{r['accuracy']:.2f}"] for r in rows]
    out += ["\n**Every cell**: its final mean client accuracy, CPU seconds of the run's process (one torch thread), "
            "wall seconds (other jobs on the 2 "
            "cores included), median training-round time. A cell stopped mid-run and resumed from its last "
            "checkpoint shows `-` for CPU and, as wall, the sum of its training-round times:\n",
            table(["setting", "method", "seed", "split seed", "CPU s", "wall s", "round s", "accuracy %"], timing)]
    return "\n".join(out)


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
            name = save_figure(fig, f"fedstar_{setting.lower()}_accuracy_vs_round.png")
            written.append(f"{name} (seed {seed})")
            break
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--variants", nargs="+", default=list(TABLE1), choices=list(LABELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=None,
                        help="training seeds (default: CHEM 1-5, BIO-CHEM 1-3, the others 1)")
    parser.add_argument("--ablation", action="store_true", help="the BIO-CHEM ablations (first seed)")
    parser.add_argument("--split-spread", action="store_true",
                        help=f"CHEM's {', '.join(SPREAD_VARIANTS)} over split seeds {SPREAD_SPLITS} (training seed 1)")
    parser.add_argument("--only-extra", action="store_true", help="with --ablation/--split-spread: not Table 1")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedstar-paper-split"))
    parser.add_argument("--tables-only", action="store_true", help="no new runs: the tables from finished cells")
    parser.add_argument("--rerun-stale", action="store_true", help="re-run cells computed by other code")
    add_jobs(parser)
    args = parser.parse_args()
    store = CellStore(STORE_NAME, SOURCES)
    cells: list[Cell] = []
    if not args.only_extra:
        for setting in args.settings:
            seeds = args.seeds or SEEDS[setting]
            cells += [(setting, v, s, "dse+rwse", SPLIT_SEED) for s in seeds for v in args.variants]
    first = (args.seeds or [1])[0]
    if args.ablation:
        cells += [("BIO-CHEM", v, first, "dse+rwse", SPLIT_SEED) for v in ABLATION_SHARING]
        cells += [("BIO-CHEM", "fedstar", first, k, SPLIT_SEED) for k in ABLATION_STRUCTURE]
    if args.split_spread:
        cells += [("CHEM", v, 1, "dse+rwse", k) for k in SPREAD_SPLITS for v in SPREAD_VARIANTS]
    cells = list(dict.fromkeys(cells))
    # every cell in the store goes into the tables (a table of CHEM alone still shows the rest); new runs only
    # for the cells asked for
    rows = {}
    for record in store.records():
        if record["row"].get("rounds") == args.rounds:
            row = as_row(record, store)
            rows[(row["setting"], row["variant"], row["seed"], row["structure"], row["split_seed"])] = row
    pending = []
    for cell in cells:
        out = Path(args.work) / cell_name(*cell)
        done = out / "summary.json"
        if load_cell(store, cell, args.rounds, args.rerun_stale) is not None:
            continue
        if done.exists() and json.loads(done.read_text()).get("rounds_completed") == args.rounds and \
                json.loads(done.read_text()).get("status") == "completed" and \
                (out / "bench.json").exists() and run_dir_current(out, SOURCES):
            rows[cell] = keep_cell(store, cell, row_of(out, cell), args.rounds, args.eval_every)  # finished in --work
        elif not args.tables_only:
            pending.append(cell)
    print(f"{len(rows)} finished cells in the store, {len(pending)} to run", flush=True)
    failed = []
    for (_, cell, _, _), result, error in run_cells(run_cell, [(args.work, c, args.rounds, args.eval_every)
                                                             for c in pending], args.jobs):
        if error is not None:
            print(f"{cell_name(*cell)} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(cell_name(*cell))
            continue
        row = rows[cell] = keep_cell(store, cell, result, args.rounds, args.eval_every)
        print(f"{cell_name(*cell)}: {row['accuracy']:.2f}% after {row['rounds']} rounds ({row['wall_s']:.0f} s)",
              flush=True)
    ordered = sorted(rows.values(), key=lambda r: (SETTINGS.index(r["setting"]), list(LABELS).index(r["variant"]),
                                                   r["structure"], r["split_seed"] != SPLIT_SEED, r["split_seed"],
                                                   r["seed"]))
    missing = [c for c in cells if c not in rows]
    body = (f"Settings as in the paper (App. A.3), client k owns dataset k; {args.rounds} rounds, 1 local epoch, "
            "batch 128, Adam lr 1e-3, weight decay 5e-4, hidden 64, 3 layers, dropout 0.5; the authors' split "
            "(scikit-learn's stratified train_test_split 80/20 then 50/50, split seed 123, `graph.split=paper`); "
            "FedAvg/FedProx share the GIN convolutions (`graph.baseline-share=convs`, the authors' server model); "
            "FedStar's first classifier layer per node before pooling (`fedstar.pool-order=per-node`, the authors' "
            f"code); client-side evaluation every {args.eval_every} rounds and after the last. In-process runs of the "
            f"real ServerApp/ClientApp code (flowergraph.app.inprocess), {os.cpu_count()} cores. Code state of the "
            f"current sources: {store.code['sources']} (commit {store.code['commit']}"
            f"{', dirty' if store.code['dirty'] else ''}). BIO-CHEM-SN and BIO-SN-CV run without COLLAB (not in the "
            "offline dataset collection); the paper's columns for them include it.\n\n"
            + tables(ordered, args.rounds, args.eval_every))
    plots = plot_settings(ordered)
    summary_plot = plot_summary(ordered)
    if summary_plot:
        body += f"\n\nTable 1 as a picture: `{summary_plot}`."
    if plots:
        body += "\n\nCurves (mean client accuracy vs round): " + ", ".join(f"`{p}`" for p in plots) + "."
    if missing:
        body += ("\n\n**Not run yet** (the table is resumable: the same command runs only these): "
                 + ", ".join(cell_name(*c) for c in missing))
    write_result("fedstar", "FedStar and baselines vs the paper (Tables 1-3)", body, cell_commands=store.commands())
    if failed:  # the tables above hold every cell that finished; the failed ones resume from their checkpoints
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


if __name__ == "__main__":
    main()
