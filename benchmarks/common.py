"""Shared helpers for the benchmark scripts: where the data is, tables, writing docs/results/<name>.md."""

from __future__ import annotations

import functools
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "datasets"


def data_dir() -> str:
    path = Path(os.environ.get("FLOWERGRAPH_DATA", DEFAULT_DATA))
    if not (path / "Planetoid").is_dir():
        sys.exit(f"raw datasets not found at {path}; set FLOWERGRAPH_DATA")
    return str(path.resolve())


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table. A ``|`` inside a cell is escaped (``\\|``; GitHub splits cells on it even inside code
    spans), unless it already is."""
    import re

    def fmt(v):
        if isinstance(v, float):
            v = f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
        return re.sub(r"(?<!\\)\|", r"\\|", str(v))

    lines = ["| " + " | ".join(fmt(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot():
    """matplotlib's ``pyplot`` on the file-only Agg backend: benchmarks draw to files, never to a screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, name: str) -> str:
    """Lay ``fig`` out, write it to ``docs/results/<name>`` (110 dpi), close it and return ``name``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(REPO / "docs" / "results" / name, dpi=110)
    plt.close(fig)
    return name


def mean_std(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def ahead_level_behind(diffs: Iterable[float], sep: str = " / ") -> str:
    """How many seed-paired differences (first minus second) are above, at and under zero, as "a / l / b": the
    count every paired table prints beside its mean difference."""
    diffs = list(diffs)
    return sep.join(str(n) for n in (sum(d > 0 for d in diffs), sum(d == 0 for d in diffs), sum(d < 0 for d in diffs)))


def t_interval(diffs: Iterable[float], level: float = 0.95, *, one_run: bool = False) -> tuple[float, float] | None:
    """The two-sided Student-t interval (``level`` coverage, n - 1 degrees of freedom; None under 2 values) of the
    mean of seed-paired differences, or with ``one_run`` the prediction interval of one more run's difference
    (mean ± t * s * sqrt(1 + 1/n)): where a single run, such as a paper's, would fall. The spread is what changes
    from seed to seed, so it holds the split's variance only where a seed draws the split."""
    diffs = list(diffs)
    if len(diffs) < 2:
        return None
    from scipy.stats import t

    n = len(diffs)
    half = float(t.ppf(0.5 + level / 2, n - 1)) * statistics.stdev(diffs) * (int(one_run) + 1 / n) ** 0.5
    mean = statistics.mean(diffs)
    return mean - half, mean + half


def interval_text(interval: tuple[float, float] | None, digits: int = 1) -> str:
    """``[low, high]`` with signs, as the paired tables print an interval ("-" without one)."""
    return "-" if interval is None else f"[{interval[0]:+.{digits}f}, {interval[1]:+.{digits}f}]"


def paired_figure(
    rows: list[tuple[str, list[float], float | None]],
    name: str,
    xlabel: str,
    title: str = "",
    target: tuple[str, float] | None = None,
) -> str | None:
    """A forest plot of seed-paired differences, one line per ``(label, differences, paper)`` (top to bottom in
    the given order): each seed's difference (grey dots), their mean (black), the 95% t-interval of the mean (thick
    bar), the 95% range of one run (thin bar; both as :func:`t_interval`, from 2 seeds) and the paper's difference
    (red cross; None: none); ``target`` = (label, value) adds a dashed line there. Written to
    ``docs/results/<name>``; returns ``name`` (None without rows)."""
    rows = [r for r in rows if r[1]]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.42 * len(rows)))
    named: set[str] = set()

    def once(name: str) -> str | None:  # each legend entry from its first mark only
        if name in named:
            return None
        named.add(name)
        return name

    for y, (label, diffs, paper) in enumerate(reversed(rows)):
        if (one_run := t_interval(diffs, one_run=True)) is not None:
            ax.plot(one_run, [y, y], color="0.7", lw=1.2, label=once("95% range of one run"))
        if (mean_ci := t_interval(diffs)) is not None:
            ax.plot(
                mean_ci, [y, y], color="tab:blue", lw=4, solid_capstyle="butt", label=once("95% interval of the mean")
            )
        ax.scatter(diffs, [y + 0.18] * len(diffs), s=12, color="0.45", zorder=3, label=once("one seed"))
        ax.scatter([statistics.mean(diffs)], [y], s=28, color="black", zorder=4, label=once("mean"))
        if paper is not None:
            ax.scatter([paper], [y], marker="x", s=50, color="tab:red", zorder=5, label=once("paper"))
    ax.axvline(0, color="black", lw=0.8)
    if target is not None:
        ax.axvline(target[1], color="tab:green", lw=1, ls="--", label=target[0])
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, name)


