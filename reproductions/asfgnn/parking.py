"""Parking a stopped ASFGNN cell's progress in the repository (``run.py --park``), and restoring it (see the
comment below)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from reproductions._runner.cells import RUN_CODE, remove_run_folder, run_dir_current, store_folder
from reproductions._runner.common import REPO
from reproductions.asfgnn.grid import SOURCES, STORE, completed, same_computation, segments_before

# ------------------------------------------------------------------------------------------------------ parking
# A paper-budget cell takes 3-5 h of one core, longer than a working session here, and its run folder under --work
# does not outlive the machine it ran on. `--park` keeps a stopped cell's progress in the repository instead:
# reproductions/asfgnn/cells/asfgnn/parked/<cell>.json.xz holds its last checkpoint, which is always taken between two
# trials (checkpoint-every = T + 1), without the two things the next trial replaces before it reads them: the
# global arrays (reset to the next trial's initial model when it starts) and the clients' state files (a client
# whose stored model belongs to another trial starts afresh, from seeds of (seed, client, trial round) alone).
# The finished trials, the search driver's state (SMAC is rebuilt from it), every round record and the wall
# time so far are kept; a round record only with what the cell's row (run_cell) and the resumed run's summary
# read (PARKED_ROUND_KEYS: a full record is ~1 KB, and a paper-budget cell has 20,100 of them; the stored cells
# stay under 5 MB, tests/test_cell_store.py), so the resumed run's rounds.jsonl has the parked rounds slim.
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
    return root or store_folder(STORE) / STORE / PARKED


def parked_path(name: str, root: Path | None = None) -> Path:
    """Where cell ``name`` is parked."""
    return parked_dir(root) / f"{name}.json.xz"


def park_run(out: Path) -> dict:
    """The parked form of run folder ``out``'s latest checkpoint (see the comment above): a JSON-able dict."""
    from flowergraph.storage import load_checkpoint, pack_tree

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
    from flowergraph.errors import CheckpointError
    from flowergraph.storage import (
        Checkpoint,
        checkpoint_file,
        find_checkpoint,
        round_of_file,
        save_checkpoint,
        unpack_tree,
    )

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
