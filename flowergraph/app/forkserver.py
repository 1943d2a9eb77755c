"""A warm template process per SuperNode that runs each message's ``flwr-clientapp`` in a forked child.

Why: a SuperNode starts a fresh ``flwr-clientapp`` process for every message it receives, and each pays the
interpreter's start and Flower's imports before it asks for its message: ~1.1 s of CPU per message (126 such
processes took 136 s of CPU in the every-method deployment test, 2 cores) and, with three nodes' processes
starting at once on 2 cores, seconds of each round's wall time. The node worker (:mod:`flowergraph.app.worker`)
already keeps torch, PyG and the node's data warm; this keeps Flower's own start warm too.

How: flowergraph's ``flwr-clientapp`` (:mod:`flowergraph.app.clientapp_entry`, which flowergraph's tools put first
on a SuperNode's PATH) connects to the SuperNode's fork server, hands it its arguments, environment, working folder
and its standard input, output and error (passed as file descriptors), and waits. The server forks; the child takes
those descriptors, arguments and environment and runs Flower's own ``flwr_clientapp()``, unchanged (Flower's
arguments, protocol, heartbeats, exit handling); the server reports the child's exit status and the entry exits with
it. A signal the entry gets (the SuperExec stopping the message) goes on to the child; a child whose entry is gone
(killed) stops too.

* **One per SuperNode**: keyed by this user, the interpreter, flowergraph's code folder and the SuperNode's Runtime
  API address (each SuperNode has its own). Started by the first message, detached (its own session).
* **Single-threaded**: forking a process whose other threads hold a lock copies the lock held. The server runs one
  ``select`` loop that accepts requests and reaps children, and imports only Flower's command and flowergraph's
  ClientApp module (no torch: the node worker has it), neither of which starts a thread.
* **It ends** when it has no child and no request for ``FLOWERGRAPH_FORK_SERVER_IDLE`` seconds (default 300), when
  the SuperExec that started it is gone, or on SIGTERM (after its children).
* **Who can use it**: a Unix socket in Linux's abstract namespace; both ends check that the other runs as the same
  user (``SO_PEERCRED``). Linux only; elsewhere, and whenever no server can be started or reached, the entry runs
  Flower's command in its own process (``FLOWERGRAPH_FAST_CLIENTAPP=process`` always does).
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .worker import _alive, _recv, _same_user, _send, code_root, connect_or_start, spawn_detached, workers_dir

IDLE_ENV = "FLOWERGRAPH_FORK_SERVER_IDLE"
PACING_ENV = "FLOWERGRAPH_SUPERNODE_POLLING"  # flowergraph.deployment.supernode's switch: "flower" turns it off
DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 60.0
COMMAND = "flowergraph.app.clientapp_entry:load"  # returns Flower's flwr_clientapp function
_FDS = 3  # stdin, stdout, stderr
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what the entry passes on to its child


class NoForkServer(RuntimeError):
    """No fork server took the request: the caller runs Flower's command itself."""


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "SO_PEERCRED")


def server_key(runtime_api_address: str, root: Path | None = None) -> str:
    text = f"{os.getuid()}:{sys.executable}:{root or code_root()}:{runtime_api_address}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _address(key: str) -> str:
    return f"\0flowergraph-forkserver-{key}"


def runtime_api_address(argv: list[str]) -> str:
    """The ``--runtime-api-address`` in ``flwr-clientapp``'s arguments (Flower's default if absent)."""
    for i, arg in enumerate(argv):
        if arg == "--runtime-api-address" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--runtime-api-address="):
            return arg.split("=", 1)[1]
    return "default"