def outside(value: float, interval: tuple[float, float] | None) -> str:
    """Where ``value`` lies against ``interval``: "above", "below" or "inside" ("-" without an interval)."""
    if interval is None:
        return "-"
    return "above" if value > interval[1] else "below" if value < interval[0] else "inside"


def machine() -> str:
    import torch

    return f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__}"


def command_line(argv: list[str] | None = None, drop: tuple[str, ...] = ()) -> str:
    """The benchmark command ``argv`` (default: this process's) as typed from the repository root; each option in
    ``drop`` is left out with its value (e.g. ``--work``: a machine's scratch folder, not part of the result)."""
    argv = list(sys.argv if argv is None else argv)
    args, i = [], 1
    while i < len(argv):
        a = argv[i]
        if a in drop:
            i += 2
            continue
        if any(a.startswith(f"{d}=") for d in drop):
            i += 1
            continue
        args.append(a)
        i += 1
    return ".venv/bin/python " + " ".join(shlex.quote(a) for a in [os.path.relpath(argv[0], REPO), *args])


def write_result(
    name: str, title: str, body: str, argv: list[str] | None = None, cell_commands: Iterable[str] = ()
) -> Path:
    """Write docs/results/<name>.md with the command that produced it, and print it. ``cell_commands``: the commands
    that computed the stored cells the tables show (:meth:`CellStore.commands`); listed under the file's own
    command where they differ from it (a table rewritten with ``--tables-only`` still says how its numbers came)."""
    command = command_line(argv)
    others = [c for c in dict.fromkeys(cell_commands) if c and c != command]
    cells = (
        ""
        if not others
        else "Its cells were computed by (each cell records the command that computed it, without `--work`; for "
        "cells stored before that, the commands named by the results files they wrote where the benchmark "
        "keeps them, else none):\n\n```bash\n" + "\n".join(others) + "\n```\n\n"
    )
    text = (
        f"# {title}\n\nProduced by (from the repository root):\n\n```bash\n{command}\n```\n\n{cells}"
        f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} on {machine()}.\n\n{body}\n"
    )
    out = REPO / "docs" / "results" / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written: {out}")
    return out


def run_cells(fn: Callable[..., Any], jobs: list[tuple], workers: int = 1) -> Iterator[tuple[tuple, Any, str | None]]:
    """Compute ``fn(*args)`` for every ``args`` in ``jobs``: one after another in this process (``workers`` 1), else
    in ``workers`` spawned processes, one cell each at a time (``fn`` must then be a module-level function of the
    benchmark script). Yields ``(args, result, None)`` as each cell finishes, so the caller stores it at once, or
    ``(args, None, traceback)`` for a cell that raised: the other cells go on, and the caller reports the failures
    after writing its tables. A cell's own wall time is then measured beside ``workers - 1`` others, as two
    benchmark processes side by side would measure it."""
    if workers < 1:
        raise ValueError(f"workers={workers}: must be >= 1 (1 computes the cells in this process)")
    import traceback

    if workers == 1:
        for args in jobs:
            try:
                yield args, fn(*args), None
            except Exception:  # reported by the caller once the finished cells are stored
                yield args, None, traceback.format_exc()
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(fn, *args): args for args in jobs}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result(), None
            except Exception:  # a cell that raised, or a worker that died (BrokenProcessPool)
                yield futures[future], None, traceback.format_exc()


