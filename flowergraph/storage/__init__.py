"""What a run leaves on disk (Flower-free, public API): results (``config.json``, ``rounds.jsonl``,
``summary.json``), checkpoints, and the one ``.npz`` format checkpoints, client state and partition files share.

    from flowergraph.storage import read_run, RunRecorder, load_checkpoint

* :mod:`~flowergraph.storage.results`: :class:`RunRecorder` (writes a run's records), :func:`read_run`;
* :mod:`~flowergraph.storage.checkpoint`: :class:`Checkpoint`, :func:`save_checkpoint`, :func:`load_checkpoint`,
  :func:`check_resumable`;
* :mod:`~flowergraph.storage.npzio`: :func:`write_npz` / :func:`read_npz` (atomic, no pickle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from .checkpoint import Checkpoint, check_resumable, checkpoint_file, load_checkpoint, save_checkpoint
    from .npzio import read_npz, write_npz
    from .results import RunRecorder, accuracy_text, human_bytes, read_run

_EXPORTS = {
    "Checkpoint": "checkpoint",
    "check_resumable": "checkpoint",
    "checkpoint_file": "checkpoint",
    "load_checkpoint": "checkpoint",
    "save_checkpoint": "checkpoint",
    "read_npz": "npzio",
    "write_npz": "npzio",
    "RunRecorder": "results",
    "accuracy_text": "results",
    "human_bytes": "results",
    "read_run": "results",
}
__all__ = [
    "Checkpoint",
    "RunRecorder",
    "accuracy_text",
    "check_resumable",
    "checkpoint_file",
    "human_bytes",
    "load_checkpoint",
    "read_npz",
    "read_run",
    "save_checkpoint",
    "write_npz",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
