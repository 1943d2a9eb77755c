"""The shared runner's helpers, for the reproductions (``reproductions/<paper>/``) and the library's benchmarks
(``benchmarks/``) alike: where the data is, the code a result depends on (:func:`code_state`), tables and figures,
the seed-paired statistics, writing docs/results/<name>.md with its command and code line (:func:`write_result`),
computing cells (:func:`run_cells`, ``--jobs``) and sampling a process tree's memory. The cell store is
``cells.py``, the templated prose ``prose.py``."""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "datasets"


# --- The code a result depends on ---------------------------------------------------------------------------------
# One notion for stored cells (cells.CellStore) and results pages (write_result, stale.py): a hash of the code
# (docstrings, comments and layout excluded) of the files matching some globs under the repository.

PACKAGE_SOURCES = ("flowergraph/**/*.py",)  # what a page or cell depends on when it names nothing narrower


_DIGESTS: dict[bytes, bytes] = {}  # a file's bytes' sha256 -> its code digest: one parse per file content


def source_digest(path: Path) -> bytes:
    """A file's code without its docstrings, comments and layout (``ast.dump`` of the module with docstrings
    removed): editing documentation does not change it, editing code does. Memoised per process by the file's
    content (a store or a page hashes the whole package, a test process builds many: one ``ast.parse`` of each
    file's content, not one per call)."""
    import hashlib

    text = path.read_bytes()
    key = hashlib.sha256(text).digest()
    if key not in _DIGESTS:
        _DIGESTS[key] = _code_digest(text.decode())
    return _DIGESTS[key]


def _code_digest(source: str) -> bytes:
    import ast

    tree = ast.parse(source)
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


def hash_tree(root: Path, sources: tuple[str, ...]) -> tuple[str, int]:
    """The sources hash of the files under ``root`` matching ``sources`` (globs, or plain paths), and how many files
    it covers. A file that is gone no longer counts: the hash changes."""
    import hashlib

    digest = hashlib.sha256()
    files = sorted({p for pattern in sources for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(source_digest(path))
    return digest.hexdigest()[:16], len(files)


def code_state(sources: tuple[str, ...] = PACKAGE_SOURCES, root: Path | None = None) -> dict:
    """The code that produces a result: the git commit, whether the working tree differed from it, and a hash of
    the code (docstrings and comments excluded) of the files matching ``sources`` (globs under the repository
    ``root``: the modules on the result's computation path). Two results with the same ``sources`` hash were
    computed by the same code, whatever their commits."""
    import subprocess

    root = REPO if root is None else root
    sources_hash, files = hash_tree(root, sources)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", *sources], cwd=root, capture_output=True, text=True
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", True
    return {"commit": commit, "dirty": dirty, "sources": sources_hash, "files": files}


def loaded_scripts() -> list[str]:
    """The repository's own modules outside the package that this process has imported (the benchmark script,
    common.py, its grid and report modules), as paths from the repository root."""
    found = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        try:
            rel = Path(file).resolve().relative_to(REPO)
        except ValueError:
            continue
        if rel.parts[0] in ("benchmarks", "reproductions"):
            found.add(rel.as_posix())
    return sorted(found)


CODE_LINE = "Code: commit "  # how a results page's code line starts (stale.py finds it by this)


def code_line(globs: tuple[str, ...], root: Path | None = None) -> str:
    """A results page's code line: the commit and the code hash (:func:`code_state`) it was produced on, over
    ``globs`` (files or globs under the repository ``root``), each named so that ``python -m benchmarks.stale`` can
    hash them again."""
    state = code_state(globs, root)
    dirty = " with uncommitted changes" if state["dirty"] else ""
    named = ", ".join(f"`{g}`" for g in globs)
    return f"{CODE_LINE}{state['commit']}{dirty}, code hash {state['sources']} of: {named}."


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


def column_table(columns: list[tuple[str, Callable[[Any], Any]]], items: Iterable[Any]) -> str:
    """A Markdown :func:`table` of ``items``, a row each, with a column per ``(header, the item's value)``: each
    column's header and value are written once, side by side."""
    return table([header for header, _ in columns], [[value(item) for _, value in columns] for item in items])


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


def mean_std(values: list[float], digits: int = 4, missing: str = "n/a") -> str:
    """ "mean ± sample std" of the values that are not None, to ``digits`` decimals; one value alone, or ``missing``
    where there are none."""
    values = [v for v in values if v is not None]
    if not values:
        return missing
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


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
    name: str,
    title: str,
    body: str,
    argv: list[str] | None = None,
    cell_commands: Iterable[str] = (),
    sources: tuple[str, ...] = PACKAGE_SOURCES,
    drop: tuple[str, ...] = (),
) -> Path:
    """Write docs/results/<name>.md with the command that produced it and its code line (:func:`code_line`: the
    commit and the code hash of ``sources``, the package sources its numbers depend on, plus the scripts that
    wrote it), and print it. ``cell_commands``: the commands that computed the stored cells the tables show
    (:meth:`CellStore.commands`); listed under the file's own command where they differ from it (a table rewritten
    with ``--tables-only`` still says how its numbers came). ``sources``: a benchmark whose cells are hashed over
    narrower globs (its ``SOURCES``) passes them; the default is the whole package. ``drop``: options left out of the
    command with their values (:func:`command_line`)."""
    command = command_line(argv, drop)
    others = [c for c in dict.fromkeys(cell_commands) if c and c != command]
    cells = (
        ""
        if not others
        else "Its cells were computed by (each cell records the command that computed it, without `--work`; for "
        "cells stored before that, the commands named by the results files they wrote where the benchmark "
        "keeps them, else none):\n\n```bash\n" + "\n".join(others) + "\n```\n\n"
    )
    code = code_line(tuple(dict.fromkeys([*sources, *loaded_scripts()])))
    text = (
        f"# {title}\n\nProduced by (from the repository root):\n\n```bash\n{command}\n```\n\n{cells}"
        f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} on {machine()}.\n\n{code}\n\n{body}\n"
    )
    out = REPO / "docs" / "results" / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written: {out}")
    return out


def _configure_worker() -> None:
    """A spawned cell worker's torch, set as every benchmark sets its own process (one thread, denormals flushed:
    ``flowergraph.tasks.configure_torch``). A spawned process starts with torch's defaults (a thread per
    core, no flush), so a cell that trains without Flower's in-process runner (which configures torch itself) ran
    there with two threads per worker on two cores and denormals unflushed: FL-AGCNS's FL-Random tried 114 codes in
    a 1,725 s budget against 484 in 1,981 s in the benchmark's own process (2026-12-03)."""
    from flowergraph.tasks import configure_torch

    configure_torch(1)


def run_cells(fn: Callable[..., Any], jobs: list[tuple], workers: int = 1) -> Iterator[tuple[tuple, Any, str | None]]:
    """Compute ``fn(*args)`` for every ``args`` in ``jobs``: one after another in this process (``workers`` 1), else
    in ``workers`` spawned processes, one cell each at a time (``fn`` must then be a module-level function of the
    benchmark script). Yields ``(args, result, None)`` as each cell finishes, so the caller stores it at once, or
    ``(args, None, traceback)`` for a cell that raised: the other cells go on, and the caller reports the failures
    after writing its tables. A cell's own wall time is then measured beside ``workers - 1`` others, as two
    benchmark processes side by side would measure it; each worker's torch is set as this process's
    (:func:`_configure_worker`)."""
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

    with ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_configure_worker
    ) as pool:
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
