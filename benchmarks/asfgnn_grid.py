"""ASFGNN's benchmark grid and cell runner (``benchmarks/asfgnn.py`` is the command; its docstring says what each
part computes): which cells exist (:func:`grid`), their run configurations, how one is computed (:func:`run_cell`:
one ASFGNN search in process), the wall time over stopped segments, and parking a stopped cell's progress in the
repository (:func:`park_run`, :func:`unpark`); with the paper's numbers for those cells. The tables are
``asfgnn_report.py``, the figures ``asfgnn_figures.py``."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.cells import RUN_CODE, _sources_hash, prepare_run_dir, remove_run_folder, run_dir_current  # noqa: E402
from reproductions._runner.common import REPO, data_dir  # noqa: E402

BUDGETS = {
    "paper": {"asfgnn.trials": 100, "asfgnn.trial-rounds": 200},
    "long": {"asfgnn.trials": 10, "asfgnn.trial-rounds": 100},
    "tuning": {"asfgnn.trials": 40, "asfgnn.trial-rounds": 24},
    "default": {"asfgnn.trials": 8, "asfgnn.trial-rounds": 24},
    "quick": {"asfgnn.trials": 3, "asfgnn.trial-rounds": 10},
}
METHODS = ("cm", "fl", "sp", "sfgnn-nojs", "sfgnn")
ALPHAS = (0.6, 0.7, 0.8, 0.9, 1.0)
DRIVERS = ("smac", "grid", "random")
LANES = ("smac", "smac-gp", "grid", "random")  # Table 7's rows: SMAC's two facades, grid, random
LABELS = {
    "cm": "CM (centralized)",
    "fl": "FL (FedAvg, whole model)",
    "sp": "SP (each client alone)",
    "sfgnn": "SFGNN (JS mixing)",
    "sfgnn-nojs": "SFGNN without JS",
}
# The paper's numbers: Table 3 (alpha = 1), Table 5 (graph split), Table 6 (Cora, without / with JS), Table 7 (Cora,
# hours of tuning: grid, BO; the table gives a 17.10 speed-up, the text 10.10)
PAPER3 = {
    "Cora": {"cm": 0.8150, "fl": 0.8833, "sp": 0.9101, "sfgnn": 0.9264},
    "CiteSeer": {"cm": 0.7001, "fl": 0.7500, "sp": 0.7823, "sfgnn": 0.8055},
}
PAPER5 = {"Cora": {"fl": 0.7525, "sfgnn": 0.7986}, "CiteSeer": {"fl": 0.7020, "sfgnn": 0.7583}}
PAPER6 = {
    1.0: (0.9081, 0.9264),
    0.9: (0.8226, 0.8494),
    0.8: (0.7692, 0.7931),
    0.7: (0.7120, 0.7338),
    0.6: (0.7018, 0.7138),
}


# Fig. 3 has no numbers in the paper's text, but the text states which curve is on top where (Sec. 5.2.3):
# SFGNN above SP and FL for alpha > 0.75, FL the best for 0.5 <= alpha < 0.75, SP above FL for 0.88 < alpha <= 1
def paper_fig3(alpha: float) -> tuple[str, str]:
    """(the best of SFGNN / FL / SP, the better of SP / FL) at alpha, as the paper's text states them."""
    return ("SFGNN" if alpha > 0.75 else "FL"), ("SP" if alpha > 0.88 else "FL")


