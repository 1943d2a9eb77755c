"""A warm process per SuperNode and run, so deployment rounds do not pay a process start per message.

Flower 1.41 runs every message a SuperNode receives in a fresh ``flwr-clientapp`` process: it imports Flower,
pulls the message, imports the ClientApp and exits. A flowergraph client then also imports torch and PyG and
rebuilds the node's data: ~8 s of a ~10 s deployment round on 2 cores (``docs/results/deployment_overhead.md``),
paid again by every message of the round and by each of SecAgg+'s four stages. Flower's simulation does not pay it:
its Ray actors live for the whole run.

This module gives deployment what the simulation has. The first message of a run on a node starts a **worker**
(``python -m flowergraph.app.worker serve``, detached from Flower's process tree); every message of that run on
that node is then handed to it over a Unix socket: the ``flwr-clientapp`` process sends the message and its
context, the worker runs flowergraph's ClientApp on them (the same function the process would have run:
:data:`flowergraph.app.client_app.local_app`) and sends the reply and the updated context back, with whatever
the client printed. The ``flwr-clientapp`` process itself then only pays Flower's own start.

* **Nothing depends on it.** Everything a client keeps between messages is in ``context.state``, which travels
  with every message as it always does; the worker keeps only what a Ray actor keeps (imports, the node's data,
  the process cache). When no worker can be used the message runs in the ``flwr-clientapp`` process as before.
* **One per (SuperNode, app code)**: keyed by Flower's node id and the folder the app's code was installed in.
  The runs of one app on a node share it, one after another, as a Ray actor serves one partition after another:
  what it keeps of a run (the node's data in the process cache) is keyed by run and node, and each message sets
  Flower's run, node and task identity first. A new version of the app gets a new worker. Messages are served
  one at a time, as the SuperNode sends them.
* **It ends** when idle for ``FLOWERGRAPH_NODE_WORKER_IDLE`` seconds (default 300; the next message starts a new
  one), when the process that started the ``flwr-clientapp`` processes (Flower's SuperExec, which ends with its
  SuperNode) is gone, or on SIGTERM; it removes its socket and files when it ends.
* **Where**: a Unix socket in Linux's abstract namespace (no file; elsewhere a socket file in the private folder
  below); the worker and the ``flwr-clientapp`` process each check that the other runs as the same user
  (``SO_PEERCRED``) and refuse anyone else. Its lock and output files live in a private folder (mode 700)
  ``$FLOWERGRAPH_CACHE/workers`` (default ``~/.cache/flowergraph/workers``) and go when it ends.
* ``FLOWERGRAPH_NODE_WORKER=off`` on a SuperNode turns it off (every message in its own process, as Flower does);
  it is only ever used under Flower's ``flwr-clientapp`` (never in the simulation, whose actors are already
  warm).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ENV = "FLOWERGRAPH_NODE_WORKER"
IDLE_ENV = "FLOWERGRAPH_NODE_WORKER_IDLE"
WORKER_ENV = "FLOWERGRAPH_IN_NODE_WORKER"  # set in a worker process (in_deployment)
DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 120.0
_HEADER = struct.Struct("!Q")


class NoWorker(RuntimeError):
    """No worker took the message (none could be started or reached): the caller runs it itself."""


class WorkerError(RuntimeError):
    """The node's worker failed while it held a message (it died, or its reply could not be read)."""


