"""Checkpoints of a federated run (Flower-free): save every N rounds, resume exactly.

A checkpoint after round k holds everything the server needs to continue as if it had never stopped:

* the global model's arrays after round k (dtype and shape as sent to clients),
* the strategy's state (:meth:`flowergraph.strategies.weighted.WeightedAveraging.state_dict`: e.g. round k's
  record while it waits for its fused evaluation; stateful methods add agents, populations, ...),
* the round records written so far (``rounds.jsonl`` up to the checkpoint), so a resumed run continues the same
  results files without duplicating or losing a round,
* the run configuration, so a resumed run with different settings is refused by name.

File format: one ``.npz`` archive (numpy's zip of ``.npy`` members, CRC-checked on read, loaded with
``allow_pickle=False``: a checkpoint cannot execute code): ``g0, g1, ...`` the global arrays, ``s0, s1, ...``
arrays found in the strategy state, and ``__meta__`` (UTF-8 JSON: format, version, round, counts, the state
with arrays replaced by ``{"__ndarray__": "sK"}``, records, config). Files are written to a temporary name,
fsynced and renamed (atomic on POSIX): a crash mid-write leaves the previous checkpoint intact.
They live in ``<out-dir>/checkpoints/round-000005.npz``; all are kept unless the run sets ``checkpoint-keep``
(:func:`prune_rounds`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from .npzio import READ_ERRORS, pack_tree, read_npz, unpack_tree, write_npz

FORMAT = "flowergraph-checkpoint"
VERSION = 1
CHECKPOINT_DIR = "checkpoints"
_PATTERN = "round-*.npz"

# Run-config keys a resumed run may set differently from the checkpointed run (they change where and how the
# run is executed, not what it computes). Every other key must be equal, or the resume is refused.
RESUME_MAY_CHANGE = (
    "rounds",
    "out-dir",
    "resume-from",
    "checkpoint-every",
    "checkpoint-keep",
    "round-timeout",
    "init-timeout",
    "connect-timeout",
    "poll-interval",
    "data-dir",
    "key-file",
    "state-dir",
    "partition-dir",
    "inject-faults",
    "fused-eval",
    "client-order",
    "simulation-engine",
)


@dataclass
class Checkpoint:
    server_round: int
    arrays: list[np.ndarray]
    strategy_state: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    path: Path | None = None

    @property
    def run_dir(self) -> Path | None:
        """The results folder the checkpoint was written into (``<run>/checkpoints/round-K.npz``), if it was."""
        if self.path is not None and self.path.parent.name == CHECKPOINT_DIR:
            return self.path.parent.parent
        return None


def checkpoint_file(out_dir: str | os.PathLike, server_round: int) -> Path:
    return Path(out_dir) / CHECKPOINT_DIR / f"round-{server_round:06d}.npz"


def save_checkpoint(ckpt: Checkpoint, path: str | os.PathLike) -> Path:
    """Write ``ckpt`` to ``path`` atomically (temporary file, fsync, rename, fsync of the folder)."""
    state_arrays: dict[str, np.ndarray] = {}
    state = pack_tree(ckpt.strategy_state, state_arrays, "strategy", what="checkpoint state")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "round": int(ckpt.server_round),
        "num_arrays": len(ckpt.arrays),
        "strategy_state": state,
        "records": ckpt.records,
        "config": ckpt.config,
        "created": ckpt.created or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    entries = {f"g{i}": np.asarray(a) for i, a in enumerate(ckpt.arrays)}
    entries.update(state_arrays)
    return write_npz(path, entries, meta)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read a checkpoint file (or the latest one of a run folder); CheckpointError names a bad file."""
    path = find_checkpoint(path)
    try:
        archive, meta = read_npz(path)
        if meta.get("format") != FORMAT:
            raise CheckpointError(
                f"checkpoint {str(path)!r} is not a flowergraph checkpoint (format {meta.get('format')!r})"
            )
        if meta.get("version") != VERSION:
            raise CheckpointError(
                f"checkpoint {str(path)!r} has format version {meta.get('version')!r}; this "
                f"flowergraph reads version {VERSION}"
            )
        arrays = [archive[f"g{i}"] for i in range(int(meta["num_arrays"]))]
        state = unpack_tree(meta["strategy_state"], archive)
        config = dict(meta["config"])
        ckpt = Checkpoint(
            server_round=int(meta["round"]),
            arrays=arrays,
            strategy_state=state,
            records=list(meta["records"]),
            config=config,
            created=str(meta.get("created", "")),
            path=path.resolve(),
        )
    except CheckpointError:
        raise
    except READ_ERRORS as exc:
        raise CheckpointError(
            f"checkpoint {str(path)!r} is corrupt or not a flowergraph checkpoint ({type(exc).__name__}: {exc})"
        ) from None
    if ckpt.server_round < 1:
        raise CheckpointError(f"checkpoint {str(path)!r} is at round {ckpt.server_round}; expected >= 1")
    return ckpt