PAPER7 = {"grid_h": 6.67, "bo_h": 0.39, "speedup": 17.10}
# Table 4, Cora: SFGNN's clients A and B (K, lr, L2, d); hidden size not given (128, the core check's)
TABLE4 = {
    "asfgnn.hidden": 128,
    "asfgnn.depth": "4,2",
    "asfgnn.lr": "0.01",
    "asfgnn.l2": "0.005",
    "asfgnn.dropout": "0.5",
}
SOURCES = (
    "flowergraph/tasks/asfgnn/*.py",
    "flowergraph/tasks/datasets.py",
    "flowergraph/tasks/splits.py",
    "flowergraph/tasks/federated_graph.py",
    "flowergraph/tasks/torch_state.py",
    "flowergraph/tasks/compute.py",
    "flowergraph/wire/asfgnn.py",
    "flowergraph/clients/asfgnn.py",
    "flowergraph/strategies/asfgnn.py",
    "flowergraph/methods/asfgnn.py",
    "flowergraph/strategies/base.py",
    "flowergraph/strategies/updates.py",  # base.py's round replies -> updates since 01c7304
    "flowergraph/strategies/bank.py",
    "flowergraph/strategies/aggregation.py",
    "flowergraph/clients/base.py",
    "flowergraph/clients/state.py",
)
STORE = "asfgnn"
# The sources hash (cell_store.code_state) of older code whose cells this code repeats, by the hash of this code: a
# refactor that changes no computation (and so no number) still changes the hash, and every stored cell would read
# "older code" and no parked cell resume. An entry is added only after `benchmarks/asfgnn.py --check-repeats`
# recomputed stored cells of that older code with this code and every row repeated to the last digit; it applies to
# this code only (any change to SOURCES gives a new hash, which has no entries until checked again).
SAME_AS: dict[str, dict[str, str]] = {
    "4c0b81e9bc8bb37f": {  # the merge of main after 20309eb (strategies/base.py's round replies -> updates.py)
        "05a7960ea3c6ffed": "2026-12-03, the quick budget's 11 stored cells (Table 3 on Cora and CiteSeer: CM, FL, SP, "
        "SFGNN; the control's 3) recomputed on this code, every row repeated to the last digit",
        "e646c73c87bf8802": "2026-12-03, Table 6's sizes control at alpha 0.9 (long budget, paper-independent, SFGNN "
        "without JS, seed 2) recomputed on this code, its row repeated to the last digit",
    },
    "e646c73c87bf8802": {  # 7251f46 (asfgnn.sizes added; issue 70's refactors before it)
        "05a7960ea3c6ffed": "2026-12-03, 14 stored cells recomputed, every row repeated to the last digit: the quick "
        "budget's 11 (Table 3 on Cora and CiteSeer: CM, FL, SP, SFGNN; the control's 3), Table 6's alpha 0.9 at the "
        "default budget (seed 9, with and without JS), Table 5's Cora SFGNN at the default budget (seed 2; stored "
        "before its oracle_test column)"
    },
}


def same_computation(sources: str) -> set[str]:
    """The sources hashes whose cells the code of hash ``sources`` repeats (itself included; see ``SAME_AS``)."""
    return {sources, *SAME_AS.get(sources, {})}


def store():
    """The cell store, a cell of code in :func:`same_computation` counted as current."""
    from reproductions._runner.cells import CellStore

    class Store(CellStore):
        def current(self, record: dict | None) -> bool:
            return record is not None and record.get("code", {}).get("sources") in same_computation(
                self.code["sources"]
            )

    return Store(STORE, SOURCES)


def run_config(
    dataset: str,
    method: str,
    *,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    search: str = "smac",
    budget: str = "default",
    facade: str = "hpo",
    fixed: dict | None = None,
    sizes: str = "disjoint",
    local_steps: int = 1,
) -> dict:
    """A cell's run configuration (without the machine's paths); ``sizes`` and ``local_steps`` are set only when
    not the defaults (so the configurations of the cells stored before they existed are unchanged)."""
    config = {
        "method": "asfgnn-cm" if method == "cm" else "asfgnn",
        "dataset": dataset,
        "num-clients": 2,
        "seed": seed,
        "asfgnn.setting": setting,
        "asfgnn.alpha": alpha,
    }
    if sizes != "disjoint":
        config["asfgnn.sizes"] = sizes
    if local_steps != 1:
        config["asfgnn.local-epochs"] = local_steps
    if method != "cm":
        config["asfgnn.variant"] = "sfgnn" if method.startswith("sfgnn") else method
        if method == "sfgnn-nojs":
            config["asfgnn.js"] = False
    if fixed is not None:  # one trial with fixed values
        config.update(
            {
                "asfgnn.search": "none",
                "asfgnn.trials": 1,
                "asfgnn.trial-rounds": BUDGETS[budget]["asfgnn.trial-rounds"],
                **fixed,
            }
        )
    else:
        config.update({"asfgnn.search": search, **BUDGETS[budget]})
        if search == "smac":
            config["asfgnn.smac-facade"] = facade
    config["rounds"] = config["asfgnn.trials"] * (config["asfgnn.trial-rounds"] + 1)
    return config


