"""``python -m flowergraph.app.inline_entry ARGS``: ``python -m flowergraph.app.inline ARGS`` (the inline engine's
run, :mod:`flowergraph.app.inline`) in a child forked from a warm process, for a process that launches many runs.

Why: each inline run is a fresh interpreter that imports torch, PyG, Flower and flowergraph before its first round:
~3.5 s of CPU on this project's 2-core machine, more than many short runs (tests, sweeps of small cells) spend
training. With ``FLOWERGRAPH_INLINE_FORK=on`` the launcher (:func:`flowergraph.simulation.run_inline_app`) starts
this entry instead: it hands its arguments, environment, folder and standard streams to a **fork server** that has
those modules imported (:mod:`flowergraph.app.forkserver`, the same mechanism as a SuperNode's), which forks a
child that runs the inline engine's ``main`` exactly as the fresh interpreter would. Signals to the entry go on to
the child, and a child whose entry is killed stops within a second, so the launcher's timeout and stop signals
work as before.

* **One server per launching process** (keyed by this user, the interpreter, flowergraph's code folder, the
  launcher's process, and the run's ``PYTHONPATH`` and ``FLOWERGRAPH_PLUGINS``), started by its first run,
  detached, without the run's process-group tag (it outlives the run). It ends with the launcher, after
  ``FLOWERGRAPH_FORK_SERVER_IDLE`` idle seconds (default 300), or on SIGTERM; it holds what the imports hold
  (~0.4 GB, shared with its children).
* **Off by default**: a forked run is not in the launcher's process tree, so a memory sampler of that tree
  (``benchmarks/``) would miss it. The test suite turns it on (``tests/conftest.py``). Where no server can be
  started or reached, the entry runs the inline engine in its own process, as without the switch.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Callable

ENV = "FLOWERGRAPH_INLINE_FORK"
COMMAND = "flowergraph.app.inline_entry:load"
INLINE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inline.py")  # argv[0] of `python -m`


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "on", "true", "yes")


def load() -> Callable[[], None]:
    """The fork server's loader (run once, before any fork): import what every inline run imports, and return the
    function each child calls. Nothing here starts a thread or touches torch's state."""
    import torch  # noqa: F401
    import torch_geometric  # noqa: F401

    from . import client_app, inline, server_app  # noqa: F401

    started_in = sys.path[0] if sys.path else None  # `python -m` puts the folder it was started in first

    def child() -> None:
        import tempfile

        tempfile.tempdir = None  # read TMPDIR from the run's environment, not the server's
        if started_in is not None and sys.path and sys.path[0] == started_in:
            sys.path[0] = os.getcwd()  # the run's folder, as `python -m flowergraph.app.inline` there would have
        sys.exit(inline.main(sys.argv[1:]))

    return child


def server_key() -> str:
    """This launching process's server (the entry's parent): user, interpreter, code folder, process and start,
    and what decides which modules and plugins a run imports (``PYTHONPATH``, ``FLOWERGRAPH_PLUGINS``): a run
    whose differ gets a server of its own, started in its environment."""
    from .worker import code_root

    parent = os.getppid()
    try:
        import psutil

        born = psutil.Process(parent).create_time()
    except Exception:  # noqa: BLE001 (a key without the start time is still this process's)
        born = 0.0
    imports = f"{os.environ.get('PYTHONPATH', '')}:{os.environ.get('FLOWERGRAPH_PLUGINS', '')}"
    text = f"{os.getuid()}:{sys.executable}:{code_root()}:inline:{parent}:{born}:{imports}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    from .forkserver import NoForkServer, run
    from .runtime import GROUP_ENV

    argv = sys.argv[1:] if argv is None else argv
    server_env = {k: v for k, v in os.environ.items() if k != GROUP_ENV}  # the server outlives this run's group
    try:
        return run(argv, key=server_key(), command=COMMAND, server_env=server_env, argv0=INLINE_SCRIPT)
    except NoForkServer as exc:
        print(f"flowergraph: running the inline engine in this process ({exc})", file=sys.stderr, flush=True)
    from .inline import main as inline_main

    return inline_main(argv)


if __name__ == "__main__":
    sys.exit(main())
