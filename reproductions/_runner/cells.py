"""The runner's cell store: the code state that computed a cell (:func:`common.code_state`, a hash of the sources on
its path), the run folders cells are computed in (:func:`prepare_run_dir`, :func:`remove_run_folder`), the
environment a cell records (:func:`environment`) and :class:`CellStore`, the finished cells kept in the repository
(each store in its folder, :data:`STORES`: a reproduction's ``reproductions/<paper>/cells/``, a benchmark's
``benchmarks/cells/``). ``python -m reproductions._runner.cells pack`` packs them, ``... status`` counts them."""

from __future__ import annotations

import collections
import functools
import platform
import sys
from pathlib import Path
from typing import Callable, Iterator

from reproductions._runner.common import REPO, code_state, command_line, hash_tree as _hash_tree


RUN_CODE = "bench-code.json"  # in a cell's run folder: the code state that wrote the run


@functools.lru_cache(maxsize=None)
def _sources_hash(sources: tuple[str, ...]) -> str:
    return code_state(sources, REPO)["sources"]


def remove_run_folder(out: Path) -> None:
    """Delete a benchmark's run folder ``out`` before it is computed again: only a folder a benchmark or a
    flowergraph run wrote (it holds :data:`RUN_CODE`, or a run's ``config.json``), or an empty one. Anything else
    is someone's own files: SystemExit names it, nothing is deleted (docs/reliability.md)."""
    import shutil

    if not out.exists():
        return
    if (
        out.is_dir()
        and not out.is_symlink()
        and (not any(out.iterdir()) or (out / RUN_CODE).exists() or (out / "config.json").exists())
    ):
        shutil.rmtree(out)
        return
    raise SystemExit(
        f"error: {out} is in the way of a benchmark's run folder and was not written by one (no "
        f"{RUN_CODE}, no config.json); move it, or choose another work folder"
    )


def run_dir_current(out: Path, sources: tuple[str, ...]) -> bool:
    """Whether the run folder ``out`` was started by the code as it is now (see :func:`prepare_run_dir`)."""
    import json

    marker = out / RUN_CODE
    return marker.exists() and json.loads(marker.read_text()).get("sources") == _sources_hash(tuple(sources))


def prepare_run_dir(out: Path, sources: tuple[str, ...]) -> str:
    """Make a cell's run folder ``out`` safe to compute the cell from, and say how: ``"completed"`` (a finished
    run: read it), ``"resume"`` (a stopped run with checkpoints: pass ``resume-from``) or ``"fresh"`` (an empty
    folder: start the run).

    A run folder is reused or resumed only when the code that wrote it is the code as it is now (the
    ``sources`` hash of :func:`code_state`, recorded in ``out/bench-code.json`` when the folder is started); a
    folder a benchmark started with other code is removed first, and a non-empty folder without that record (not
    a benchmark's) is refused, never deleted. Without
    this, re-running a stale cell (``--rerun-stale``) in a ``--work`` folder that still held the old run read
    the old run's output back and stored it as a cell of today's code. The hash is computed once per process:
    a benchmark does not change its own sources while it runs."""
    import json
    import shutil

    if out.exists() and not (out / RUN_CODE).exists() and any(out.iterdir()):
        # not a folder a benchmark started (they all carry the record): never ours to delete
        raise SystemExit(
            f"error: {out} holds files that no benchmark run started (no {RUN_CODE}); move them, or "
            f"choose another --work folder"
        )
    if out.exists() and not run_dir_current(out, sources):
        shutil.rmtree(out)
    if out.exists():
        summary = out / "summary.json"
        if summary.exists() and json.loads(summary.read_text()).get("status") == "completed":
            return "completed"
        if (out / "checkpoints").is_dir() and any((out / "checkpoints").glob("round-*.npz")):
            return "resume"
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / RUN_CODE).write_text(json.dumps({"sources": _sources_hash(tuple(sources))}) + "\n")
    return "fresh"


