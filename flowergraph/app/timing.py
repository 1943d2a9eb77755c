"""Where a ClientApp message's time goes: the per-message record ``benchmarks/deployment_overhead.py`` reads.

Off unless the environment variable ``FLOWERGRAPH_MESSAGE_TIMES`` names a file (set it where the SuperNodes start:
every ``flwr-clientapp`` process inherits it). Then every message the ClientApp handles appends one JSON line:

* ``created``: when the process was created (deployment: Flower's ``flwr-clientapp``, one per message);
* ``module``: when :mod:`flowergraph.app.client_app` started to import (``module - created``: Flower's own start:
  interpreter, Flower's imports, pulling the message, context and app from the SuperNode);
* ``start`` / ``end``: the ClientApp's handling of the message (everything flowergraph does);
* ``imports_s``: seconds spent importing modules during the message (torch, PyG, flowergraph's own);
* ``build_s`` / ``build_imports_s``: building the client (settings, the node's data, the model) and the imports
  inside it (``build_s - build_imports_s`` is the data load);
* ``entry``: which ``flwr-clientapp`` started the process (:func:`entry`); ``forked``: the process is a child of
  the SuperNode's fork server (:mod:`flowergraph.app.forkserver`), ``created`` its fork;
* ``worker``: the message ran in the node's warm worker process (:mod:`flowergraph.app.worker`); its own
  ``imports_s`` / ``build_s`` come back with the reply.

Nothing here changes what a message does; with the variable unset every function is a no-op.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

ENV = "FLOWERGRAPH_MESSAGE_TIMES"
MODULE_T0 = time.time()  # replaced by client_app with its own import time (a forked message: the fork's time)
FORKED = False  # set in a child of the SuperNode's fork server (flowergraph.app.forkserver)


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def process_created() -> float:
    """When this process was created (wall clock, seconds since the epoch)."""
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 (timing must never break a message)
        return float("nan")


def entry() -> str | None:
    """Which ``flwr-clientapp`` command started this process: ``"flowergraph"`` (flowergraph's entry,
    :mod:`flowergraph.app.clientapp_entry`), ``"flower"`` (Flower's own), None (no ``flwr-clientapp`` process:
    the simulation's actors, a node worker)."""
    import sys

    if "flowergraph.app.clientapp_entry" in sys.modules:
        return "flowergraph"
    return "flower" if "flwr.supernode.cli.flwr_clientapp" in sys.modules else None


class _Clock(threading.local):
    depth = 0


_LOCAL = _Clock()
_ORIGINAL_IMPORT = builtins.__import__
_TOTALS = {"imports_s": 0.0}
_LOCK = threading.Lock()


def _timed_import(name, globals=None, locals=None, fromlist=(), level=0):
    if _LOCAL.depth:
        return _ORIGINAL_IMPORT(name, globals, locals, fromlist, level)
    _LOCAL.depth += 1
    started = time.perf_counter()
    try:
        return _ORIGINAL_IMPORT(name, globals, locals, fromlist, level)
    finally:
        _LOCAL.depth -= 1
        with _LOCK:
            _TOTALS["imports_s"] += time.perf_counter() - started


class MessageTimes:
    """The record of one message (see the module docstring); :func:`message` creates it."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {
            "start": time.time(),
            "imports_s": 0.0,
            "build_s": 0.0,
            "build_imports_s": 0.0,
            "worker": False,
        }
        self._imports0 = _TOTALS["imports_s"]

    def imports(self) -> float:
        return _TOTALS["imports_s"] - self._imports0

    @contextmanager
    def build(self) -> Iterator[None]:
        t0, i0 = time.perf_counter(), self.imports()
        try:
            yield
        finally:
            self.values["build_s"] += time.perf_counter() - t0
            self.values["build_imports_s"] += self.imports() - i0


_CURRENT: MessageTimes | None = None


@contextmanager
def message() -> Iterator[MessageTimes | None]:
    """Time one message (None when timing is off); the record is complete when the block ends."""
    global _CURRENT
    if not enabled():
        yield None
        return
    builtins.__import__ = _timed_import
    times = _CURRENT = MessageTimes()
    try:
        yield times
    finally:
        times.values["end"] = time.time()
        times.values["imports_s"] += times.imports()
        _CURRENT = None
        builtins.__import__ = _ORIGINAL_IMPORT


@contextmanager
def build() -> Iterator[None]:
    """Inside :func:`message`: the client's build (data and model), timed apart."""
    if _CURRENT is None:
        yield
    else:
        with _CURRENT.build():
            yield


def write(record: dict[str, Any]) -> None:
    """Append one record to the file ``FLOWERGRAPH_MESSAGE_TIMES`` names (one line: appends do not interleave)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps(record, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
