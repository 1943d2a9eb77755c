"""``python -m flowergraph.deployment.supernode ARGS``: Flower's ``flower-supernode ARGS``, picking up the next
message of a round sooner.

Why: a SuperNode's loop (Flower 1.41/1.42, ``flwr.supernode.start_client_internal``) asks the SuperLink for a
message and, when there is none, sleeps 3 s before asking again; while the ClientApp works on a message it looks
for the reply every 0.5 s; and its SuperExec looks for a message to start a ClientApp process for every 1 s
(``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``). A round is a burst: the fit message, the evaluation, a method's phases,
SecAgg+'s four stages each come within milliseconds of the reply before them, and each waited for those polls,
~2.5 s on average (measured: ``docs/results/deployment_overhead.md``).

What this changes, and nothing else (Flower's own entry point runs, with its arguments, protocol and exit codes):

* after a message, the next ask comes :data:`FIRST_POLL_S` later, then each wait grows by x :data:`BACKOFF` up to
  Flower's 3 s: an idle node asks as often as Flower's, a busy one sooner (the loop's ``time.sleep(3)``);
* the reply of a running ClientApp is looked for every :data:`REPLY_POLL_S` instead of 0.5 s (a look in the
  SuperNode's own state: no network);
* the SuperExec the SuperNode starts polls every :data:`SUPEREXEC_POLL_S` s unless
  ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` is set (Flower's own setting, read by Flower 1.42's SuperExec);
* the node tells the SuperLink a heartbeat interval of :data:`HEARTBEAT_S` s (Flower's smallest allowed value)
  instead of 30 s, and beats accordingly (every ~4 s instead of ~20 s): the SuperLink takes a node for gone after
  2 intervals without a beat, so a round whose SuperNode died goes on with the others after ~20 s instead of ~60 s;
* the node's pulls of a message's contents that have not reached the SuperLink yet are retried after 50 ms,
  doubling up to 0.5 s, instead of after 1 s doubling up to 10 s (:func:`flowergraph.app.polling.fast_object_pulls`;
  the SuperNode's fork server does the same for its ClientApp processes).

If this Flower version's SuperNode loop is not where 1.41/1.42 have it, the SuperNode runs as Flower made it,
with a warning. ``FLOWERGRAPH_SUPERNODE_POLLING=flower`` turns the change off.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any, Callable

FLOWER_IDLE_S = 3.0  # the loop's wait after an empty ask (start_client_internal: time.sleep(3))
FLOWER_REPLY_S = 0.5  # its waits for a reply and for a reply's contents (time.sleep(0.5))
FIRST_POLL_S = 0.05
BACKOFF = 1.5
REPLY_POLL_S = 0.05
SUPEREXEC_POLL_S = "0.2"
HEARTBEAT_S = 10  # Flower's HEARTBEAT_MIN_INTERVAL (the SuperLink refuses less); Flower's default: 30
SUPEREXEC_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"
ENV = "FLOWERGRAPH_SUPERNODE_POLLING"  # "fast" (default) or "flower"
CHOICES = ("fast", "flower")


class Pacing:
    """Stands in for the ``time`` module inside Flower's SuperNode loop: its 3 s idle wait becomes a wait that
    starts at ``first`` after each message (:meth:`message_arrived`) and grows by ``backoff`` up to ``idle``; its
    0.5 s reply waits become ``reply``. Every other use of ``time`` is the real module's."""

    def __init__(
        self,
        real: Any = time,
        *,
        first: float = FIRST_POLL_S,
        backoff: float = BACKOFF,
        idle: float = FLOWER_IDLE_S,
        reply: float = REPLY_POLL_S,
    ) -> None:
        self._real = real
        self.first, self.backoff, self.idle, self.reply = first, backoff, idle, reply
        self.next_wait = idle  # until the first message: Flower's pace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def message_arrived(self) -> None:
        self.next_wait = self.first

    def sleep(self, seconds: float) -> None:
        if seconds == FLOWER_IDLE_S:
            seconds, self.next_wait = self.next_wait, min(self.next_wait * self.backoff, self.idle)
        elif seconds == FLOWER_REPLY_S:
            seconds = self.reply
        self._real.sleep(seconds)


def patch_polling(module: Any = None) -> Pacing | None:
    """Make Flower's SuperNode loop (``module``, default ``flwr.supernode.start_client_internal``) pace its polls
    with a :class:`Pacing`; None (and a warning) where the loop is not as in Flower 1.41/1.42."""
    from .. import _flower

    if module is None:
        module = _flower.supernode_loop()
    pull: Callable[..., Any] | None = _flower.supernode_pull(module)
    if pull is None or getattr(module, "time", None) is not time:
        warnings.warn(
            f"{module.__name__} is not as in Flower 1.41/1.42 (no _pull_and_store_message or time): the "
            "SuperNode polls at Flower's own pace",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    pacing = Pacing()

    def pull_and_note(*args: Any, **kwargs: Any) -> Any:
        run_id = pull(*args, **kwargs)
        if run_id is not None:  # a message came: the next one of the round is likely right behind it
            pacing.message_arrived()
        return run_id

    _flower.set_supernode_pull(module, pull_and_note, pacing)
    return pacing


def patch_heartbeat(interval: float = HEARTBEAT_S, modules: tuple[Any, ...] | None = None) -> bool:
    """Make the SuperNode announce and keep a heartbeat ``interval`` (s): Flower reads its
    ``HEARTBEAT_DEFAULT_INTERVAL`` in the node's connection (announced to the SuperLink) and in the heartbeat
    sender (how often it beats). False (and a warning), changing nothing, where either module lacks it."""
    from .. import _flower

    if modules is None:
        modules = _flower.heartbeat_modules()
    lacking = [
        m.__name__ for m in modules if not isinstance(getattr(m, "HEARTBEAT_DEFAULT_INTERVAL", None), (int, float))
    ]
    if lacking:
        warnings.warn(
            f"{', '.join(lacking)} has no HEARTBEAT_DEFAULT_INTERVAL in this Flower version: the SuperNode "
            "keeps Flower's own heartbeat",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    _flower.set_heartbeat(modules, interval)
    return True


def main(argv: list[str] | None = None) -> int:
    mode = os.environ.get(ENV, "fast").strip().lower()
    if mode not in CHOICES:
        print(f"{ENV}={os.environ[ENV]!r} is not a valid choice; valid choices: {', '.join(CHOICES)}", file=sys.stderr)
        return 2
    if mode == "fast":
        from ..app.polling import fast_object_pulls

        os.environ.setdefault(SUPEREXEC_ENV, SUPEREXEC_POLL_S)  # the SuperExec inherits the environment
        patch_polling()
        patch_heartbeat()
        fast_object_pulls()  # the message's contents, pulled from the SuperLink
    from flwr.supernode.cli import flower_supernode

    sys.argv = ["flower-supernode", *(sys.argv[1:] if argv is None else argv)]
    return flower_supernode() or 0


if __name__ == "__main__":
    sys.exit(main())