def completed(out: Path) -> bool:
    """Whether the run folder ``out`` holds a finished run of the code as it is now."""
    summary = out / "summary.json"
    return (
        summary.exists()
        and json.loads(summary.read_text()).get("status") == "completed"
        and run_dir_current(out, SOURCES)
    )


def run_cell(work: Path, name: str, config: dict, parked_root: Path | None = None) -> dict:
    """Run ``config`` in process (resuming a stopped run from its last checkpoint, or from the cell's parked
    progress, :func:`unpark`); the search summary, the trials and the wall time."""
    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.storage.results import read_run

    out = work / name
    if (parked := parked_path(name, parked_root)).exists():
        unpark(out, parked, _sources_hash(SOURCES))
    full = {
        **config,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "state-dir": str(out / "client-state"),
        "checkpoint-every": config["asfgnn.trial-rounds"] + 1,  # a checkpoint after every trial
        "checkpoint-keep": 1,
    }
    state = prepare_run_dir(out, SOURCES)  # a run folder of other code is removed, never read back
    if state != "completed":
        if state == "resume":
            full["resume-from"] = str(out)
        meta = out / "bench.json"
        wall = segments_before(out)
        # an open segment: if this process is stopped, the next one counts it up to its last recorded round
        meta.write_text(json.dumps({"wall_s": wall, "open_since": time.time()}) + "\n")
        started = time.perf_counter()
        with _temp_inside(out):
            run_inprocess(full)
        meta.write_text(json.dumps({"wall_s": wall + time.perf_counter() - started}) + "\n")
    run = read_run(out)
    search = run["summary"]["search"]
    trials = [r["trial_result"] for r in run["rounds"] if "trial_result" in r]
    wall = json.loads((out / "bench.json").read_text())["wall_s"]
    # the control "selected on test": the best mean client test accuracy over every evaluation of every trial
    # (CM: over the owners' nodes, as accuracy() reports it)
    key = "owner_mean_test" if config["method"] == "asfgnn-cm" else "mean_test"
    evaluations = [r["asfgnn"] for r in run["rounds"] if key in (r.get("asfgnn") or {})]
    return {
        "best_trial": search["best_trial"],
        "best_config": search["best_config"],
        "best_val": search["best_val_accuracy"],
        "test": search["best_test_accuracy"],
        "oracle_test": max((e[key] for e in evaluations), default=None),
        "trials": [
            {
                "trial": t["trial"],
                "best_val": t["best_val"],
                "test": t["test_at_best"],
                "owner_test": t["owner_test_at_best"],
                "time_s": t["time_s"],
                "config": t["config"],
            }
            for t in trials
        ],
        "wall_s": wall,
    }


@contextlib.contextmanager
def _temp_inside(out: Path) -> Iterator[None]:
    """Python's temporary files inside the run folder ``out`` while a cell computes: SMAC's folder (the driver's
    own temporary folder, removed when the driver is collected or the process exits normally) stays with the run
    when the process is killed (parking kills the process group), and is removed with the run folder, instead of
    being left in the machine's temp directory."""
    import shutil
    import tempfile

    temp, previous = out / "tmp", tempfile.tempdir
    shutil.rmtree(temp, ignore_errors=True)  # a killed segment's leftovers
    temp.mkdir(parents=True)
    tempfile.tempdir = str(temp)
    try:
        yield
    finally:
        tempfile.tempdir = previous
        shutil.rmtree(temp, ignore_errors=True)


