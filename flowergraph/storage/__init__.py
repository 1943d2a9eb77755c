"""What a run leaves on disk (Flower-free, public API): results (``config.json``, ``rounds.jsonl``,
``summary.json``), checkpoints, and the one ``.npz`` format checkpoints, client state and partition files share.

    from flowergraph.storage import read_run, RunRecorder, load_checkpoint

* :mod:`~flowergraph.storage.results`: :class:`RunRecorder` (writes a run's records), :func:`read_run`;
* :mod:`~flowergraph.storage.checkpoint`: :class:`Checkpoint`, :func:`save_checkpoint`, :func:`load_checkpoint`,
  :func:`check_resumable`, :func:`checkpoint_file` (round K's file of a run folder), :func:`find_checkpoint` (a run
  folder's newest checkpoint; :class:`~flowergraph.errors.CheckpointError` where it has none),
  :func:`round_of_file` (K of a ``round-K.npz``);
* :mod:`~flowergraph.storage.npzio`: :func:`write_npz` / :func:`read_npz` (atomic, no pickle); :func:`pack_tree` /
  :func:`unpack_tree` (a JSON-able tree with its numpy arrays moved into an ``.npz``'s arrays, and back: how a
  checkpoint keeps a strategy's state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .checkpoint import (
        Checkpoint as Checkpoint,
        check_resumable as check_resumable,
        checkpoint_file as checkpoint_file,
        find_checkpoint as find_checkpoint,
        load_checkpoint as load_checkpoint,
        round_of_file as round_of_file,
        save_checkpoint as save_checkpoint,
    )
    from .npzio import pack_tree as pack_tree, read_npz as read_npz, unpack_tree as unpack_tree, write_npz as write_npz
    from .results import (
        RunRecorder as RunRecorder,
        accuracy_text as accuracy_text,
        human_bytes as human_bytes,
        read_run as read_run,
    )

_EXPORTS = {
    "Checkpoint": "checkpoint",
    "check_resumable": "checkpoint",
    "checkpoint_file": "checkpoint",
    "find_checkpoint": "checkpoint",
    "load_checkpoint": "checkpoint",
    "round_of_file": "checkpoint",
    "save_checkpoint": "checkpoint",
    "pack_tree": "npzio",
    "read_npz": "npzio",
    "unpack_tree": "npzio",
    "write_npz": "npzio",
    "RunRecorder": "results",
    "accuracy_text": "results",
    "human_bytes": "results",
    "read_run": "results",
}
__all__ = sorted(_EXPORTS)  # the one table: _EXPORTS (tests/test_typing.py holds the TYPE_CHECKING imports to it)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
