"""Processes and Flower apps on this machine: what the simulation launcher and the deployment tools share.

* processes: :func:`free_port`, :func:`descendants`, :func:`kill_tree` (a process and everything under it, by
  PID: SIGTERM, then SIGKILL after 5 s), :func:`stop_processes`, :func:`stop_trees` (several trees in
  parallel);
* Flower: :func:`flower_env` (the environment every Flower process gets: this venv first on PATH, no
  telemetry, no update check, no runtime ``uv sync``), :func:`write_app` (a throw-away Flower app of this
  package with every run-config key), :func:`write_run_config` (a run-config TOML file for ``flwr run
  --run-config``), :func:`progress_line` (which lines of Flower's log a progress display shows).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

PACKAGE_DIR = Path(__file__).resolve().parent
BIN_DIR = Path(sys.executable).parent


# ------------------------------------------------------------------------------------------------- processes
def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """The PIDs of every process under ``pid`` (recursively); [] if it is gone."""
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def stop_processes(procs: list) -> None:
    """SIGTERM these ``psutil.Process`` objects, SIGKILL those still alive after 5 s, and reap them."""
    import psutil

    for p in procs:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=5)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)


def kill_tree(pid: int) -> None:
    """Stop a process and all its descendants, by PID (SIGTERM, then SIGKILL after 5 s)."""
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    stop_processes(root.children(recursive=True) + [root])


def stop_trees(pids: Sequence[int]) -> None:
    """Stop processes and all their descendants, by PID, in parallel (each: SIGTERM, SIGKILL after 5 s)."""
    threads = [threading.Thread(target=kill_tree, args=(pid,), daemon=True) for pid in pids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)


# ---------------------------------------------------------------------------------------------------- Flower
def flower_env(flwr_home: str | os.PathLike | None = None, **extra: str) -> dict[str, str]:
    """The environment every Flower process gets here: this venv first on PATH (the SuperLink starts
    ``flower-superexec`` by name), no telemetry, no update check, no runtime ``uv sync``."""
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1", PYTHONUNBUFFERED="1", **extra)
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}"
    if flwr_home is not None:
        env["FLWR_HOME"] = str(Path(flwr_home).expanduser().resolve())
    return env


def write_app(app_dir: Path) -> None:
    """A minimal Flower app: this package (Python files only) + a pyproject with every run-config key."""
    from .config import toml_table

    shutil.copytree(PACKAGE_DIR, app_dir / "flowergraph", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (app_dir / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "flowergraph-run"\nversion = "0.1.0"\ndescription = "flowergraph simulation run"\n'
        'license = "Apache-2.0"\ndependencies = []\n\n'
        '[tool.flwr.app]\npublisher = "flowergraph"\nfab-include = ["flowergraph/**/*.py"]\n\n'
        '[tool.flwr.app.components]\nserverapp = "flowergraph.server_app:app"\n'
        'clientapp = "flowergraph.client_app:app"\n\n'
        f"[tool.flwr.app.config]\n{toml_table()}\n")


def write_run_config(path: Path, run_config: dict[str, Any]) -> Path:
    """A TOML file of run-config values, as ``flwr run --run-config FILE`` reads it (dotted keys quoted)."""
    from .config import toml_value

    lines = []
    for key, value in run_config.items():
        name = key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else ".".join(
            part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"' for part in key.split("."))
        lines.append(f"{name} = {toml_value(value)}\n")
    path.write_text("".join(lines))
    return path


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NOISE = ("default simulated SuperNodes changed", "FutureWarning", "warnings.warn(")
_SHOWN = ("[round ", "flowergraph:", "WARNING", "ERROR", "Traceback", "Error", "rejected", "failed")


def progress_line(line: str) -> str | None:
    """The line to show in progress mode (ANSI colours and Flower's level prefix removed), or None."""
    plain = _ANSI.sub("", line)
    if any(n in plain for n in _NOISE):
        return None
    if not any(tag in plain for tag in _SHOWN):
        return None
    return re.sub(r"^INFO\s*:\s*", "", plain)


def tee_output(proc, log_out, stream, *, verbose: bool = False, on_line=None) -> int:
    """Copy every line ``proc`` prints to ``log_out`` (flushed) and, unless ``verbose`` only its
    :func:`progress_line`, to ``stream``; ``on_line(line)`` sees each raw line first. Returns the exit status."""
    assert proc.stdout is not None
    for line in proc.stdout:
        log_out.write(line)
        log_out.flush()
        if on_line is not None:
            on_line(line)
        shown = line if verbose else progress_line(line)
        if shown:
            stream.write(shown)
            stream.flush()
    return proc.wait()
