"""FedStar's grid and cell runner (``run.py`` is the command; its docstring says what a
cell is): which cells exist (:func:`cells`), their names and run configurations, how one is computed
(:func:`run_cell`: one federated run in process) and read back (:func:`row_of`), and how cells are kept in the
store. The tables and figures are ``report.py``."""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path

from reproductions._runner.cells import CellStore, prepare_run_dir  # noqa: E402
from reproductions._runner.common import REPO, data_dir  # noqa: E402

SETTINGS = ("CHEM", "BIO-CHEM", "BIO-CHEM-SN", "BIO-SN-CV")
TABLE1 = ("local", "local-decoupled", "fedavg", "fedprox", "fedper", "gcfl", "fedstar")
SEEDS = {"CHEM": (1, 2, 3, 4, 5), "BIO-CHEM": (1, 2, 3), "BIO-CHEM-SN": (1,), "BIO-SN-CV": (1,)}  # training seeds
SPLIT_SEED = 123  # the authors' seed_dataSplit
SPREAD_SPLITS = (123, 1, 2, 3, 4)  # --split-spread: CHEM over these split seeds, training seed 1
SPREAD_VARIANTS = ("fedstar", "local", "local-decoupled", "fedavg")
BASELINE_METHODS = ("fedavg", "fedprox", "fedper", "gcfl")  # methods of their own; the rest are fedstar.variant
# The modules that compute a cell's numbers (data, split, features, model, training, what is shared and how it is
# aggregated): a change to the code of any of them (not its docstrings) makes a cell stale. The orchestration around
# them (app/, records, evaluation scheduling) is left out: the loopback and in-process tests pin it.
SOURCES = (
    "flowergraph/tasks/graphcls/*.py",
    "flowergraph/tasks/compute.py",
    "flowergraph/tasks/datasets.py",
    "flowergraph/tasks/partition.py",
    "flowergraph/tasks/torch_state.py",
    "flowergraph/methods/fedstar/client.py",
    "flowergraph/methods/fedstar/__init__.py",
    "flowergraph/methods/graph.py",
    "flowergraph/methods/baselines/__init__.py",
    "flowergraph/strategies/base.py",
    "flowergraph/strategies/bank.py",
    "flowergraph/strategies/aggregation.py",
    "flowergraph/strategies/weighted.py",
    "flowergraph/methods/fedstar/server.py",
    "flowergraph/methods/gcfl/server.py",
)
STORE_NAME = "fedstar-paper-split"  # finished cells, committed (see the module docstring)
LEGACY = "fedstar"  # the store of the per-class split's cells (older code), for comparison only
LATE_ROUNDS = 50  # the steadier companion of the final-round number: the evaluations of the last 50 rounds
ABLATION_SHARING = ("fedstar", "share-all", "share-feature", "local-decoupled")
ABLATION_STRUCTURE = ("dse", "rwse", "ones")
LABELS = {
    "local": "Local (GIN)",
    "local-decoupled": "Local, FedStar's model",
    "fedavg": "FedAvg (GIN)",
    "fedprox": "FedProx (GIN, mu 0.01)",
    "fedper": "FedPer (GIN)",
    "gcfl": "GCFL (GIN)",
    "fedstar": "FedStar",
    "share-all": "share both encoders",
    "share-feature": "share the feature encoder",
    "fedavg-all": "FedAvg (GIN), hidden FC shared too",
}
# A control, not in Table 1: FedAvg with `graph.baseline-share=all` (the convolutions and the hidden FC(h, h), every
# layer whose shape does not depend on the dataset). Across datasets FedPer (all but the classifier, without the
# dataset-dependent input layer) shares exactly the convolutions, which is what FedAvg shares by default, so the
# two are one algorithm there; the paper reports them apart (FedPer +1.83 on CHEM). This control asks whether a
# FedAvg sharing the hidden FC too explains that (on CHEM it does not: +0.36 over FedAvg). Its rows appear once it
# has cells (`--variants fedavg-all`).
CONTROLS = ("fedavg-all",)


def datasets_of(setting: str) -> list[str]:
    from flowergraph.data import parse_graph_datasets

    return list(parse_graph_datasets(setting, offline_only=True, data_dir=data_dir()))


# The FedStar preset of each setting (conf/): they carry the GCFL authors' thresholds for its datasets.
PRESETS = {
    "CHEM": "fedstar-chem",
    "BIO-CHEM": "fedstar-bio-chem",
    "BIO-CHEM-SN": "fedstar-bio-chem-sn-offline",
    "BIO-SN-CV": "fedstar-bio-sn-cv-offline",
}


@functools.cache
def gcfl_eps(setting: str) -> tuple[float, float]:
    """GCFL's thresholds (eps1, eps2) for the setting's datasets, the GCFL authors' (their runnerfile's groups: CHEM
    "molecules", BIO-CHEM "biochem", the others "mix"), as the setting's preset carries them
    (tests/test_presets.py checks the presets against the package's table)."""
    from flowergraph.settings import load_preset, parse_run_config

    s = parse_run_config(load_preset(REPO / "conf" / f"{PRESETS[setting]}.toml"))
    return s["gcfl.eps1"], s["gcfl.eps2"]


Cell = tuple  # (setting, variant, seed, structure, split_seed)