# ------------------------------------------------------------------------------------------------ the wire
def _send(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return pickle.loads(_recv_exact(sock, size))


# ------------------------------------------------------------------------------------------- where and who
def enabled() -> bool:
    """Whether messages go to a worker: under Flower's ``flwr-clientapp`` (deployment), unless turned off."""
    if os.environ.get(ENV, "auto").strip().lower() in ("0", "off", "false", "no"):
        return False
    return _under_flwr_clientapp()


def _under_flwr_clientapp() -> bool:
    return Path(sys.argv[0]).name == "flwr-clientapp"


def in_deployment() -> bool:
    """Whether this process answers a deployment SuperNode's messages: Flower's ``flwr-clientapp`` process or the
    node's worker (which it starts). Simulation and in-process runs are not."""
    return os.environ.get(WORKER_ENV) == "1" or _under_flwr_clientapp()


def workers_dir() -> Path:
    """The private folder of this user's workers (sockets, locks, output)."""
    root = os.environ.get("FLOWERGRAPH_CACHE") or os.path.join(Path.home(), ".cache", "flowergraph")
    path = Path(root).expanduser() / "workers"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def code_root() -> Path:
    """The folder the running flowergraph package was imported from (the installed app's folder in deployment)."""
    return Path(__file__).resolve().parents[2]


def worker_key(node_id: int, root: Path | None = None) -> str:
    text = f"{os.getuid()}:{node_id}:{root or code_root()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def address(key: str) -> str:
    """The worker's socket: on Linux a name in the abstract namespace (no file anywhere, gone with the process),
    elsewhere a socket file in :func:`workers_dir`. Either way both ends check that the other runs as this user."""
    if sys.platform.startswith("linux"):
        return f"\0flowergraph-worker-{key}"
    path = str(workers_dir() / f"{key}.sock")
    if len(path) > 100:  # AF_UNIX paths are limited to ~104 bytes
        raise NoWorker(f"the worker socket path {path} is too long; set FLOWERGRAPH_CACHE to a shorter folder")
    return path


def _same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of ``sock`` runs as this user (Linux: SO_PEERCRED)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # a socket file in a folder only this user can open
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == os.getuid()


# ------------------------------------------------------------------------------------------------ the client
def _connect(where: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(where)
        if not _same_user(sock):
            raise NoWorker("the socket of this node's worker belongs to another user")
        sock.settimeout(None)
        return sock
    except OSError:
        sock.close()
        return None
    except NoWorker:
        sock.close()
        raise


def spawn_detached(module: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Start ``python -m module args`` detached (its own session, not a child Flower waits for), its output
    appended to ``log``."""
    with open(log, "ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=dict(os.environ) if env is None else env,
            cwd=os.getcwd(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def connect_or_start(
    where: str, lock: Path, connect: Callable[[str], Any], start: Callable[[], None], timeout: float = START_TIMEOUT_S
) -> Any:
    """``connect(where)``; when nothing listens there, ``start()`` it (one starter at a time: ``lock`` is held
    meanwhile) and connect again for up to ``timeout`` s. None if nothing answered."""
    import fcntl

    sock = connect(where)
    if sock is not None:
        return sock
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        sock = connect(where)
        if sock is None:
            start()
            deadline = time.monotonic() + timeout
            while sock is None and time.monotonic() < deadline:
                time.sleep(0.02)
                sock = connect(where)
    return sock


def _start(key: str, where: str) -> None:
    """Start the worker for ``key``, listening at ``where``."""
    if not where.startswith("\0"):
        Path(where).unlink(missing_ok=True)  # the socket file of a worker that was killed
    env = dict(os.environ)
    root = str(code_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    spawn_detached(
        "flowergraph.app.worker",
        ["serve", "--parent", str(os.getppid()), "--key", key],
        workers_dir() / f"{key}.log",
        env,
    )


def connect(node_id: int) -> socket.socket:
    """A connection to this node's worker (for this app's code), starting the worker if there is none."""
    key = worker_key(node_id)
    where = address(key)
    sock = connect_or_start(where, workers_dir() / f"{key}.lock", _connect, lambda: _start(key, where))
    if sock is None:
        raise NoWorker(
            f"the node's worker did not start within {START_TIMEOUT_S:.0f} s (log: {workers_dir() / (key + '.log')})"
        )
    return sock


def handle(message, context, app: str = "flowergraph.app.client_app:local_app"):
    """Run one message in this node's worker with the ClientApp ``app`` (``module:attribute``): ``(reply,
    times)``; the worker's ``context`` (its ``state``) is copied into ``context``. Exceptions the ClientApp raised
    in the worker are raised here.

    Raises :class:`NoWorker` when no worker took the message (the caller then runs it itself) and
    :class:`WorkerError` when the worker failed while holding it."""
    from .._flower import task_identity

    identity = task_identity()
    request = {"op": "message", "app": app, "message": message, "context": context, "identity": identity}
    for attempt in range(2):  # a worker that was just ending (idle) drops the request unread: start another
        try:
            sock = connect(int(context.node_id))
        except OSError as exc:
            raise NoWorker(f"no worker: {exc}") from exc
        with sock:
            try:
                _send(sock, request)
                ack = _recv(sock)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                if attempt:
                    raise NoWorker(f"the node's worker did not take the message: {exc}") from exc
                continue
            if ack.get("op") != "ack":
                raise NoWorker(f"unexpected answer from the node's worker: {ack!r}")
            try:
                answer = _recv(sock)
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                raise WorkerError(
                    f"the node's worker ended while handling a {message.metadata.message_type} "
                    f"message ({exc}); the next message starts a new one"
                ) from exc
        break
    output = answer.get("output") or b""
    if output:
        sys.stdout.write(output.decode(errors="replace"))
        sys.stdout.flush()
    context.state = answer["context"].state
    if not answer["ok"]:
        raise answer["error"]
    handle.last_pid = answer.get("pid")  # type: ignore[attr-defined]  (tests: which worker answered)
    return answer["reply"], answer.get("times")


def run_message(message, context, app: str, here, *, label: str, module_t0: float):
    """Answer ``message`` in this node's worker with the ClientApp ``app`` (``module:attribute``) when messages go
    to a worker (:func:`enabled`), else (or when no worker takes it) with ``here(message, context)`` in this
    process; with ``FLOWERGRAPH_MESSAGE_TIMES`` set, record where its time went (:mod:`flowergraph.app.timing`;
    ``label`` names the face in the record's ``app``, ``module_t0`` is when the handling module was imported)."""
    from . import timing

    with timing.message() as times:
        reply, worker_times = None, None
        if enabled():
            try:
                reply, worker_times = handle(message, context, app=app)
            except NoWorker as exc:
                from logging import WARNING

                from flwr.common.logger import log

                log(WARNING, "flowergraph: running this message in its own process (%s)", exc)
        if reply is None:
            reply = here(message, context)
    if times is not None:
        record = dict(
            times.values,
            created=timing.process_created(),
            module=timing.MODULE_T0 if timing.FORKED else module_t0,  # forked: imported before the fork
            pid=os.getpid(),
            run_id=int(context.run_id),
            node_id=int(context.node_id),
            partition=str(context.node_config.get("partition-id", "")),
            type=str(message.metadata.message_type),
            group=str(message.metadata.group_id),
            app=label,
            entry=timing.entry(),
            forked=timing.FORKED,
        )
        if worker_times:
            record.update(
                worker=True,
                build_s=worker_times["build_s"],
                build_imports_s=worker_times["build_imports_s"],
                imports_s=record["imports_s"] + worker_times["imports_s"],
                worker_s=worker_times["end"] - worker_times["start"],
            )
        timing.write(record)
    return reply


# ------------------------------------------------------------------------------------------------ the server
class _Output:
    """While a message runs, fds 1 and 2 go to a file; ``take()`` returns what was written and empties it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)

    @contextlib.contextmanager
    def captured(self):
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])

    def take(self) -> bytes:
        os.lseek(self.fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self.fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


def _alive(pid: int, born: float | None) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        return (born is None or proc.create_time() == born) and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _load_app(ref: str):
    import importlib

    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _run_one(request: dict, output: _Output) -> dict:
    from flwr.supercore.task_identity import TaskIdentity

    from . import timing

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = request["identity"]
    message, context = request["message"], request["context"]
    answer: dict[str, Any] = {"ok": True, "context": context}
    with output.captured():
        with timing.message() as times:
            try:
                answer["reply"] = _load_app(request["app"])(message, context)
            except BaseException as exc:  # noqa: BLE001 (raised again in the flwr-clientapp process)
                import traceback

                traceback.print_exc()  # the worker's side of the story, into the SuperNode's log
                try:
                    pickle.dumps(exc)
                except Exception:  # noqa: BLE001
                    exc = RuntimeError(f"{type(exc).__name__}: {exc}")
                answer.update(ok=False, error=exc)
    answer["output"] = output.take()
    answer["times"] = dict(times.values) if times is not None else None
    answer["pid"] = os.getpid()
    return answer


def serve(where: str, parent: int, key: str, idle: float) -> None:
    """Serve messages on the Unix socket ``where`` until idle for ``idle`` s or ``parent`` is gone."""
    import psutil

    try:
        born: float | None = psutil.Process(parent).create_time()
    except psutil.Error:
        born = None
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        server.bind(where)
    finally:
        os.umask(old_umask)
    server.listen(4)
    server.settimeout(1.0)
    folder = workers_dir()
    output = _Output(folder / f"{key}.out")

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle and _alive(parent, born):
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(None)
                if not _same_user(conn):
                    continue
                try:
                    request = _recv(conn)
                except (OSError, EOFError, pickle.UnpicklingError):
                    continue
                if request.get("op") == "message":
                    try:
                        _send(conn, {"op": "ack"})
                    except OSError:
                        continue
                    answer = _run_one(request, output)
                    try:
                        _send(conn, answer)
                    except OSError:
                        pass
            last = time.monotonic()
    finally:
        server.close()
        output.close()
        if not where.startswith("\0"):
            with contextlib.suppress(OSError):
                Path(where).unlink()
        for suffix in (".lock", ".log"):
            with contextlib.suppress(OSError):
                (folder / f"{key}{suffix}").unlink()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.app.worker",
        description="A SuperNode's warm worker (started by flowergraph's ClientApp; see the module docstring).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="serve messages on a Unix socket (started by the ClientApp)")
    run.add_argument("--parent", type=int, required=True, help="stop when this process (Flower's SuperExec) is gone")
    run.add_argument("--key", required=True, help="the worker's key (names its socket and files)")
    run.add_argument(
        "--idle",
        type=float,
        default=None,
        help=f"stop after this many idle seconds (default ${IDLE_ENV} or {DEFAULT_IDLE_S:.0f})",
    )
    args = parser.parse_args(argv)
    os.environ[WORKER_ENV] = "1"  # in_deployment() for the code this worker runs
    idle = args.idle if args.idle is not None else float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S))
    serve(address(args.key), args.parent, args.key, idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