def compute_cell(work: Path, name: str, config: dict, meta: dict) -> dict:
    """A cell's row: ``meta``, :func:`run_cell`'s numbers and the seconds the cell took here (``cell_s``)."""
    started = time.perf_counter()
    row = {**meta, **run_cell(work, name, config)}
    row["cell_s"] = time.perf_counter() - started
    return row


def segments_before(out: Path) -> float:
    """The wall seconds of a run folder's earlier segments (``bench.json``), a segment that was stopped before it
    finished counted from its start to its last round in ``rounds.jsonl`` (its rounds after the last checkpoint
    are run again, so they count twice, as they cost twice)."""
    meta = out / "bench.json"
    previous = json.loads(meta.read_text()) if meta.exists() else {}
    wall = previous.get("wall_s", 0.0)
    if (opened := previous.get("open_since")) is not None and (rounds := out / "rounds.jsonl").exists():
        ended = [json.loads(line).get("ended_at") for line in rounds.read_text().splitlines() if line.strip()]
        ended = [e for e in ended if e is not None and e >= opened]
        wall += max(ended) - opened if ended else 0.0
    return wall


# ------------------------------------------------------------------------------------------------------ parking
# A paper-budget cell takes 3-5 h of one core, longer than a working session here, and its run folder under --work
# does not outlive the machine it ran on. `--park` keeps a stopped cell's progress in the repository instead:
# benchmarks/cells/asfgnn/parked/<cell>.json.xz holds its last checkpoint, which is always taken between two
# trials (checkpoint-every = T + 1), without the two things the next trial replaces before it reads them: the
# global arrays (reset to the next trial's initial model when it starts) and the clients' state files (a client
# whose stored model belongs to another trial starts afresh, from seeds of (seed, client, trial round) alone).
# The finished trials, the search driver's state (SMAC is rebuilt from it), every round record and the wall
# time so far are kept; a round record only with what the cell's row (run_cell) and the resumed run's summary
# read (PARKED_ROUND_KEYS: a full record is ~1 KB, and a paper-budget cell has 20,100 of them; benchmarks/cells
# stays under 5 MB, tests/test_cell_store.py), so the resumed run's rounds.jsonl has the parked rounds slim.
# run_cell restores a parked cell into its run folder when that folder holds nothing newer,
# and the stored cell's row is the uninterrupted run's (tests/test_bench_asfgnn_park.py). A parked file of other
# code (another sources hash) is never restored: its run computed something else.
PARKED = "parked"
#: What a parked round record keeps (see the comment above): the trial bookkeeping, the "selected on test" control's
#: evaluations, and what RunRecorder.summary sums.
PARKED_ROUND_KEYS = (
    "round",
    "phase",
    "trial",
    "trial_round",
    "trial_closing",
    "trial_result",
    "accuracy",
    "time_s",
    "bytes_down",
    "bytes_up",
)
PARKED_ASFGNN_KEYS = ("mean_test", "owner_mean_test")


def slim_record(record: dict) -> dict:
    """Round record ``record`` as a parked file keeps it (:data:`PARKED_ROUND_KEYS`)."""
    out = {k: record[k] for k in PARKED_ROUND_KEYS if k in record}
    if isinstance(record.get("asfgnn"), dict):
        out["asfgnn"] = {k: record["asfgnn"][k] for k in PARKED_ASFGNN_KEYS if k in record["asfgnn"]}
    return out


def parked_dir(root: Path | None = None) -> Path:
    """The folder of parked cells (``root``: another folder than the repository's, for tests)."""
    return root or REPO / "benchmarks" / "cells" / STORE / PARKED


