"""One file format for everything flowergraph writes to disk (Flower-free): a numpy ``.npz`` archive of named
arrays plus a JSON header.

Used by server checkpoints (:mod:`flowergraph.storage.checkpoint`), clients' saved state
(:class:`flowergraph.clients.ClientState`) and data owners' partition files
(:mod:`flowergraph.tasks.partition_files`). The archive is numpy's zip of ``.npy`` members (CRC-checked on
read) and is loaded with ``allow_pickle=False``, so reading a file can never execute code. The header is the
member ``__meta__``: UTF-8 JSON as a ``uint8`` array. Writes are atomic: a temporary file in the same folder,
fsynced, renamed over the target, then the folder fsynced; a crash mid-write leaves the previous file intact.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ._astlock import serialize_ast_parse

META = "__meta__"
# What a truncated, corrupt or foreign file raises while being read (callers name the file in their error).
READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, KeyError, ValueError, TypeError, UnicodeDecodeError)


def write_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write ``arrays`` and the JSON ``meta`` to ``path`` atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if META in arrays:
        raise ValueError(f"array name {META!r} is reserved")
    entries = {name: np.asarray(a) for name, a in arrays.items()}
    entries[META] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_npz(path: str | os.PathLike, names: list[str] | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Read ``(arrays, meta)`` (only ``names`` when given). Raises one of :data:`READ_ERRORS` for a missing,
    truncated or foreign file; the caller names the file."""
    serialize_ast_parse()  # numpy.load parses array headers; see _astlock
    with np.load(Path(path), allow_pickle=False) as archive:
        meta = json.loads(bytes(archive[META]).decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("the header is not a JSON object")
        wanted = names if names is not None else [n for n in archive.files if n != META]
        arrays = {name: np.array(archive[name]) for name in wanted}
    return arrays, meta


def pack_tree(value: Any, arrays: dict[str, np.ndarray], where: str, *, what: str = "state") -> Any:
    """A JSON-able copy of ``value`` (JSON types and numpy arrays, nested in dicts and lists) in which each array
    is moved into ``arrays`` (as ``s0``, ``s1``, ...) and replaced by ``{"__ndarray__": "sK"}``. TypeError names
    the place of a value that cannot be stored (``what where.key``)."""
    if isinstance(value, np.ndarray):
        key = f"s{len(arrays)}"
        arrays[key] = value
        return {"__ndarray__": key}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{what} {where}: keys must be strings, got {k!r}")
            out[k] = pack_tree(v, arrays, f"{where}.{k}", what=what)
        return out
    if isinstance(value, (list, tuple)):
        return [pack_tree(v, arrays, f"{where}[{i}]", what=what) for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{what} {where}: cannot store a {type(value).__name__} (use JSON types or numpy arrays)")


def unpack_tree(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """The inverse of :func:`pack_tree`."""
    if isinstance(value, dict):
        if set(value) == {"__ndarray__"}:
            return np.array(arrays[value["__ndarray__"]])
        return {k: unpack_tree(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [unpack_tree(v, arrays) for v in value]
    return value
