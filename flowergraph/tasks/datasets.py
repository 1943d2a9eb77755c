"""Datasets by name, loaded with PyTorch Geometric's stock classes.

Node classification: ``Cora``, ``CiteSeer``, ``PubMed`` (Planetoid) and ``synthetic`` (a contextual
stochastic block model generated in memory, see :mod:`flowergraph.tasks.synthetic`).
Graph classification: the TU datasets (``MUTAG``, ``PROTEINS``, ``IMDB-BINARY``, ...).

Where the raw files come from
-----------------------------
``data_dir`` (or the environment variable ``FLOWERGRAPH_DATA``) points at a folder in PyG's stock layout::

    <data_dir>/Planetoid/Cora/raw/ind.cora.x ...
    <data_dir>/TUDataset/MUTAG/raw/MUTAG_A.txt ...

The folder may be read-only: raw files are *copied* into a writable cache (``FLOWERGRAPH_CACHE``,
default ``~/.cache/flowergraph``) and PyG writes its ``processed/`` files there, never next to the raw files.
When the raw files are absent, PyG downloads them as usual, into the cache, never into ``data_dir`` (a data
folder may be shared: writing into it is not ours to do, and a writability check is no guide when running as
root); offline, that fails with a :class:`DatasetUnavailableError` that says where to put the files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ConfigError, DatasetUnavailableError, did_you_mean

PLANETOID = ("Cora", "CiteSeer", "PubMed")
TU_DATASETS = (
    "MUTAG",
    "PTC_MR",
    "NCI1",
    "NCI109",
    "PROTEINS",
    "ENZYMES",
    "DD",
    "IMDB-BINARY",
    "IMDB-MULTI",
    "COLLAB",
    "BZR",
    "COX2",
    "DHFR",
    "AIDS",
    "Letter-low",
    "Letter-med",
    "Letter-high",
)
SYNTHETIC = "synthetic"
NODE_DATASETS = PLANETOID + (SYNTHETIC,)
GRAPH_DATASETS = TU_DATASETS
ALL_DATASETS = NODE_DATASETS + GRAPH_DATASETS

# Raw file names PyG's Planetoid class expects (``raw/ind.<name>.<suffix>``).
_PLANETOID_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: str  # "node" or "graph"
    family: str  # "Planetoid", "TUDataset" or "synthetic"


def canonical_name(name: str) -> str:
    """Return the canonical spelling of a dataset name (case-insensitive match) or raise ConfigError."""
    for known in ALL_DATASETS:
        if name.lower() == known.lower():
            return known
    raise ConfigError(
        f"unknown dataset {name!r}; valid choices: node classification {', '.join(NODE_DATASETS)}; "
        f"graph classification {', '.join(GRAPH_DATASETS)}{did_you_mean(name, ALL_DATASETS)}"
    )


def dataset_info(name: str) -> DatasetInfo:
    name = canonical_name(name)
    if name == SYNTHETIC:
        return DatasetInfo(name, "node", "synthetic")
    if name in PLANETOID:
        return DatasetInfo(name, "node", "Planetoid")
    return DatasetInfo(name, "graph", "TUDataset")


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """The data directory: the argument, else ``$FLOWERGRAPH_DATA``, else None (download into the cache).

    A directory that is named but does not exist is an error (it is almost always a typo).
    """
    chosen = str(data_dir) if data_dir not in (None, "") else os.environ.get("FLOWERGRAPH_DATA", "")
    if not chosen:
        return None
    path = Path(chosen).expanduser().resolve()
    if not path.is_dir():
        source = "data-dir" if data_dir not in (None, "") else "FLOWERGRAPH_DATA"
        raise ConfigError(f"{source} {chosen!r} does not exist or is not a directory")
    return path


def cache_dir() -> Path:
    root = os.environ.get("FLOWERGRAPH_CACHE") or os.path.join(Path.home(), ".cache", "flowergraph")
    path = Path(root).expanduser() / "datasets"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _raw_files_present(raw: Path, info: DatasetInfo) -> bool:
    if not raw.is_dir():
        return False
    if info.family == "Planetoid":
        stem = info.name.lower()
        return all((raw / f"ind.{stem}.{s}").is_file() for s in _PLANETOID_SUFFIXES)
    return all((raw / f"{info.name}_{s}.txt").is_file() for s in ("A", "graph_indicator", "graph_labels"))


def _expected_files(info: DatasetInfo) -> str:
    if info.family == "Planetoid":
        return f"{info.family}/{info.name}/raw/ind.{info.name.lower()}.{{{','.join(_PLANETOID_SUFFIXES)}}}"
    return f"{info.family}/{info.name}/raw/{info.name}_{{A,graph_indicator,graph_labels}}.txt"


@dataclass(frozen=True)
class DataDirRow:
    """One dataset in a data folder (:func:`data_dir_report`): where its raw files are, or where they belong."""

    name: str
    family: str
    present: bool
    where: str  # the folder holding its raw files, or (missing) the files expected


def data_dir_report(data_dir: str | os.PathLike, names=None) -> list[DataDirRow]:
    """Which datasets' raw files a folder holds, in PyG's layout (``<dir>/Planetoid/Cora/raw/...``,
    ``<dir>/TUDataset/MUTAG/raw/...``, or ``<dir>/<name>/raw/...``); ``names``: these datasets (default: every
    Planetoid and TU dataset). Reads nothing but the folder's listing."""
    root = Path(data_dir).expanduser()
    rows = []
    for name in names or (PLANETOID + TU_DATASETS):
        info = dataset_info(name)
        if info.family == "synthetic":
            continue
        found = next(
            (
                c
                for c in (root / info.family / info.name / "raw", root / info.name / "raw")
                if _raw_files_present(c, info)
            ),
            None,
        )
        rows.append(
            DataDirRow(
                info.name,
                info.family,
                found is not None,
                str(found) if found is not None else f"{root}/{_expected_files(info)}",
            )
        )
    return rows


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive inter-process lock: Ray actors may load the same dataset at the same moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prepare_root(info: DatasetInfo, data_dir: Path | None) -> Path:
    """Return the PyG root to load from, with raw files copied into the writable cache."""
    root = cache_dir() / info.family
    cached_raw = root / info.name / "raw"
    if _raw_files_present(cached_raw, info):
        return root
    if data_dir is not None:
        for candidate in (data_dir / info.family / info.name / "raw", data_dir / info.name / "raw"):
            if _raw_files_present(candidate, info):
                if cached_raw.exists():  # an incomplete copy: ours to replace, anything else is refused
                    _remove_own_copy(root / info.name)
                cached_raw.parent.mkdir(parents=True, exist_ok=True)
                (root / info.name / COPY_MARK).write_text(f"{candidate}\n")  # first: a copy cut short is ours too
                shutil.copytree(candidate, cached_raw)
                for f in cached_raw.rglob("*"):  # copies of read-only files must stay writable for PyG
                    f.chmod(0o644 if f.is_file() else 0o755)
                return root
    return root