def add_jobs(parser, note: str = "") -> None:
    """The ``--jobs`` option every method benchmark has (cells computed at once, :func:`run_cells`); a count under 1
    is the parser's error, naming the value."""

    def count(text: str) -> int:
        import argparse

        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(
                f"{text!r}: must be a whole number >= 1 (cells computed at once, each "
                "in its own process; 1 runs them here, one after another)"
            )
        return int(text)

    parser.add_argument(
        "--jobs",
        type=count,
        default=1,
        help="cells computed at once, each in its own process with one torch thread (default 1: "
        "here, one after another)" + (f"; {note}" if note else ""),
    )


class TreeMemorySampler:
    """Samples the summed PSS (proportional set size: shared pages split between their users, so summing
    over processes does not double-count) of this process and all its descendants every ``interval`` s
    (1 s by default: reading smaps of ~20 processes is not free on 2 cores).

        with TreeMemorySampler() as mem: ...
        mem.peak_mb
    """

    def __init__(self, pid: int | None = None, interval: float = 1.0):
        import threading

        self.pid = pid or os.getpid()
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> list:
        """The sampled process and all its descendants now (empty once it has ended)."""
        import psutil

        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _total(self) -> int:
        import psutil

        total = 0
        for p in self._processes():
            try:
                total += p.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._total())
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


# --------------------------------------------------------------------------------------------------- cell store
def _source_digest(path: Path) -> bytes:
    """A file's code without its docstrings, comments and layout (``ast.dump`` of the module with docstrings
    removed): editing documentation does not change it, editing code does."""
    import ast

    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False).encode()


def code_state(sources: tuple[str, ...] = ("flowergraph/**/*.py",)) -> dict:
    """The code that produces a benchmark cell: the git commit, whether the working tree differed from it, and a
    hash of the code (docstrings and comments excluded) of the files matching ``sources`` (globs under the
    repository: the modules on the cell's computation path). Two cells with the same ``sources`` hash were
    computed by the same code, whatever their commits."""
    import hashlib
    import subprocess

    digest = hashlib.sha256()
    files = sorted({p for pattern in sources for p in REPO.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(_source_digest(path))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", *sources], cwd=REPO, capture_output=True, text=True
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", True
    return {"commit": commit, "dirty": dirty, "sources": digest.hexdigest()[:16], "files": len(files)}


RUN_CODE = "bench-code.json"  # in a cell's run folder: the code state that wrote the run


@functools.lru_cache(maxsize=None)
def _sources_hash(sources: tuple[str, ...]) -> str:
    return code_state(sources)["sources"]


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

    Where they are: ``benchmarks/cells/<name>.jsonl.xz`` (the packed cells: one JSON record per line, xz-
    compressed, so the checkout stays small) and ``benchmarks/cells/<name>/<cell>.json`` (cells finished since
    the last pack: a run writes one file per cell, cheap and safe to interrupt). A loose cell wins over a packed
    one of the same name. ``python benchmarks/common.py pack`` moves the loose cells into the archives (the one
    command that removes cell files, the ones it packed)."""

    def __init__(self, name: str, sources: tuple[str, ...] = ("flowergraph/**/*.py",)) -> None:
        self.name = name
        self.dir = REPO / "benchmarks" / "cells" / name
        self.archive = REPO / "benchmarks" / "cells" / f"{name}.jsonl.xz"
        self.code = code_state(sources)
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
    """``python benchmarks/common.py pack [NAME ...]``: pack the loose cells of each store (default: every one)."""
    import argparse

    parser = argparse.ArgumentParser(description=pack_main.__doc__)
    parser.add_argument("command", choices=["pack"])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--force", action="store_true", help="rewrite an archive even with no loose cells")
    a = parser.parse_args(argv)
    root = REPO / "benchmarks" / "cells"
    names = a.names or sorted(
        {p.name for p in root.iterdir() if p.is_dir()} | {p.name[: -len(".jsonl.xz")] for p in root.glob("*.jsonl.xz")}
    )
    for name in names:
        total, moved = CellStore(name).pack(force=a.force)
        print(f"{name}: {total} cells in {CellStore(name).archive.relative_to(REPO)} ({moved} packed now)")
    return 0


if __name__ == "__main__":
    sys.exit(pack_main())
