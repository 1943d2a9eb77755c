"""Processes and Flower apps on this machine: what the simulation launcher and the deployment tools share.

* processes: :func:`free_port`, :func:`descendants`, :func:`kill_tree` (a process and everything under it, by
  PID: SIGTERM, then SIGKILL after 5 s), :func:`stop_processes`, :func:`stop_trees` (several trees in
  parallel); :class:`ProcessGroup` (every process a launcher starts, found by a tag in its environment even after
  it left the tree, and stopped by a watchdog process if the launcher itself dies); :func:`stop_on_signals`
  (SIGTERM and SIGHUP unwind a launcher like Ctrl-C, so its ``finally`` blocks stop what it started);
* the temp directory: :func:`private_tmp` (a launcher's own temp folder for itself and every process it starts,
  removed at the end: Ray's session folders, PyG's generated modules and torch's caches go with it);
* what ``flwr run . local`` leaves running: :func:`local_superlink_processes` and :func:`stop_local_superlink`
  (``python -m flowergraph.app.runtime stop [--flwr-home DIR]``): the SuperLink Flower starts in the background
  for a ``FLWR_HOME``, and every process under it (SuperExec, the simulation, Ray), by PID;
* Flower: :func:`flower_env` (the environment every Flower process gets: this venv first on PATH, no
  telemetry, no update check, no runtime ``uv sync``), :func:`write_app` (a throw-away Flower app of this
  package with every run-config key), :func:`write_run_config` (a run-config TOML file for ``flwr run
  --run-config``), :func:`progress_line` (which lines of Flower's log a progress display shows).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

from .clientapp_entry import CHOICES as FAST_CLIENTAPP_CHOICES  # fork, process, off

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the flowergraph package
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


GROUP_ENV = "FLOWERGRAPH_PROCESS_GROUP"


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by :func:`stop_on_signals` when a stop signal arrives (a KeyboardInterrupt, so
    every ``finally`` and ``except KeyboardInterrupt`` of the launcher runs); ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_on_signals(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """Make SIGTERM and SIGHUP (``timeout``, job schedulers, CI runners, container runtimes, a closed terminal)
    raise :class:`Stopped` in the main thread, as Ctrl-C raises KeyboardInterrupt. For command-line launchers'
    ``main``; a library function never changes a process's signal handling."""

    def handler(signum, frame):
        raise Stopped(signum)

    for signum in signums:
        signal.signal(signum, handler)


def run_command(fn: Callable[[], int], what: str = "every process started") -> int:
    """A launcher's ``main``: ``fn()``'s exit status, after installing :func:`stop_on_signals`; bad input
    (a FlowergraphError) prints ``error: ...`` and exits 2; Ctrl-C, SIGTERM and SIGHUP exit 130 / 128 + signal,
    saying that ``what`` was stopped (the launcher's ``finally`` blocks stop it)."""
    from ..errors import FlowergraphError

    stop_on_signals()
    try:
        return fn()
    except FlowergraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"{exc if isinstance(exc, Stopped) else 'interrupted'}; {what} was stopped", file=sys.stderr)
        return exc.exit_code if isinstance(exc, Stopped) else 130