def cell_name(setting: str, variant: str, seed: int, structure: str = "dse+rwse", split_seed: int = SPLIT_SEED) -> str:
    extra = "" if structure == "dse+rwse" else f"-{structure}"
    split = "" if split_seed == SPLIT_SEED else f"-split{split_seed}"
    return f"{setting}-{variant}{extra}-s{seed}{split}"


def cell_settings(
    setting: str, variant: str, seed: int, structure: str, split_seed: int, rounds: int, eval_every: int = 10
) -> dict:
    """The run configuration of a cell (without the machine's paths): what the store records beside its row."""
    names = datasets_of(setting)
    config = {
        "dataset": ",".join(names),
        "num-clients": len(names),
        "rounds": rounds,
        "seed": seed,
        "graph.split": "paper",
        "graph.split-seed": split_seed,
        "fedstar.structure": structure,
        "eval-every": eval_every,
    }
    if variant in BASELINE_METHODS:
        config["method"] = variant
    elif variant == "fedavg-all":
        config.update({"method": "fedavg", "graph.baseline-share": "all"})
    else:
        config.update({"method": "fedstar", "fedstar.variant": variant})
    if variant == "gcfl":  # the GCFL authors' thresholds for the same datasets
        config["gcfl.eps1"], config["gcfl.eps2"] = gcfl_eps(setting)
    return config


def run_cell(work: str, cell: Cell, rounds: int, eval_every: int = 10) -> dict:
    """One federated run (or its continuation from the last checkpoint); returns its row."""
    # run_in_process sets torch up as the Flower apps do (one thread, no denormals)
    from flowergraph.simulation import run_in_process
    from flowergraph.storage import read_run

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
    config = {
        **cell_settings(*cell, rounds, eval_every),
        "data-dir": data_dir(),
        "checkpoint-every": 50,
        "checkpoint-keep": 1,
        "out-dir": str(out),
        "state-dir": str(out / "client-state"),
    }
    if state == "resume":
        config["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
    started, cpu_started = time.perf_counter(), time.process_time()
    run_in_process(config)
    meta = out / "bench.json"
    previous = json.loads(meta.read_text()) if meta.exists() else {}
    # CPU seconds of this process (one torch thread): what the run cost, unaffected by other jobs or pauses
    meta.write_text(
        json.dumps(
            {
                "wall_s": previous.get("wall_s", 0.0) + time.perf_counter() - started,
                "cpu_s": previous.get("cpu_s", 0.0) + time.process_time() - cpu_started,
            }
        )
        + "\n"
    )
    read_run(out)  # written completely
    return row_of(out, cell)


def row_of(out: Path, cell: Cell) -> dict:
    from flowergraph.storage import read_run

    setting, variant, seed, structure, split_seed = cell
    run = read_run(out)
    last = [r for r in run["rounds"] if r.get("round", 0) >= 1][-1]
    meta = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    clients = {int(k): v.get("accuracy") for k, v in last.get("clients", {}).items() if v.get("accuracy") is not None}
    train_rounds = [r["time_s"] for r in run["rounds"] if r.get("round", 0) >= 1 and r.get("time_s")]
    late = [
        r["mean_client_accuracy"]
        for r in run["rounds"]
        if r.get("round", 0) > last["round"] - LATE_ROUNDS and r.get("mean_client_accuracy") is not None
    ]
    row = {
        "setting": setting,
        "variant": variant,
        "seed": seed,
        "structure": structure,
        "split_seed": split_seed,
        "accuracy": 100 * last["mean_client_accuracy"],
        "late": 100 * statistics.mean(late),
        "clients": clients,
        "rounds": last["round"],
        "wall_s": meta.get("wall_s"),
        "cpu_s": meta.get("cpu_s"),
        "round_s": statistics.median(train_rounds) if train_rounds else None,
        "rounds_s": sum(train_rounds),
        "curve": [
            [r["round"], r["mean_client_accuracy"]]
            for r in run["rounds"]
            if r.get("round", 0) >= 1 and r.get("mean_client_accuracy") is not None
        ],
    }
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
    """The cells of flowergraph's earlier per-class split (``cells/fedstar.jsonl.xz``: older code, recorded without
    its code state): for the comparison section only."""
    rows = []
    for row in CellStore(LEGACY).records():
        if row.get("rounds") == 200:
            rows.append(row)
    return rows


def cells(args) -> list[Cell]:
    """Every cell the command's arguments select, once each, in run order: Table 1's, then the ablations', then
    the split spread's."""
    out: list[Cell] = []
    if not args.only_extra:
        for setting in args.settings:
            seeds = args.seeds or SEEDS[setting]
            out += [(setting, v, s, "dse+rwse", SPLIT_SEED) for s in seeds for v in args.variants]
    first = (args.seeds or [1])[0]
    if args.ablation:
        out += [("BIO-CHEM", v, first, "dse+rwse", SPLIT_SEED) for v in ABLATION_SHARING]
        out += [("BIO-CHEM", "fedstar", first, k, SPLIT_SEED) for k in ABLATION_STRUCTURE]
    if args.split_spread:
        out += [("CHEM", v, 1, "dse+rwse", k) for k in SPREAD_SPLITS for v in SPREAD_VARIANTS]
    return list(dict.fromkeys(out))
