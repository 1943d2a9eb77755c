"""``python -m flowergraph.deployment.superlink ARGS``: Flower's ``flower-superlink ARGS``, with a SQLite busy
timeout of :data:`BUSY_TIMEOUT_MS` instead of Flower's 5 s.

Why: the SuperLink keeps its state (runs, tasks, and the messages in transit) in SQLite, and Flower opens each
connection with ``PRAGMA busy_timeout = 5000``. A request that waits longer than that for the write lock fails
with ``database is locked`` and answers HTTP 500. On a loaded machine a large upload holds the lock that long (seen
in CI: FedGCN's CKKS exchange, ~94 MB per node, on 2 busy cores), and a 500 to the SuperExec's task poll is fatal:
Flower does not retry it, the SuperExec exits, and no later run starts (docs/deployment.md, "Troubleshooting").
Flower's in-memory state (``--database :memory:``) is no way out: it shares one SQLite connection between the
server's threads, and under concurrent requests it fails commits and crashed the SuperLink (SIGSEGV) here.

Its SuperExec (which starts each run's ServerApp) looks for a new run every :data:`SUPEREXEC_POLL_S` s instead of
Flower's 1 s, unless ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (Flower's own setting) is set, as the SuperNode's does.

Everything else is Flower's own entry point, unchanged (flwr 1.41; the setting is Flower's module constant
``flwr.supercore.sql_mixin.SQLITE_PRAGMAS``, read when each connection opens).
"""

from __future__ import annotations

import os
import sys
import warnings

BUSY_TIMEOUT_MS = 120_000  # 2 min: several ~100 MB writes queued behind each other on a loaded machine


def patch_busy_timeout(ms: int = BUSY_TIMEOUT_MS) -> bool:
    """Set the busy timeout Flower's SQLite connections open with; False (and a warning) if this Flower version
    no longer has the setting where 1.41 has it."""
    from .. import _flower

    pragmas = _flower.sqlite_pragmas()
    if not pragmas or "busy_timeout" not in dict(pragmas):
        warnings.warn(
            "flwr.supercore.sql_mixin.SQLITE_PRAGMAS has no busy_timeout in this Flower version: the "
            "SuperLink keeps Flower's own SQLite busy timeout",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    _flower.set_sqlite_pragmas(tuple((name, str(ms) if name == "busy_timeout" else value) for name, value in pragmas))
    return True


def main(argv: list[str] | None = None) -> int:
    from flwr.superlink.cli import flower_superlink

    from .supernode import SUPEREXEC_ENV, SUPEREXEC_POLL_S

    os.environ.setdefault(SUPEREXEC_ENV, SUPEREXEC_POLL_S)  # the SuperExec inherits the environment
    patch_busy_timeout()
    sys.argv = ["flower-superlink", *(sys.argv[1:] if argv is None else argv)]
    return flower_superlink() or 0


if __name__ == "__main__":
    sys.exit(main())