def _tagged(tag: str, exclude: set[int]) -> list:
    """Every live process whose environment carries ``GROUP_ENV=tag`` (psutil.Process objects)."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        if proc.pid in exclude:
            continue
        try:
            if proc.environ().get(GROUP_ENV) == tag:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


class ProcessGroup:
    """Every process a launcher starts (and every process those start), stopped together.

    Each process started with :meth:`env` carries ``FLOWERGRAPH_PROCESS_GROUP=<tag>`` in its environment, which its
    children inherit: the group is found by that tag, so processes that left the tree (Ray's GCS server and
    raylet, a reparented ``flwr-simulation``) are stopped too. :meth:`start` also starts a watchdog process that
    stops the whole group when the process that owns the group dies without stopping it (SIGKILL, a test runner
    killed by a timeout, a crash). Use it as a context manager::

        with ProcessGroup() as group:
            subprocess.Popen(cmd, env=group.env(os.environ), start_new_session=True)
    """

    def __init__(self, tag: str | None = None) -> None:
        self.tag = tag or f"fg-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.watchdog: subprocess.Popen | None = None

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default ``os.environ``) with this group's tag: the environment to start members with."""
        return {**(dict(os.environ) if base is None else base), GROUP_ENV: self.tag}

    def start(self) -> "ProcessGroup":
        """Start the watchdog (once)."""
        if self.watchdog is None:
            env = {k: v for k, v in os.environ.items() if k != GROUP_ENV}
            self.watchdog = subprocess.Popen(
                [sys.executable, "-m", "flowergraph.app.runtime", "watchdog", str(os.getpid()), self.tag],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def members(self) -> list:
        """The group's live processes (psutil.Process objects)."""
        exclude = {os.getpid()} | ({self.watchdog.pid} if self.watchdog is not None else set())
        return _tagged(self.tag, exclude)

    def stop(self) -> list[int]:
        """Stop every member (SIGTERM, SIGKILL after 5 s), then the watchdog; returns the PIDs stopped."""
        stopped: list[int] = []
        for _ in range(3):  # a member may start another while the first ones stop
            procs = self.members()
            if not procs:
                break
            stopped += [p.pid for p in procs]
            stop_processes(procs)
        if self.watchdog is not None:
            if self.watchdog.poll() is None:
                self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None
        return sorted(set(stopped))

    def __enter__(self) -> "ProcessGroup":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _watchdog(parent: int, tag: str, interval: float = 0.5) -> None:
    """Wait until ``parent`` is gone, then stop every process tagged ``tag`` (runs in its own process)."""
    import psutil

    try:
        owner = psutil.Process(parent)
        born = owner.create_time()
    except psutil.NoSuchProcess:
        owner, born = None, None
    while owner is not None:
        try:
            if owner.create_time() != born or owner.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(interval)
    for _ in range(3):
        procs = _tagged(tag, {os.getpid()})
        if not procs:
            return
        stop_processes(procs)


# ------------------------------------------------------------------------------------------------ temp folders
_PRIVATE_TMP: list[str] = []


@contextlib.contextmanager
def private_tmp(prefix: str = "fg"):
    """A temp folder for this launcher and every process it starts (``TMPDIR``, ``tempfile.tempdir``), removed
    with everything in it at the end, so a run leaves nothing in the temp directory: Ray's session folders,
    PyG's generated layer modules, torch's inductor cache, Flower's FAB unpacking. Nested uses share the outer
    folder. Short on purpose: Ray's socket paths under it must stay below 107 bytes.

    Ray puts its sessions under ``$RAY_TMPDIR/ray`` when ``RAY_TMPDIR`` is set, not under ``TMPDIR``: then the run
    gets a second private folder inside the user's ``RAY_TMPDIR`` (so Ray stays where the user put it: a disk
    with room, a short path), set as ``RAY_TMPDIR`` for the run and removed at the end; what the user's
    ``RAY_TMPDIR`` held before (Ray's own ``ray`` folder with its sessions included) is never written to or
    removed. A ``RAY_TMPDIR`` that is empty or not an existing folder (Ray would create it, or write ``./ray``)
    is replaced by the private ``TMPDIR`` folder for the run."""
    import shutil
    import tempfile

    if _PRIVATE_TMP:
        yield Path(_PRIVATE_TMP[-1])
        return
    path = tempfile.mkdtemp(prefix=prefix)
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    saved_ray = os.environ.get("RAY_TMPDIR")
    ray_private = None
    if saved_ray is not None:
        user_ray = Path(saved_ray).expanduser() if saved_ray else None
        try:
            ray_private = tempfile.mkdtemp(prefix=prefix, dir=user_ray) if user_ray and user_ray.is_dir() else None
        except OSError:  # not writable: Ray could not use it either
            ray_private = None
        os.environ["RAY_TMPDIR"] = ray_private or path
    os.environ["TMPDIR"] = tempfile.tempdir = path
    _PRIVATE_TMP.append(path)
    try:
        yield Path(path)
    finally:
        _PRIVATE_TMP.pop()
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        if saved_ray is not None:
            os.environ["RAY_TMPDIR"] = saved_ray
        shutil.rmtree(path, ignore_errors=True)
        if ray_private:
            shutil.rmtree(ray_private, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------- Flower


def clientapp_dir(env: dict[str, str] | None = None) -> Path | None:
    """The folder with flowergraph's ``flwr-clientapp`` for this interpreter (written on first use under
    ``$FLOWERGRAPH_CACHE/bin``, default ``~/.cache/flowergraph/bin``), or None: ``FLOWERGRAPH_FAST_CLIENTAPP=off``
    in ``env`` (default: this process's environment), an interpreter path no script line can name, or a cache
    that cannot be written or that another user could write to (a warning; Flower's own command then runs: the
    script runs with the SuperNode's rights, :func:`flowergraph.app.clientapp_entry.install`)."""
    import hashlib
    import warnings

    from ..errors import ConfigError

    env = os.environ if env is None else env
    value = env.get("FLOWERGRAPH_FAST_CLIENTAPP", "fork").strip().lower()
    if value not in FAST_CLIENTAPP_CHOICES:
        raise ConfigError(
            f"FLOWERGRAPH_FAST_CLIENTAPP={env['FLOWERGRAPH_FAST_CLIENTAPP']!r} is not a valid "
            f"choice; valid choices: {', '.join(FAST_CLIENTAPP_CHOICES)}"
        )
    if value == "off" or any(c.isspace() for c in sys.executable) or len(sys.executable) > 120:
        return None
    root = Path(env.get("FLOWERGRAPH_CACHE") or os.path.join(Path.home(), ".cache", "flowergraph"))
    folder = root / "bin" / hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    try:
        from .clientapp_entry import install

        install(folder, root=root)
    except OSError as exc:  # PermissionError: a folder someone else could write to (the script would run)
        warnings.warn(f"{exc}; SuperNodes run Flower's own flwr-clientapp", RuntimeWarning, stacklevel=2)
        return None
    return folder


def flower_env(flwr_home: str | os.PathLike | None = None, **extra: str) -> dict[str, str]:
    """The environment every Flower process gets here: this venv first on PATH (the SuperLink starts
    ``flower-superexec`` by name), no telemetry, no update check, no runtime ``uv sync``; before the venv on PATH,
    flowergraph's ``flwr-clientapp`` (:mod:`flowergraph.app.clientapp_entry`: Flower's command, run in a child of
    the SuperNode's warm fork server, :mod:`flowergraph.app.forkserver`) unless ``FLOWERGRAPH_FAST_CLIENTAPP=off``."""
    env = dict(
        os.environ,
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    first = [str(BIN_DIR)]
    if (fast := clientapp_dir(env)) is not None:
        first.insert(0, str(fast))
    env["PATH"] = os.pathsep.join([*first, env.get("PATH", "")])
    if flwr_home is not None:
        env["FLWR_HOME"] = str(Path(flwr_home).expanduser().resolve())
    return env


def write_app(app_dir: Path) -> None:
    """A throw-away Flower app of this checkout: this package's Python files and a pyproject with every
    registered key (:func:`flowergraph.app.generator.write_app` with the package)."""
    from .generator import write_app as write

    write(app_dir, with_package=True, name="flowergraph-run")


def write_run_config(path: Path, run_config: dict[str, Any]) -> Path:
    """A TOML file of run-config values, as ``flwr run --run-config FILE`` reads it (dotted keys quoted)."""
    from ..settings import toml_value

    lines = []
    for key, value in run_config.items():
        name = (
            key
            if re.fullmatch(r"[A-Za-z0-9_-]+", key)
            else ".".join(part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"' for part in key.split("."))
        )
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


# ------------------------------------------------------------------------------ what `flwr run . local` leaves
_FLOWER_PROCESSES = (
    "flower-superlink",
    "flower-superexec",
    "flwr-simulation",
    "flwr-serverapp",
    "flwr-clientapp",
    "raylet",
    "gcs_server",
    "ray/",
    "flowergraph.app.worker",
)


def default_flwr_home() -> Path:
    """``$FLWR_HOME``, else Flower's default ``~/.flwr``."""
    return Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr").expanduser().resolve()


def local_superlink_processes(flwr_home: str | os.PathLike | None = None) -> list:
    """The processes ``flwr run . local`` started for ``flwr_home`` and left running (psutil.Process objects):
    the SuperLink (its command line names ``<flwr_home>/local-superlink/``), every process under it, and Flower's
    and Ray's processes that left its tree but carry ``FLWR_HOME=<flwr_home>`` in their environment."""
    import psutil

    home = Path(flwr_home).expanduser().resolve() if flwr_home else default_flwr_home()
    marker = str(home / "local-superlink") + os.sep
    me = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found: dict[int, Any] = {}
    for proc in psutil.process_iter():
        if proc.pid in me:
            continue
        try:
            cmdline = " ".join(proc.cmdline())
            if "flower-superlink" in cmdline and marker in cmdline:
                found[proc.pid] = proc
                found.update((c.pid, c) for c in proc.children(recursive=True) if c.pid not in me)
            elif (
                any(name in cmdline for name in _FLOWER_PROCESSES)
                and proc.environ().get("FLWR_HOME")
                and Path(proc.environ()["FLWR_HOME"]).expanduser().resolve() == home
            ):
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    return list(found.values())


def stop_local_superlink(flwr_home: str | os.PathLike | None = None) -> list[int]:
    """Stop what ``flwr run . local`` left running for ``flwr_home`` (see :func:`local_superlink_processes`), by
    PID: SIGTERM, then SIGKILL after 5 s. Returns the PIDs stopped."""
    procs = local_superlink_processes(flwr_home)
    stop_processes(procs)
    return sorted(p.pid for p in procs)


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.app.runtime", description="Processes on this machine that Flower leaves behind."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    stop = sub.add_parser(
        "stop",
        help="stop the SuperLink that `flwr run . local` started in the background",
        description="Stop the SuperLink that `flwr run . local` started for a FLWR_HOME (it "
        "keeps running after the command), with every process under it (SuperExec, "
        "the simulation, Ray), by PID.",
    )
    stop.add_argument(
        "--flwr-home",
        default=None,
        metavar="DIR",
        help="the FLWR_HOME the SuperLink was started with (default: $FLWR_HOME, else ~/.flwr)",
    )
    stop.add_argument("--dry-run", action="store_true", help="list the processes, stop nothing")
    watchdog = sub.add_parser("watchdog", help="(internal) stop a process group when its owner dies")
    watchdog.add_argument("parent", type=int, help="the owner's PID")
    watchdog.add_argument("tag", help="the group's tag")
    args = parser.parse_args(argv)
    if args.command == "watchdog":
        _watchdog(args.parent, args.tag)
        return 0
    home = Path(args.flwr_home).expanduser().resolve() if args.flwr_home else default_flwr_home()
    procs = local_superlink_processes(home)
    if not procs:
        print(f"nothing running for FLWR_HOME={home}")
        return 0
    for p in procs:
        try:
            print(f"{'would stop' if args.dry_run else 'stopping'} {p.pid}: {' '.join(p.cmdline())[:150]}")
        except Exception:  # noqa: BLE001 (it may have ended meanwhile)
            pass
    if not args.dry_run:
        stop_processes(procs)
        print(f"stopped {len(procs)} process(es) of the local SuperLink for FLWR_HOME={home}")
    return 0


if __name__ == "__main__":  # python -m flowergraph.app.runtime stop | watchdog PARENT_PID TAG (ProcessGroup's)
    sys.exit(_main())
