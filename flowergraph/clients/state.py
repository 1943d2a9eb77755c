"""Per-client persistent state: typed access to a node's ``context.state``, and its files at checkpoints.

Flower re-creates a client for every message (in deployment every message is a fresh process), so instance
attributes are not state. What a client must remember across rounds lives in ``context.state``, a
``RecordDict`` that Flower keeps per node for the whole run. :class:`ClientState` is the one way flowergraph's
clients use it:

* named groups of arrays (an ``ArrayRecord`` under the name): personalised weights, received aggregations,
  optimizer moments;
* named groups of small values (a ``ConfigRecord`` under ``<name>.values``; non-scalar values are stored as JSON
  text). Flower's ``RecordDict`` is one namespace for all record types (a ``ConfigRecord`` stored under a name
  replaces an ``ArrayRecord`` of that name), so arrays and values of one name are kept under two keys;
* named groups of large arrays written once and read by many messages (:meth:`set_local_arrays`): kept in a
  node-local file under ``<state-dir>/local/`` named by their digest, with only that digest and the file's path in
  ``context.state`` (in simulation and in deployment the node state is serialised with every message: FedGCN's
  received rows, 17 MB a client on a PubMed-sized graph, cost 0.1-0.2 s a message to carry). A checkpoint
  embeds them, so a checkpoint file stays whole;
* torch helpers on top: :meth:`save_module` / :meth:`load_module` (a module's parameters, or some of them),
  :meth:`save_optimizer` / :meth:`load_optimizer` (e.g. Adam's moments, so they carry across rounds) and
  :meth:`save_rng` / :meth:`load_rng`.

At a checkpoint (run config ``checkpoint-every``) the server asks every client to write its whole state to a
file under its node-local ``state-dir`` (:meth:`write`, atomic, no pickle), and a resumed run asks every
client to load it back (:meth:`read`) before anything else happens, so a resumed run of a method with
personalised state computes what the uninterrupted one does. File: ``<state-dir>/<run tag>/partition-<p>/
round-<k>.npz`` (see :func:`state_file`), in the format of :mod:`flowergraph.storage.npzio`.

    state = ClientState(context.state)
    if not state.load_module("private", model.encoder):     # first round: nothing stored yet
        ...
    state.save_module("private", model.encoder)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from ..errors import CheckpointError
from ..storage.npzio import READ_ERRORS, read_npz, write_npz
from ..wire.npy import from_numpy, to_numpy

STATE_FORMAT = "flowergraph-client-state"
STATE_VERSION = 1
_JSON_KEYS = "__json__"  # a ConfigRecord entry listing which values are JSON-encoded
VALUES_SUFFIX = ".values"  # values of name N live in the ConfigRecord "N.values"
LOCAL_SUFFIX = ".local"  # arrays of name N kept in a node-local file: the ConfigRecord "N.local" (digest, file)
LOCAL_FORMAT = "flowergraph-node-local-arrays"
ROUNDS = "flowergraph.rounds"  # a ConfigRecord: name -> the round its entry was written in (round-stamped entries)


def default_state_dir() -> Path:
    """``$FLOWERGRAPH_CACHE/client-state`` (default ``~/.cache/flowergraph/client-state``)."""
    root = os.environ.get("FLOWERGRAPH_CACHE") or os.path.join(Path.home(), ".cache", "flowergraph")
    return Path(root).expanduser() / "client-state"


def state_file(state_dir: str | os.PathLike | None, run_tag: str, partition_id: int, server_round: int) -> Path:
    """Where partition ``partition_id`` keeps its state after round ``server_round`` of the run ``run_tag``."""
    base = Path(state_dir).expanduser() if state_dir else default_state_dir()
    return base / run_tag / f"partition-{int(partition_id)}" / f"round-{int(server_round):06d}.npz"


def _scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str, bytes)) and not isinstance(value, np.generic)


class ClientState:
    """Typed access to a node's persistent ``context.state`` (a ``RecordDict``; a fresh one if None)."""

    def __init__(self, records: RecordDict | None = None, local_dir: str | os.PathLike | None = None) -> None:
        self.records = records if records is not None else RecordDict()
        # where set_local_arrays writes (node-local; None: <default state dir>/local)
        self.local_dir = Path(local_dir).expanduser() if local_dir else default_state_dir() / "local"

    # ------------------------------------------------------------------------------------------- arrays
    def get_arrays(self, name: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``name`` (None if nothing is)."""
        record = self.records.array_records.get(name)
        if record is None:
            return None
        return {key: to_numpy(record[key]) for key in record.keys()}

    def set_arrays(self, name: str, arrays: Mapping[str, np.ndarray], *, round: int | None = None) -> None:
        """Store named arrays under ``name`` (``round``: stamp the entry with the round it belongs to)."""
        self.records.array_records[name] = ArrayRecord(
            {str(k): from_numpy(np.ascontiguousarray(np.asarray(v))) for k, v in arrays.items()}
        )
        self._stamp(name, round)

    # ------------------------------------------------------------------------------ node-local arrays
    def set_local_arrays(self, name: str, arrays: Mapping[str, np.ndarray]) -> Path:
        """Store named arrays in a node-local file (``<local_dir>/<name>-<digest>.npz``, written once: the name
        holds the content's digest) and only its digest and path in ``context.state``: for large arrays written
        once and read by many messages, which ``context.state`` would carry with every one. Returns the file."""
        arrays = {str(k): np.ascontiguousarray(np.asarray(v)) for k, v in arrays.items()}
        digest = _digest(arrays)
        path = self.local_dir / f"{name}-{digest}.npz"
        if not path.is_file():
            write_npz(path, arrays, {"format": LOCAL_FORMAT, "name": name, "digest": digest})
        self.records.array_records.pop(name, None)
        self.records.config_records[name + LOCAL_SUFFIX] = ConfigRecord({"digest": digest, "file": str(path)})
        return path

    def get_local_arrays(self, name: str) -> dict[str, np.ndarray] | None:
        """The arrays :meth:`set_local_arrays` stored under ``name`` (None if nothing is), read from their file.
        CheckpointError names a file that is missing (another machine's state-dir: a Ray cluster's nodes need one
        they share) or holds other arrays."""
        ref = self.records.config_records.get(name + LOCAL_SUFFIX)
        if ref is None:
            return None
        path, digest = Path(str(ref["file"])), str(ref["digest"])
        if not path.is_file():
            raise CheckpointError(
                f"node-local arrays {name!r}: file {str(path)!r} does not exist on this machine (written under the "
                f"node's state-dir; simulation on a multi-machine Ray cluster needs a state-dir every machine reaches)"
            )
        try:
            arrays, header = read_npz(path)
        except READ_ERRORS as exc:
            raise CheckpointError(f"node-local arrays file {str(path)!r} is corrupt ({type(exc).__name__}: {exc})")
        if header.get("format") != LOCAL_FORMAT or _digest(arrays) != digest:
            raise CheckpointError(f"node-local arrays file {str(path)!r} does not hold the arrays {name!r} stored")
        return arrays

    # ------------------------------------------------------------------------------------------- rounds
    def _stamp(self, name: str, round: int | None) -> None:
        stamps = self.records.config_records.get(ROUNDS)
        if round is None and (stamps is None or name not in stamps):
            return
        values = dict(stamps.items()) if stamps is not None else {}
        if round is None:
            values.pop(name, None)
        else:
            values[name] = int(round)
        self.records.config_records[ROUNDS] = ConfigRecord(values)

    def round_of(self, name: str) -> int | None:
        """The round the entry ``name`` was written in (None: absent, or written without a round). An entry that
        may lag (a neighbour's embeddings from the round before) says how old it is."""
        stamps = self.records.config_records.get(ROUNDS)
        return None if stamps is None or name not in stamps else int(stamps[name])

    # ------------------------------------------------------------------------------------------- values
    def get_values(self, name: str) -> dict[str, Any] | None:
        """The values stored under ``name`` (None if nothing is)."""
        record = self.records.config_records.get(name + VALUES_SUFFIX)
        if record is None:
            return None
        encoded = set(filter(None, str(record.get(_JSON_KEYS, "")).split(",")))
        return {k: (json.loads(v) if k in encoded else v) for k, v in record.items() if k != _JSON_KEYS}

    def set_values(self, name: str, values: Mapping[str, Any], *, round: int | None = None) -> None:
        """Store small values: scalars as they are, anything else JSON-encoded (it must be JSON-able); ``round``:
        stamp the entry with the round it belongs to."""
        out: dict[str, Any] = {}
        encoded = []
        for key, value in values.items():
            if _scalar(value):
                out[str(key)] = value
            else:
                out[str(key)] = json.dumps(value)
                encoded.append(str(key))
        if encoded:
            out[_JSON_KEYS] = ",".join(encoded)
        self.records.config_records[name + VALUES_SUFFIX] = ConfigRecord(out)
        self._stamp(name, round)

    def delete(self, name: str) -> None:
        self.records.array_records.pop(name, None)
        self.records.config_records.pop(name + VALUES_SUFFIX, None)
        self.records.config_records.pop(name + LOCAL_SUFFIX, None)  # the file stays: other states may name it
        self._stamp(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self.records.array_records or any(
            name + suffix in self.records.config_records for suffix in (VALUES_SUFFIX, LOCAL_SUFFIX)
        )

    def names(self) -> list[str]:
        """The names holding arrays, values or node-local arrays."""
        values = {
            k[: -len(suffix)]
            for k in self.records.config_records
            for suffix in (VALUES_SUFFIX, LOCAL_SUFFIX)
            if k.endswith(suffix)
        }
        return sorted(set(self.records.array_records) | values)

    # --------------------------------------------------------------------------------------------- torch
    def save_module(self, name: str, module, keys: list[str] | None = None) -> None:
        """Store a torch module's parameters and buffers (all, or the ``state_dict`` entries ``keys``)."""
        from ..tasks.torch_state import module_arrays

        self.set_arrays(name, module_arrays(module, keys))

    def load_module(self, name: str, module) -> bool:
        """Copy what :meth:`save_module` stored into ``module``; False (module untouched) if nothing is stored."""
        from ..tasks.torch_state import load_module_arrays

        arrays = self.get_arrays(name)
        if arrays is None:
            return False
        load_module_arrays(module, arrays)
        return True

    def save_optimizer(self, name: str, optimizer) -> None:
        """Store a torch optimizer's state (e.g. Adam's step counts and moments)."""
        from ..tasks.torch_state import optimizer_state

        arrays, values = optimizer_state(optimizer)
        self.set_arrays(name, arrays)
        self.set_values(name, values)

    def load_optimizer(self, name: str, optimizer) -> bool:
        """Restore what :meth:`save_optimizer` stored into ``optimizer``; False if nothing is stored."""
        from ..tasks.torch_state import load_optimizer_state

        values = self.get_values(name)
        if values is None:
            return False
        load_optimizer_state(optimizer, self.get_arrays(name) or {}, values)
        return True

    def save_rng(self, name: str, generator=None) -> None:
        from ..tasks.torch_state import rng_state

        self.set_arrays(name, {"state": rng_state(generator)})

    def load_rng(self, name: str, generator=None) -> bool:
        from ..tasks.torch_state import set_rng_state

        arrays = self.get_arrays(name)
        if arrays is None:
            return False
        set_rng_state(arrays["state"], generator)
        return True

    # --------------------------------------------------------------------------------------------- files
    def write(self, path: str | os.PathLike, **meta: Any) -> Path:
        """Write the whole state to ``path`` atomically (arrays and values; ``meta`` goes into the header)."""
        arrays: dict[str, np.ndarray] = {}
        layout: dict[str, Any] = {"arrays": {}, "values": {}}
        for name in sorted(self.records.array_records):
            layout["arrays"][name] = {}
            for key, value in (self.get_arrays(name) or {}).items():
                member = f"a{len(arrays)}"
                arrays[member] = value
                layout["arrays"][name][key] = member
        for name, record in sorted(self.records.config_records.items()):
            values = {}
            for key, value in record.items():
                if isinstance(value, bytes):
                    member = f"a{len(arrays)}"
                    arrays[member] = np.frombuffer(value, dtype=np.uint8)
                    values[key] = {"__bytes__": member}
                else:
                    values[key] = value
            layout["values"][name] = values
        layout["metrics"] = {name: dict(record) for name, record in sorted(self.records.metric_records.items())}
        layout["local"] = {}  # node-local arrays, embedded: the checkpoint is whole without the node's local files
        for record_name in sorted(self.records.config_records):
            if record_name.endswith(LOCAL_SUFFIX):
                name = record_name[: -len(LOCAL_SUFFIX)]
                layout["local"][name] = {}
                for key, value in (self.get_local_arrays(name) or {}).items():
                    member = f"a{len(arrays)}"
                    arrays[member] = value
                    layout["local"][name][key] = member
        header = {"format": STATE_FORMAT, "version": STATE_VERSION, "layout": layout, **meta}
        return write_npz(path, arrays, header)

    def read(self, path: str | os.PathLike, **expect: Any) -> dict[str, Any]:
        """Replace the state with what :meth:`write` stored at ``path``; returns the file's header.

        ``expect`` lists header values the file must have (e.g. ``partition_id=2``). CheckpointError names a
        missing, corrupt or mismatched file."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(
                f"client state file {str(path)!r} does not exist (was it written by this node's "
                f"checkpoint, and is state-dir the same as in the interrupted run?)"
            )
        try:
            arrays, header = read_npz(path)
            if header.get("format") != STATE_FORMAT or header.get("version") != STATE_VERSION:
                raise CheckpointError(
                    f"client state file {str(path)!r} is not a flowergraph client state (format "
                    f"{header.get('format')!r}, version {header.get('version')!r})"
                )
            layout = header["layout"]
            restored = RecordDict()
            for name, members in layout["arrays"].items():
                restored.array_records[name] = ArrayRecord(
                    {key: Array(np.ascontiguousarray(arrays[m])) for key, m in members.items()}
                )
            for name, values in layout["values"].items():
                restored.config_records[name] = ConfigRecord(
                    {k: (arrays[v["__bytes__"]].tobytes() if isinstance(v, dict) else v) for k, v in values.items()}
                )
            for name, values in layout.get("metrics", {}).items():
                restored.metric_records[name] = MetricRecord(values)
            local = {
                name: {k: arrays[m] for k, m in members.items()} for name, members in layout.get("local", {}).items()
            }
        except CheckpointError:
            raise
        except READ_ERRORS as exc:
            raise CheckpointError(f"client state file {str(path)!r} is corrupt ({type(exc).__name__}: {exc})") from None
        for key, value in expect.items():
            if header.get(key) != value:
                raise CheckpointError(
                    f"client state file {str(path)!r} belongs to {key}={header.get(key)!r}, not {value!r}"
                )
        for kind in ("array_records", "config_records", "metric_records"):  # replace in place: Flower keeps it
            live, saved = getattr(self.records, kind), getattr(restored, kind)
            for name in list(live):
                del live[name]
            for name, record in saved.items():
                live[name] = record
        for name, saved_arrays in local.items():  # back into this node's local files (the same when already there)
            self.set_local_arrays(name, saved_arrays)
        return header


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-1 over the arrays' names, dtypes, shapes and bytes (sorted by name)."""
    import hashlib

    digest = hashlib.sha1()
    for key in sorted(arrays):
        value = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(memoryview(value))
    return digest.hexdigest()