PACKAGES = ("torch", "torch_geometric", "numpy", "scipy", "scikit-learn", "flwr")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cell_cpu(record: dict) -> str:
    """The CPU model a stored cell was computed on (its recorded environment); "not recorded" for cells stored
    before cells recorded their machine."""
    return (record.get("env") or {}).get("cpu") or "not recorded"


def environment() -> dict:
    """What besides the code decides a cell's last digits: the interpreter, the versions of the packages its
    numbers depend on, the CPU and the instruction set torch dispatches to. Recorded with every cell; not part of
    :meth:`CellStore.current` (a cell is current when its code is), but a reproduction test is exact only where it
    matches: the same sources on another machine or build differ in the last floating-point digits (FedGraph's
    fixed-policy cells re-run on 2026-11-26: 32 of 96 identical, the others 0.07 points apart on average; a FedStar
    cell's round-10 accuracy 0.001 apart; setting MKL's instruction set alone moves it)."""
    return dict(_environment())  # a copy: the cached one is shared by every save of the process


@functools.cache
def _environment() -> dict:
    from importlib import metadata

    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        **versions,
    }


class CellStore:
    """Finished benchmark cells kept in the repository, each with the settings and the code state
    (:func:`code_state`) that produced it, so a table resumes on a fresh clone and never mixes numbers from
    different code silently: :meth:`current` tells whether a cell was computed by the code as it is now, and
    tables flag the others.

    Where they are (``<folder>``: the store's, :data:`STORES`): ``<folder>/<name>.jsonl.xz`` (the packed cells: one
    JSON record per line, xz-compressed, so the checkout stays small) and ``<folder>/<name>/<cell>.json`` (cells
    finished since the last pack: a run writes one file per cell, cheap and safe to interrupt). A loose cell wins
    over a packed one of the same name. ``python -m reproductions._runner.cells pack`` moves the loose cells into
    the archives (the one command that removes cell files, the ones it packed)."""

    def __init__(self, name: str, sources: tuple[str, ...] = ("flowergraph/**/*.py",)) -> None:
        self.name = name
        self.dir = store_folder(name) / name
        self.archive = store_folder(name) / f"{name}.jsonl.xz"
        self.code = code_state(sources, REPO)
        self._packed: dict[str, dict] | None = None

    def path(self, cell: str) -> Path:
        return self.dir / f"{cell}.json"

    def packed(self) -> dict[str, dict]:
        """The archive's records by cell name (read once)."""
        if self._packed is None:
            import json
            import lzma

            self._packed = {}
            if self.archive.exists():
                with lzma.open(self.archive, "rt") as f:
                    for line in f:
                        if line.strip():
                            record = json.loads(line)
                            self._packed[record["cell"]] = record
        return self._packed

    def records(self) -> Iterator[dict]:
        """Every stored cell's record, in cell-name order (loose ones over packed ones)."""
        import json

        merged = dict(self.packed())
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            record = json.loads(path.read_text())
            record.setdefault("cell", path.stem)  # the oldest cells were stored without their name
            merged[record["cell"]] = record
        for name in sorted(merged):
            yield merged[name]

    def load(self, cell: str) -> dict | None:
        import json

        path = self.path(cell)
        return json.loads(path.read_text()) if path.exists() else self.packed().get(cell)

    def save(self, cell: str, settings: dict, row: dict) -> dict:
        import json

        record = {
            "cell": cell,
            "settings": settings,
            "code": self.code,
            "env": environment(),
            "command": command_line(drop=("--work",)),
            "row": row,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path(cell).with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(self.path(cell))
        return record

    def pack(self, force: bool = False) -> tuple[int, int]:
        """Move the loose cells into the archive (written whole, then renamed into place; only then are the
        loose files it now holds removed). Returns (cells in the archive, loose files packed)."""
        import json
        import lzma

        loose = sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []
        if not loose and not force:
            return len(self.packed()), 0
        records = {r["cell"]: r for r in self.records()}
        tmp = self.archive.with_suffix(".tmp")
        with lzma.open(tmp, "wt", preset=9 | lzma.PRESET_EXTREME) as f:
            for name in sorted(records):
                f.write(json.dumps(records[name], separators=(",", ":")) + "\n")
        tmp.replace(self.archive)
        self._packed = None
        if len(self.packed()) != len(records):  # read back before anything is removed
            raise RuntimeError(f"{self.archive}: wrote {len(records)} cells, read back {len(self.packed())}")
        for path in loose:
            path.unlink()
        return len(records), len(loose)

    def commands(self, keep: Callable[[dict], bool] = lambda row: True) -> list[str]:
        """The distinct commands that computed the stored cells whose row passes ``keep``, in cell-name order
        (cells stored before commands were recorded have none)."""
        found = [r["command"] for r in self.records() if r.get("command") and keep(r["row"])]
        return list(dict.fromkeys(found))

    def current(self, record: dict | None) -> bool:
        """Whether ``record`` was computed by the package's sources as they are now."""
        return record is not None and record.get("code", {}).get("sources") == self.code["sources"]

    def flag(self, record: dict) -> str:
        """'' for a cell of the current code, else a note naming the commit that produced it."""
        if self.current(record):
            return ""
        code = record.get("code", {})
        return f" (older code: {code.get('commit', 'unknown')}{', dirty' if code.get('dirty') else ''})"


def pack_main(argv: list[str] | None = None) -> int:
    """``python -m reproductions._runner.cells pack [NAME ...]``: pack the loose cells of each store (default: every
    one)."""
    import argparse

    parser = argparse.ArgumentParser(description=pack_main.__doc__)
    parser.add_argument("command", choices=["pack"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--force", action="store_true", help="rewrite an archive even with no loose cells")
    a = parser.parse_args(argv)
    for name in a.names or store_names():
        total, moved = CellStore(name).pack(force=a.force)
        print(f"{name}: {total} cells in {CellStore(name).archive.relative_to(REPO)} ({moved} packed now)")
    return 0


# Every store: the folder its cells are kept in (from the repository root) and the module whose SOURCES (and, where
# it has one, same_computation) its cells were hashed with; None: the whole package (CellStore's default).
# tests/test_cell_store.py checks that every store in these folders is named.
STORES: dict[str, tuple[str, str | None]] = {
    "asfgnn": ("reproductions/asfgnn/cells", "reproductions.asfgnn.grid"),
    "deployment_overhead": ("benchmarks/cells", None),
    "fedgraph": ("reproductions/fedgraph/cells", "reproductions.fedgraph.grid"),
    "fedgraph-acceptance": ("reproductions/fedgraph/cells", "reproductions.fedgraph.grid"),
    "fedstar": ("reproductions/fedstar/cells", "reproductions.fedstar.grid"),
    "fedstar-paper-split": ("reproductions/fedstar/cells", "reproductions.fedstar.grid"),
    "flagcns": ("reproductions/flagcns/cells", "reproductions.flagcns.grid"),
    "round_drift": ("benchmarks/cells", None),
}
DEFAULT_FOLDER = "benchmarks/cells"  # a store not named in STORES (a test's)


def store_folder(name: str) -> Path:
    """The folder store ``name``'s archive and loose cells are in."""
    return REPO / STORES.get(name, (DEFAULT_FOLDER, None))[0]


def store_names() -> list[str]:
    """Every store in the stores' folders (an archive or a folder of loose cells)."""
    names = set()
    for folder in {REPO / f for f, _ in STORES.values()} | {REPO / DEFAULT_FOLDER}:
        if folder.is_dir():
            names |= {p.name for p in folder.iterdir() if p.is_dir()}
            names |= {p.name[: -len(".jsonl.xz")] for p in folder.glob("*.jsonl.xz")}
    return sorted(names)


def _sources_of(name: str) -> tuple[tuple[str, ...], Callable[[str], set[str]]]:
    """Store ``name``'s SOURCES and the hashes whose cells the code of a given hash repeats."""
    import importlib

    module = STORES.get(name, (DEFAULT_FOLDER, None))[1]
    grid = importlib.import_module(module) if module else None
    sources = tuple(grid.SOURCES) if grid else ("flowergraph/**/*.py",)
    return sources, getattr(grid, "same_computation", lambda h: {h})


def currency(name: str, against: Path | None = None) -> dict:
    """How many of store ``name``'s cells the code computes as it is now (``current``; a cell of an older hash
    counts where the benchmark's ``same_computation`` says this code repeats it), the older hashes with their
    cell counts and commits, and, with ``against`` (a folder holding another state of the repository's sources),
    how many cells that state's code computes: a refactor that turns current cells into "older code" shows as
    ``current < against``."""
    sources, same = _sources_of(name)
    store = CellStore(name, sources)
    counts: collections.Counter[str | None] = collections.Counter()
    commits: dict[str | None, set[str]] = collections.defaultdict(set)
    for r in store.records():  # one read of the store
        code = r.get("code", {})
        counts[code.get("sources")] += 1
        commits[code.get("sources")].add(code.get("commit", "unknown"))
    now = same(store.code["sources"])
    out = {
        "store": name,
        "sources": store.code["sources"],
        "cells": sum(counts.values()),
        "current": sum(n for h, n in counts.items() if h in now),
        "older": {str(h): (n, sorted(commits[h])) for h, n in counts.items() if h not in now},
    }
    if against is not None:
        then = same(_hash_tree(against, sources)[0])
        out["against"] = sum(n for h, n in counts.items() if h in then)
    return out


def status_main(argv: list[str] | None = None) -> int:
    """``python -m reproductions._runner.cells status [NAME ...] [--against REV]``: for each store, its cells and how
    many are of the current code (the working tree); with ``--against REV`` (e.g. HEAD), also how many are of
    REV's code, and a warning for each store where the working tree has fewer (exit status 1). Run it before
    committing a change to a benchmark's SOURCES: a refactor that changes no number still turns that store's
    cells into "older code"."""
    import argparse
    import subprocess
    import tempfile

    parser = argparse.ArgumentParser(description=status_main.__doc__)
    parser.add_argument("command", choices=["status"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--against", metavar="REV", help="a git revision to compare with (e.g. HEAD)")
    a = parser.parse_intermixed_args(argv)
    stores = store_names()
    names = a.names or stores
    unknown = [n for n in names if n not in stores]
    if unknown:
        parser.error(f"no store {', '.join(map(repr, unknown))}; the stores: {stores}")
    with tempfile.TemporaryDirectory() as tmp:
        against = None
        if a.against:  # the revision's package and benchmark sources, extracted into a folder of this run's own
            tops = sorted({pattern.split("/", 1)[0] for name in names for pattern in _sources_of(name)[0]})
            archive = subprocess.run(
                ["git", "archive", "--format=tar", a.against, *tops], cwd=REPO, capture_output=True
            )
            if archive.returncode:
                parser.error(f"--against {a.against!r}: {archive.stderr.decode().strip()}")
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            against = Path(tmp)
        warnings = []
        for name in names:
            c = currency(name, against)
            older = "; ".join(
                f"{h} x{n} ({', '.join(cs[:3])}{f' and {len(cs) - 3} more' if len(cs) > 3 else ''})"
                for h, (n, cs) in c["older"].items()
            )
            then = f", {c['against']} of {a.against}'s" if against is not None else ""
            print(f"{name}: {c['cells']} cells, {c['current']} of the current code ({c['sources']}){then}")
            if older:
                print(f"  older code: {older}")
            if against is not None and c["current"] < c["against"]:
                warnings.append(
                    f"{name}: the working tree turns {c['against'] - c['current']} of {a.against}'s current cells "
                    "into older code"
                )
    for w in warnings:
        print(f"WARNING {w}")
    return 1 if warnings else 0


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    sys.exit(status_main() if command == "status" else pack_main())
