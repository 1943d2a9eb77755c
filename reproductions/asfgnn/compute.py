"""How one ASFGNN cell is computed (``run.py`` is the command, ``grid.py`` says which cells exist): one ASFGNN
search in this process (:func:`run_cell`; a stopped run resumes from its last checkpoint or from its parked progress,
``parking.py``), with the wall time over stopped segments, and the row a cell stores (:func:`compute_cell`)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

from reproductions._runner.cells import _sources_hash, prepare_run_dir
from reproductions._runner.common import data_dir
from reproductions.asfgnn.grid import SOURCES, segments_before
from reproductions.asfgnn.parking import parked_path, unpark


def run_cell(work: Path, name: str, config: dict, parked_root: Path | None = None) -> dict:
    """Run ``config`` in process (resuming a stopped run from its last checkpoint, or from the cell's parked
    progress, :func:`unpark`); the search summary, the trials and the wall time."""
    from flowergraph.simulation import run_in_process
    from flowergraph.storage import read_run

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
            run_in_process(full)
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
