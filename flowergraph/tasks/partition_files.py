"""Data owners' own partition files (Flower-free): one file per client, so a node never reads the global dataset.

``export_partitions`` cuts the global graph as the partitioner says and writes, into one folder:

* ``client-K.npz`` for every client K, in the format of :mod:`flowergraph.storage.npzio` (a numpy archive, no pickle,
  CRC-checked, written atomically) with the members

  ====================  ===============  ==========================================================
  ``global_ids``        int64 [n]        global id of each of the client's nodes
  ``x``                 float32 [n, d]   their features
  ``y``                 int64 [n]        their labels
  ``train_mask`` ...    bool [n]         ``train_mask``, ``val_mask``, ``test_mask``
  ``edge_index``        int64 [2, E]     edges among the client's own nodes (local indices)
  ``cross_edges``       int64 [2, C]     cross-client edges: (local index, remote global id)
  ``cross_owner``       int64 [C]        the client owning each remote endpoint
  ====================  ===============  ==========================================================

  and a JSON header: ``format`` (``flowergraph-partition``), ``version`` (1), ``dataset``, ``num_clients``,
  ``client_id``, ``num_global_nodes``, ``num_classes``, ``num_features``, ``graph`` (split, seed, synthetic
  parameters), ``partition`` (partitioner, beta, minimum size, seed) and ``digest`` (SHA-256 over the members
  in the order above: a file that was altered or mixed from two exports is refused);
* ``manifest.json``: the same header fields once, and per client its file name, node and edge counts and the
  file's SHA-256.

A node loads only its own file (:func:`load_partition_file`) and checks that it is what the run expects:
the dataset, the number of clients and the client (partition) id; a truncated, corrupt or foreign file is
refused with a message naming it. What a client holds is exactly what cutting the global graph gives
(:func:`flowergraph.tasks.federated_graph.build_client_graph`; a test checks every array).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, PartitionError
from ..storage.npzio import READ_ERRORS, read_npz, write_npz
from .memo import BytesLRU
from .federated_graph import ClientGraph, GraphSpec, PartitionSpec, cut_graph, load_global_graph, node_assignment

FORMAT = "flowergraph-partition"
VERSION = 1
MANIFEST = "manifest.json"
MEMBERS = ("global_ids", "x", "y", "train_mask", "val_mask", "test_mask", "edge_index", "cross_edges", "cross_owner")
_DTYPES = {
    "global_ids": np.int64,
    "x": np.float32,
    "y": np.int64,
    "train_mask": np.bool_,
    "val_mask": np.bool_,
    "test_mask": np.bool_,
    "edge_index": np.int64,
    "cross_edges": np.int64,
    "cross_owner": np.int64,
}


def partition_file_name(client_id: int) -> str:
    return f"client-{int(client_id)}.npz"


def check_export_folder(out: Path, force: bool) -> None:
    """Refuse (ConfigError) a folder holding files an export would overwrite (its manifest or any
    ``client-K.npz``), unless ``force``."""
    taken = sorted(p.name for p in [out / MANIFEST, *out.glob("client-*.npz")] if p.exists()) if out.is_dir() else []
    if taken and not force:
        shown = ", ".join(taken[:4]) + (f" and {len(taken) - 4} more" if len(taken) > 4 else "")
        raise ConfigError(
            f"{str(out)!r} already holds partition files ({shown}); choose another folder or "
            f"pass --force to overwrite them"
        )


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in MEMBERS:
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _arrays(graph: ClientGraph) -> dict[str, np.ndarray]:
    return {name: getattr(graph, name).numpy().astype(_DTYPES[name], copy=False) for name in MEMBERS}


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_partitions(
    gspec: GraphSpec, pspec: PartitionSpec, out_dir: str | os.PathLike, *, force: bool = False, log=print
) -> Path:
    """Write every client's partition file and the manifest into ``out_dir``; returns the manifest's path.

    Refuses a folder that already holds an export unless ``force``."""
    out = Path(out_dir).expanduser()
    check_export_folder(out, force)
    data = load_global_graph(gspec)
    assignment = node_assignment(gspec, pspec)
    header: dict[str, Any] = {
        "dataset": gspec.dataset,
        "num_clients": pspec.num_clients,
        "num_global_nodes": int(data.num_nodes),
        "num_classes": int(data.num_classes),
        "num_features": int(data.num_features),
        "graph": {
            "split": gspec.split,
            "seed": gspec.seed,
            "synthetic": asdict(gspec.synthetic) if gspec.dataset == "synthetic" else None,
        },
        "partition": {
            "partitioner": pspec.partitioner,
            "beta": pspec.beta,
            "min_size": pspec.min_size,
            "seed": pspec.seed,
        },
    }
    cut = cut_graph(data, assignment, pspec.num_clients)  # one pass over the graph; one client held at a time
    graphs = (cut.client(k, keep=False) for k in range(pspec.num_clients))
    return write_partitions(graphs, header, out, log=log)


def write_partitions(graphs, header: dict[str, Any], out_dir: str | os.PathLike, *, log=print) -> Path:
    """Write one ``client-K.npz`` per :class:`ClientGraph` of ``graphs`` (in client order) and the manifest into
    ``out_dir``, with ``header`` (``dataset``, ``num_clients``, ``num_global_nodes``, ``num_classes``,
    ``num_features``, ``graph``, ``partition``: how the clients' node sets were chosen) in every file: the writer of
    :func:`export_partitions`, for methods that assign nodes to clients their own way."""
    out = Path(out_dir).expanduser()
    header = {**header, "format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    files = []
    for k, graph in enumerate(graphs):
        arrays = _arrays(graph)
        path = write_npz(out / partition_file_name(k), arrays, {**header, "client_id": k, "digest": _digest(arrays)})
        files.append(
            {
                "client_id": k,
                "file": path.name,
                "nodes": graph.num_nodes,
                "edges": int(graph.edge_index.size(1)),
                "cross_edges": int(graph.cross_edges.size(1)),
                "sha256": _file_sha256(path),
            }
        )
        if log:
            log(
                f"client {k}: {graph.num_nodes} nodes, {int(graph.edge_index.size(1))} internal and "
                f"{int(graph.cross_edges.size(1))} cross-client edges -> {path}"
            )
    manifest = out / MANIFEST
    tmp = manifest.with_name(f".{MANIFEST}.tmp")
    tmp.write_text(json.dumps({**header, "files": files}, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, manifest)
    return manifest


def read_manifest(
    folder: str | os.PathLike, *, dataset: str | None = None, num_clients: int | None = None
) -> dict[str, Any]:
    """The manifest of an export, checked against the run's ``dataset`` and ``num_clients`` when given."""
    path = Path(folder).expanduser() / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"partition-dir {str(folder)!r} holds no {MANIFEST}; write one with `python -m "
            f"flowergraph.partition export ... --out {folder}`"
        ) from None
    except (OSError, ValueError) as exc:
        raise PartitionError(f"{str(path)!r} is not a readable partition manifest ({exc})") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise PartitionError(
            f"{str(path)!r} is not a flowergraph partition manifest (format "
            f"{manifest.get('format')!r}, version {manifest.get('version')!r}; expected "
            f"{FORMAT!r} version {VERSION})"
        )
    _check_expected(str(path), manifest, dataset=dataset, num_clients=num_clients)
    return manifest