def find_checkpoint(path: str | os.PathLike) -> Path:
    """``path`` itself if it is a file; for a run folder (or its ``checkpoints`` folder) its latest checkpoint."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    if not p.exists():
        raise CheckpointError(
            f"resume-from {str(path)!r} does not exist; give a checkpoint file "
            f"(<out-dir>/{CHECKPOINT_DIR}/round-K.npz) or a run's out-dir"
        )
    folder = p if p.name == CHECKPOINT_DIR else p / CHECKPOINT_DIR
    found = sorted(folder.glob(_PATTERN)) if folder.is_dir() else []
    if not found:
        raise CheckpointError(
            f"resume-from {str(path)!r} holds no checkpoint ({folder}/{_PATTERN}); was the run "
            f"started with checkpoint-every > 0?"
        )
    return found[-1]


def round_of_file(path: str | os.PathLike) -> int | None:
    """K of a ``round-K.npz`` file (a server checkpoint or a client's state file); None for any other name."""
    name = Path(path).name
    if not (name.startswith("round-") and name.endswith(".npz")):
        return None
    digits = name[len("round-") : -len(".npz")]
    return int(digits) if digits.isdigit() else None


def prune_rounds(folder: str | os.PathLike, keep: int, upto: int) -> list[Path]:
    """Delete the ``round-K.npz`` files in ``folder`` that are older than its ``keep`` newest with K <= ``upto``
    (the round just written); return what was deleted. ``keep`` <= 0 keeps everything.

    Files of rounds after ``upto`` are never touched: they belong to the run a resumed run went back from (it
    resumed from an earlier checkpoint), and deleting them is the user's decision, not the pruner's."""
    if keep <= 0:
        return []
    found = sorted((k, p) for p in Path(folder).glob(_PATTERN) if (k := round_of_file(p)) is not None and k <= upto)
    doomed = [p for _, p in found[:-keep]]
    for p in doomed:
        p.unlink(missing_ok=True)
    return doomed


def check_resumable(ckpt: Checkpoint, config: dict[str, Any]) -> None:
    """Refuse to resume ``ckpt`` under a run configuration that would compute something else."""
    where = str(ckpt.path) if ckpt.path else "the checkpoint"
    saved = _current_names(ckpt.config, config, where)
    rounds = config.get("rounds")
    if rounds is not None and int(rounds) <= ckpt.server_round:
        raise CheckpointError(
            f"resume-from {where!r} is at round {ckpt.server_round}; rounds={rounds} must be larger to continue the run"
        )
    diffs = [
        f"{k}={saved.get(k)!r} in the checkpoint but {config.get(k)!r} now"
        for k in sorted(set(saved) | set(config))
        if k not in RESUME_MAY_CHANGE and saved.get(k) != config.get(k)
    ]
    if diffs:
        raise CheckpointError(
            f"resume-from {where!r} was made with other settings: {'; '.join(diffs)}. Resume "
            f"with the same settings; only {', '.join(RESUME_MAY_CHANGE)} may change"
        )


def _current_names(saved: dict[str, Any], config: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint's configuration with keys added since it was written at their defaults (they did not exist,
    so the run had their default behaviour). CheckpointError when it holds keys this version does not know (an
    old name of a renamed key: the refusal names the keys it may mean)."""
    from ..errors import did_you_mean_key
    from ..settings import defaults

    known = defaults()
    unknown = [k for k in saved if k not in known]
    if unknown:
        named = ", ".join(
            f"{k!r}" + (f" ({hint[2:]})" if (hint := did_you_mean_key(k, known)) else "") for k in unknown
        )
        raise CheckpointError(
            f"resume-from {where!r} was written with run-config keys this version does not know: "
            f"{named}; this version cannot resume it (resume it with the flowergraph version "
            f"that wrote it, or start a new run)"
        )
    out = dict(saved)
    for key in config:
        if key not in out and key in known:
            out[key] = known[key]
    return out