def parked_path(name: str, root: Path | None = None) -> Path:
    """Where cell ``name`` is parked."""
    return parked_dir(root) / f"{name}.json.xz"


def park_run(out: Path) -> dict:
    """The parked form of run folder ``out``'s latest checkpoint (see the comment above): a JSON-able dict."""
    from flowergraph.storage.checkpoint import load_checkpoint
    from flowergraph.storage.npzio import pack_tree

    ckpt = load_checkpoint(out)
    trial = (ckpt.strategy_state.get("asfgnn") or {}).get("trial")
    if trial is not None and not trial.get("finished"):
        raise ValueError(
            f"{out}: the checkpoint of round {ckpt.server_round} is inside trial {trial['index']}; "
            "only a checkpoint between trials can be parked (the clients' state would be lost)"
        )
    arrays: dict = {}
    state = pack_tree({**ckpt.strategy_state, "client_checkpoint": None}, arrays, "strategy", what="parked state")
    if arrays:
        raise ValueError(f"{out}: the strategy state holds arrays ({sorted(arrays)}); parking keeps JSON only")
    marker = json.loads((out / RUN_CODE).read_text())
    return {
        "format": "flowergraph-asfgnn-parked",
        "cell": out.name,
        "sources": marker["sources"],
        "round": ckpt.server_round,
        "arrays": [[list(a.shape), str(a.dtype)] for a in ckpt.arrays],
        "strategy_state": state,
        "records": [slim_record(r) for r in ckpt.records],
        "config": ckpt.config,
        "trials_finished": len((ckpt.strategy_state.get("asfgnn") or {}).get("results") or []),
        "wall_s": segments_before(out),
        "parked_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def write_parked(parked: dict, path: Path) -> int:
    """Write ``parked`` to ``path`` (xz-compressed JSON, atomically); its size in bytes."""
    import lzma

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(lzma.compress(json.dumps(parked, separators=(",", ":")).encode(), preset=9))
    tmp.replace(path)
    return path.stat().st_size


def read_parked(path: Path) -> dict:
    import lzma

    return json.loads(lzma.decompress(path.read_bytes()))


def unpark(out: Path, path: Path, sources: str) -> bool:
    """Restore the parked cell at ``path`` into run folder ``out`` (a checkpoint ``resume-from`` reads, and the
    wall time so far), unless ``out`` already holds a run of this code at that round or later, or the parked
    run is of other code (``sources`` is the code state now). Whether it restored."""

    import numpy as np
    from flowergraph.storage.checkpoint import (
        Checkpoint,
        checkpoint_file,
        find_checkpoint,
        round_of_file,
        save_checkpoint,
    )
    from flowergraph.errors import CheckpointError
    from flowergraph.storage.npzio import unpack_tree

    parked = read_parked(path)
    if parked.get("sources") not in same_computation(sources):
        print(
            f"WARNING: {path} was parked by other code (sources {parked.get('sources')}, now {sources}); it is "
            "not restored: delete it, or re-run the cell from scratch",
            file=sys.stderr,
            flush=True,
        )
        return False
    if out.exists() and run_dir_current(out, SOURCES):
        if completed(out):
            return False
        try:
            newest = round_of_file(find_checkpoint(out))
        except CheckpointError:  # no checkpoint in the folder: restore
            newest = None
        if newest is not None and newest >= int(parked["round"]):
            return False
    remove_run_folder(out)
    (out / "checkpoints").mkdir(parents=True)
    (out / RUN_CODE).write_text(json.dumps({"sources": sources}) + "\n")  # as prepare_run_dir marks a folder
    arrays = [np.zeros(shape, dtype=dtype) for shape, dtype in parked["arrays"]]  # replaced when the next trial starts
    save_checkpoint(
        Checkpoint(
            server_round=int(parked["round"]),
            arrays=arrays,
            strategy_state=unpack_tree(parked["strategy_state"], {}),
            records=parked["records"],
            config=parked["config"],
        ),
        checkpoint_file(out, int(parked["round"])),
    )
    (out / "bench.json").write_text(json.dumps({"wall_s": float(parked["wall_s"])}) + "\n")
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    print(
        f"restored {out.name} from {shown} (parked {parked['parked_at']}: "
        f"{parked['trials_finished']} trials, round {parked['round']})",
        flush=True,
    )
    return True


def grid(args) -> list[tuple[str, dict, dict]]:
    """(name, run configuration, row metadata) of every cell the command's arguments select, in the order asked for,
    each once (Table 3's alpha = 1 cells are also Table 6's)."""
    out: dict[str, tuple[str, dict, dict]] = {}
    b = args.budget

    def cell(name: str, config: dict, meta: dict) -> None:
        out.setdefault(name, (name, config, meta))

    def tuned(dataset, method, seed, setting="label", alpha=1.0, sizes="disjoint", steps=1):
        # Table 6's controls (their own kinds, so no other table mixes them in): the paper's client sizes, and
        # more local steps per round
        kind, tag, extra = "tuned", "", {}
        if sizes != "disjoint":
            kind, tag, extra = "sizes", f"{sizes}-", {"sizes": sizes}
        elif steps != 1:
            kind, tag, extra = "steps", f"steps{steps}-", {"local_steps": steps}
        name = f"tuned-{dataset}-{setting}-a{alpha:.1f}-{tag}{method}-{b}-{args.facade}-s{seed}"
        config = run_config(
            dataset,
            method,
            setting=setting,
            alpha=alpha,
            seed=seed,
            budget=b,
            facade=args.facade,
            sizes=sizes,
            local_steps=steps,
        )
        meta = {"kind": kind, "dataset": dataset, "setting": setting, "alpha": alpha, "method": method}
        cell(name, config, {**meta, **extra, "budget": b, "seed": seed})

    def picked(*methods: str) -> list[str]:
        return [m for m in args.methods if m in methods]

    for seed in args.seeds:
        if "table3" in args.parts:
            for dataset in args.datasets:
                for method in picked("cm", "fl", "sp", "sfgnn"):
                    tuned(dataset, method, seed)
        if "table5" in args.parts:
            for dataset in args.datasets:
                for method in picked("fl", "sfgnn"):
                    tuned(dataset, method, seed, setting="graph")
        if "table6" in args.parts and "Cora" in args.datasets:
            for alpha in args.alphas:
                for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                    tuned("Cora", method, seed, alpha=alpha)
        if "sizes" in args.parts:  # the paper's client sizes at alpha < 1 (at 1 they are the disjoint split)
            for alpha in [a for a in args.alphas if a < 1.0]:
                for sizes in args.sizes:
                    for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                        tuned("Cora", method, seed, alpha=alpha, sizes=sizes)
        if "steps" in args.parts:  # more full-batch steps per round (the 1-step cells are Table 6's)
            for alpha in args.alphas:
                for steps in args.local_steps:
                    for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                        tuned("Cora", method, seed, alpha=alpha, steps=steps)
        if "control" in args.parts:
            for method in picked("sfgnn", "sfgnn-nojs", "sp"):
                cell(
                    f"control-{method}-{b}-s{seed}",
                    run_config("Cora", method, seed=seed, budget=b, fixed=TABLE4),
                    {"kind": "control", "dataset": "Cora", "method": method, "budget": b, "seed": seed},
                )
        if "search" in args.parts:
            for driver in DRIVERS:
                # --facade only changes SMAC: grid and random keep the "-hpo" names they were stored under
                facade = args.facade if driver == "smac" else "hpo"
                cell(
                    f"search-{driver}-{b}-{facade}-s{seed}",
                    run_config("Cora", "sfgnn", seed=seed, search=driver, budget=b, facade=facade),
                    {
                        "kind": "search",
                        "driver": driver,
                        "budget": b,
                        "seed": seed,
                        **({"facade": facade} if driver == "smac" else {}),
                    },
                )
    return list(out.values())