def _check_expected(where: str, header: dict, **expected: Any) -> None:
    names = {"dataset": "dataset", "num_clients": "num-clients", "client_id": "partition-id"}
    for key, want in expected.items():
        if want is None:
            continue
        got = header.get(key)
        same = str(got).lower() == str(want).lower() if key == "dataset" else got == want
        if not same:
            raise PartitionError(
                f"partition file {where!r} was exported for {key}={got!r}, but this run/node has "
                f"{names[key]}={want!r}; export the partitions for this setting or use the right "
                f"file"
            )


def load_partition_file(
    path: str | os.PathLike,
    *,
    dataset: str | None = None,
    num_clients: int | None = None,
    client_id: int | None = None,
    partition: dict[str, Any] | None = None,
) -> ClientGraph:
    """One client's data from its own file, checked (see the module docstring); memoised per process.
    ``partition``: values the file's ``partition`` header must have (how its node sets were chosen)."""
    p = Path(path).expanduser().resolve()
    try:
        st = p.stat()
    except OSError:
        raise ConfigError(f"partition file {str(path)!r} does not exist") from None
    graph, header = _LOADED.get_or_build((str(p), st.st_mtime_ns, st.st_size), lambda: _load(str(p)))
    _check_expected(str(path), header, dataset=dataset, num_clients=num_clients, client_id=client_id)
    saved = header.get("partition") or {}
    wrong = {k: (saved.get(k), v) for k, v in (partition or {}).items() if saved.get(k) != v}
    if wrong:
        raise PartitionError(
            f"partition file {str(path)!r} was exported with "
            f"{', '.join(f'{k}={got!r}' for k, (got, _) in wrong.items())}, but this run has "
            f"{', '.join(f'{k}={want!r}' for k, (_, want) in wrong.items())}; export the partitions "
            f"for this setting or use the right file"
        )
    return graph


_LOADED = BytesLRU()  # loaded files, bounded by bytes (tasks/memo.py): an actor may serve any client


def _load(path: str) -> tuple[ClientGraph, dict]:
    try:
        arrays, header = read_npz(path)
    except READ_ERRORS as exc:
        raise PartitionError(
            f"partition file {path!r} is truncated, corrupt or not a partition file ({type(exc).__name__}: {exc})"
        ) from None
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise PartitionError(
            f"partition file {path!r} is not a flowergraph partition file (format "
            f"{header.get('format')!r}, version {header.get('version')!r}; expected {FORMAT!r} "
            f"version {VERSION})"
        )
    missing = [m for m in MEMBERS if m not in arrays]
    if missing:
        raise PartitionError(f"partition file {path!r} lacks {', '.join(missing)}")
    if _digest(arrays) != header.get("digest"):
        raise PartitionError(
            f"partition file {path!r} does not match its own digest: it was altered or mixed "
            f"from two exports; export it again"
        )
    t = {name: torch.from_numpy(arrays[name]) for name in MEMBERS}
    graph = ClientGraph(
        client_id=int(header["client_id"]),
        num_clients=int(header["num_clients"]),
        num_global_nodes=int(header["num_global_nodes"]),
        num_classes=int(header["num_classes"]),
        **t,
    )
    return graph, header