# ---------------------------------------------------------------------------------------- the entry's side
def _connect(where: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(where)
        if not _same_user(sock):
            sock.close()
            raise NoForkServer("the fork server's socket belongs to another user")
        sock.settimeout(None)
        return sock
    except OSError:
        sock.close()
        return None


def connect(key: str, command: str = COMMAND, env: dict[str, str] | None = None) -> socket.socket:
    """A connection to the fork server ``key``, starting it if there is none (running ``command``, a
    ``module:loader`` whose loader returns the function each child calls; in ``env``, default this process's)."""

    def start() -> None:
        args = ["serve", "--key", key, "--parent", str(os.getppid())]
        if command != COMMAND:
            args += ["--command", command]
        spawn_detached("flowergraph.app.forkserver", args, workers_dir() / f"fork-{key}.log", env=env)

    sock = connect_or_start(_address(key), workers_dir() / f"fork-{key}.lock", _connect, start, START_TIMEOUT_S)
    if sock is None:
        raise NoForkServer(f"the fork server did not start within {START_TIMEOUT_S:.0f} s (log: fork-{key}.log)")
    return sock


def run(
    argv: list[str],
    *,
    key: str | None = None,
    command: str = COMMAND,
    server_env: dict[str, str] | None = None,
    argv0: str = "flwr-clientapp",
) -> int:
    """Run ``flwr-clientapp argv`` in a child of this SuperNode's fork server, with this process's standard input,
    output, error, environment and folder; forward SIGTERM, SIGINT and SIGHUP to it; return its exit status (a
    child ended by a signal: 128 + the signal, as a shell reports it). Raises :class:`NoForkServer` before anything
    ran when no server takes the request. ``key``, ``command``, ``server_env`` and ``argv0``: another fork server
    (see :mod:`flowergraph.app.inline_entry`), the environment it is started in and the child's ``sys.argv[0]``."""
    if not supported():
        raise NoForkServer("fork servers need Linux")
    try:
        sock = connect(key or server_key(runtime_api_address(argv)), command, server_env)
    except OSError as exc:
        raise NoForkServer(f"no fork server: {exc}") from exc
    request = {"argv": list(argv), "argv0": argv0, "env": dict(os.environ), "cwd": os.getcwd(), "entry": os.getpid()}
    data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    child: list[int] = []  # the child's pid, once the server names it
    pending: list[int] = []  # signals that came before

    def forward(signum: int, frame: Any) -> None:
        if not child:
            pending.append(signum)
            return
        with contextlib.suppress(OSError):
            os.kill(child[0], signum)

    with sock:
        for signum in _FORWARDED:
            signal.signal(signum, forward)
        try:
            fds = array.array("i", [0, 1, 2])
            sock.sendmsg([struct.pack("!Q", len(data)), data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            started = _recv(sock)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            for signum in _FORWARDED:
                signal.signal(signum, signal.SIG_DFL)
            if pending:  # stopped before anything ran
                return 128 + pending[0]
            raise NoForkServer(f"the fork server did not take the request: {exc}") from exc
        child.append(int(started["pid"]))
        for signum in pending:
            forward(signum, None)
        try:
            ended = _recv(sock)
        except (OSError, EOFError, pickle.UnpicklingError):  # the server died: wait for the child on our own
            while _alive(child[0], None):
                time.sleep(0.2)
            return 1
    code = int(ended["status"])
    return 128 - code if code < 0 else code


# --------------------------------------------------------------------------------------- the server's side
def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """The request and the descriptors passed with it (closed by the caller)."""
    header, ancdata, _flags, _addr = conn.recvmsg(8, socket.CMSG_SPACE(_FDS * array.array("i").itemsize))
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(payload[: len(payload) - (len(payload) % got.itemsize)])
            fds.extend(got)
    while header and len(header) < 8:  # the rest of the length, if the first read stopped short
        more = conn.recv(8 - len(header))
        if not more:
            break
        header += more
    if len(header) != 8:
        for fd in fds:
            os.close(fd)
        raise EOFError("no request")
    (size,) = struct.unpack("!Q", header)
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return pickle.loads(b"".join(chunks)), fds


def _child(request: dict, fds: list[int], command: Callable[[], Callable[[], None]], close: list[socket.socket]):
    """In the forked child: become the entry's ``flwr-clientapp`` process and run Flower's command. Never
    returns."""
    code = 1
    try:
        for sock in close:
            sock.close()
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        for signum in (*_FORWARDED, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)  # blocked by the server across the fork
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from . import timing

        timing.MODULE_T0 = time.time()  # "Flower's start" of a forked message: from the fork on
        timing.FORKED = True
        _watch_entry(int(request["entry"]))
        # Flower's exit handling tells commands apart by name (and flowergraph tells a ClientApp process by it)
        sys.argv = [request.get("argv0", "flwr-clientapp"), *request["argv"]]
        command()()
        code = 0
    except SystemExit as exc:  # Flower's flwr_exit ends the command with sys.exit(code)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _watch_entry(entry: int) -> None:
    """A thread of the child that ends it when its entry process is gone (killed: nobody waits for the reply)."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(entry, 0)
            except ProcessLookupError:
                os._exit(128 + signal.SIGKILL)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="flowergraph-entry-watch", daemon=True).start()


def serve(key: str, parent: int, idle: float, command_ref: str = COMMAND) -> None:
    """Serve fork requests on the socket of ``key`` until idle for ``idle`` s, ``parent`` is gone, or SIGTERM."""
    import importlib

    import psutil

    module, _, attribute = command_ref.partition(":")
    loader = getattr(importlib.import_module(module), attribute)
    command = loader()  # Flower's flwr_clientapp, imported before any fork
    with contextlib.suppress(ImportError):
        importlib.import_module("flowergraph.app.client_app")  # what every child loads next (imports Flower only)
    # the SuperNode's switch, inherited (a SuperNode's fork server only)
    if command_ref == COMMAND and os.environ.get(PACING_ENV, "fast").strip().lower() != "flower":
        from .polling import fast_object_pulls

        fast_object_pulls()  # each child pulls its message's contents from a SuperNode still receiving them
    try:
        born: float | None = psutil.Process(parent).create_time()
    except psutil.Error:
        born = None
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(_address(key))
    server.listen(16)
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    children: dict[int, socket.socket] = {}
    last = next_check = time.monotonic()
    try:
        while True:
            while children:  # reap: report each ended child's status to its entry
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    with conn, contextlib.suppress(OSError):
                        _send(conn, {"status": os.waitstatus_to_exitcode(status)})
                last = time.monotonic()
            if not children and (stopping or time.monotonic() - last > idle):
                break
            if time.monotonic() >= next_check:  # the SuperExec, once a second (psutil is not free)
                next_check = time.monotonic() + 1.0
                if not children and not _alive(parent, born):
                    break
            if stopping:
                time.sleep(0.05)
                continue
            ready, _, _ = select.select([server], [], [], 0.05)
            if not ready:
                continue
            conn, _ = server.accept()
            fds: list[int] = []
            try:
                if not _same_user(conn):
                    conn.close()
                    continue
                request, fds = _recv_request(conn)
                if len(fds) != _FDS:
                    raise EOFError(f"{len(fds)} descriptors, not {_FDS}")
            except (OSError, EOFError, pickle.UnpicklingError, KeyError):
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            # a signal for the child that comes before it has Flower's (or the default) handlers must wait for
            # them, not run this server's handler in the child: blocked across the fork, unblocked in the child
            # once its handlers are the default ones
            signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
            pid = os.fork()
            if pid == 0:
                _child(request, fds, command, [server, conn, *children.values()])
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
            for fd in fds:
                os.close(fd)
            try:
                _send(conn, {"pid": pid})
            except OSError:
                pass
            children[pid] = conn
            last = time.monotonic()
    finally:
        server.close()
        with contextlib.suppress(OSError):
            (workers_dir() / f"fork-{key}.lock").unlink()
            (workers_dir() / f"fork-{key}.log").unlink()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.app.forkserver",
        description="A SuperNode's fork server (started by flowergraph's flwr-clientapp; see the module docstring).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("serve", help="serve fork requests on a Unix socket (started by the entry)")
    run_parser.add_argument("--key", required=True, help="the server's key (names its socket and files)")
    run_parser.add_argument("--parent", type=int, required=True, help="stop when this process (the SuperExec) is gone")
    run_parser.add_argument("--idle", type=float, default=None, help=f"idle seconds (default ${IDLE_ENV} or 300)")
    run_parser.add_argument("--command", default=COMMAND, help=argparse.SUPPRESS)  # tests: a stand-in command
    args = parser.parse_args(argv)
    idle = args.idle if args.idle is not None else float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S))
    serve(args.key, args.parent, idle, args.command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