COPY_MARK = ".flowergraph-copy"  # in a cached dataset folder that flowergraph copied (holds where from)


def _remove_own_copy(folder: Path) -> None:
    """Delete a dataset folder of the cache that flowergraph filled itself (it holds :data:`COPY_MARK`); a
    folder without the mark (files someone put there, e.g. with ``FLOWERGRAPH_CACHE`` set to their own data
    folder) is never deleted: DatasetUnavailableError names it instead."""
    if not (folder / COPY_MARK).exists():
        raise DatasetUnavailableError(
            f"{folder} holds dataset files that flowergraph did not copy there, and they are incomplete or "
            f"unreadable; flowergraph leaves them alone: fix or move them, or set FLOWERGRAPH_CACHE to another "
            f"folder"
        )
    shutil.rmtree(folder)


def _download_error(info: DatasetInfo, data_dir: Path | None, exc: BaseException) -> DatasetUnavailableError:
    where = f"<data-dir>/{_expected_files(info)}"
    if data_dir is not None:
        where = f"{data_dir}/{_expected_files(info)}"
    return DatasetUnavailableError(
        f"dataset {info.name!r}: raw files not found and the download failed ({type(exc).__name__}: {exc}). "
        f"Put the raw files at {where} and pass that folder as data-dir (or set FLOWERGRAPH_DATA)."
    )


def load_pyg_dataset(name: str, data_dir: str | os.PathLike | None = None, use_node_attr: bool = False):
    """Load a Planetoid or TU dataset with PyG's stock class (public split for Planetoid).

    ``use_node_attr`` (TU datasets only) is passed to ``TUDataset``: node attributes are kept in ``x`` (before
    the one-hot node labels), e.g. the 2-d coordinates of the Letter datasets. The processed cache is shared by
    both settings: PyG stores attributes and labels in the same ``processed/data.pt`` and drops the attribute
    columns when the dataset is opened with ``use_node_attr=False``.

    Returns the PyG dataset object. Raises ConfigError for an unknown name or a missing data
    directory and DatasetUnavailableError when the raw files are absent and cannot be downloaded.
    """
    info = dataset_info(name)
    if info.family == "synthetic":
        raise ConfigError("the synthetic dataset is generated, not loaded: use load_node_dataset")
    if use_node_attr and info.family != "TUDataset":
        raise ConfigError(f"use_node_attr applies to TU datasets only, not {info.name!r} ({info.family})")
    resolved = resolve_data_dir(data_dir)
    from torch_geometric.datasets import Planetoid, TUDataset

    with _locked(cache_dir() / f".{info.family}-{info.name}.lock"):
        root = _prepare_root(info, resolved)
        needs_download = not _raw_files_present(root / info.name / "raw", info)  # then into the cache only
        try:
            if info.family == "Planetoid":
                dataset = Planetoid(str(root), info.name, split="public")
            else:
                dataset = TUDataset(str(root), info.name, use_node_attr=use_node_attr)
        except Exception as exc:  # network errors come as URLError, OSError, fsspec errors ...
            if needs_download:
                raise _download_error(info, resolved, exc) from exc
            # The raw files are there but PyG cannot read them: drop the cached copy (so fixed files are
            # copied again next time) and name where they came from.
            if (root / info.name / COPY_MARK).exists():
                _remove_own_copy(root / info.name)
            source = f"{resolved}/{_expected_files(info)}" if resolved is not None else f"{root / info.name / 'raw'}"
            raise DatasetUnavailableError(
                f"dataset {info.name!r}: the raw files {source} could not be read ({type(exc).__name__}: {exc}); "
                f"they are probably corrupt or truncated: replace them"
            ) from exc
    return dataset


def node_dataset_from_pyg(name: str, data_dir: str | os.PathLike | None = None):
    """A Planetoid dataset as one ``torch_geometric.data.Data`` with its public masks."""
    dataset = load_pyg_dataset(name, data_dir)
    data = dataset[0]
    data.num_classes = int(dataset.num_classes)
    data.y = data.y.to(torch.long)
    return data
