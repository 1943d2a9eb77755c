"""A Grid wrapper that waits for client replies with short, adaptive polls.

Flower's legacy server loop (``start_grid``: one thread per client, each calling ``grid.send_and_receive``
with a single message) waits for replies by polling: ``InMemoryGrid`` (simulation) sleeps a fixed 0.1 s
between polls and ``HttpGrid`` (deployment) a fixed 3 s. A reply that is ready after 5 ms is therefore
collected 0.1 s (or 3 s) later, and every fit and evaluate phase of a round is rounded up to that tick: with
fast clients it is most of the round (10 no-op clients on Cora: 0.42 s per fit + evaluate round).

:class:`PollingGrid` delegates everything to the grid it wraps and only replaces ``send_and_receive``: it
pushes the messages and polls ``pull_messages`` after 2 ms, then backs off geometrically (x1.5) to
``max_interval``. Fast replies are collected within milliseconds, slow ones cost at most one poll per
``max_interval``; a poll that cost more CPU is followed by a longer pause, so that polling takes at most
``poll_share`` (5 %) of the wait (:func:`poll_pause`). It uses only the public :class:`flwr.serverapp.Grid` API.

It also counts what crosses it: ``bytes_pushed`` and ``bytes_pulled`` add up the payload of every message
(``count_bytes()`` of each record: arrays, configs, metrics), whatever sent it: the legacy loop, a Flower fit
workflow such as SecAgg+ (whose stages the strategy never sees), or a method's phases. Inside
``with grid.recording() as rec:`` it also lists every ``send_and_receive`` in ``rec.exchanges`` as ``(messages
sent, replies received, seconds)`` (a fit workflow's stages, one entry each) and the reason of every error reply
in ``rec.errors`` (a workflow such as SecAgg+ drops a failed client and goes on; the caller can still see why).

:func:`fast_object_pulls` does the same for the pulls of a deployment's message contents (below).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from logging import WARNING
from typing import Iterable

from flwr.app import Message
from flwr.common.logger import log
from flwr.serverapp import Grid

from .._flower import object_push_errors


POLL_SHARE = 0.05


def poll_pause(cost: float, share: float = POLL_SHARE) -> float:
    """The least pause after a poll that cost ``cost`` s of CPU, so that polling takes at most ``share`` of the
    wait. A poll asks about every pending message, and Flower's in-memory link state answers under the lock its
    engine needs to store replies and hand out messages: at 1,000 clients on the inline engine a poll of the whole
    round's messages every 2-50 ms held it for ~1.5 s of an ~8 s round. Polls of a few messages (the end of a
    round) cost microseconds, so the last replies are still collected within ``max_interval``."""
    return cost * (1.0 / share - 1.0)


class PollingGrid(Grid):
    """Wraps ``grid``; ``send_and_receive`` polls after ``min_interval`` s, backing off to ``max_interval`` s."""

    def __init__(
        self,
        grid: Grid,
        *,
        min_interval: float = 0.002,
        max_interval: float = 0.05,
        backoff: float = 1.5,
        poll_share: float = POLL_SHARE,
    ) -> None:
        if not 0 < poll_share <= 1:
            raise ValueError(f"poll_share must be in (0, 1], got {poll_share}")
        if not 0 < min_interval <= max_interval:
            raise ValueError(f"need 0 < min_interval <= max_interval, got {min_interval} and {max_interval}")
        if backoff < 1:
            raise ValueError(f"backoff must be >= 1, got {backoff}")
        self.grid = grid
        self.min_interval = min_interval
        self.max_interval = max_interval
        self.backoff = backoff
        self.poll_share = poll_share
        self.bytes_pushed = 0
        self.bytes_pulled = 0
        self.refused_pushes = 0  # pushes that raised ObjectPushError after storing their messages (above)
        self._recording: Recording | None = None
        fast_object_pulls()  # a deployment's grid pulls each reply's contents as objects (below)

    # ------------------------------------------------------------------------------ delegated API
    def set_run(self, run) -> None:
        self.grid.set_run(run)

    @property
    def run(self):
        return self.grid.run

    def create_message(self, *args, **kwargs) -> Message:
        return self.grid.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return self.grid.get_node_ids()

    def get_nodes(self):
        return self.grid.get_nodes()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Push ``messages``; returns their ids, as the wrapped grid does.

        Where the SuperLink stored the messages but then refused one of their objects (Flower's
        ``ObjectPushError``: "not pre-registered", seen on a loaded machine when concurrent pushes carry the same
        arrays and a node confirms an earlier message meanwhile), the messages are already in the SuperLink and
        the object is there by another push: their ids are returned, so their replies are waited for (a node that
        cannot get a message's contents replies with an error or not at all: the caller's timeout and failure
        policy handle it), instead of failing clients that did receive the message and reply."""
        messages = list(messages)
        self.bytes_pushed += sum(message_bytes(m) for m in messages)
        try:
            return self.grid.push_messages(messages)
        except object_push_errors() as exc:
            ids = [m.metadata.message_id for m in messages]
            if not all(ids):  # not stored: nothing to wait for
                raise
            self.refused_pushes += 1
            log(
                WARNING,
                "the SuperLink refused an object of %d pushed message(s) (%s); waiting for replies",
                len(ids),
                exc,
            )
            return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        pulled = list(self.grid.pull_messages(message_ids))
        self.bytes_pulled += sum(message_bytes(m) for m in pulled)
        return pulled

    def __getattr__(self, name):  # anything else a grid offers
        return getattr(self.__dict__["grid"], name)

    # ---------------------------------------------------------------------------------- the change
    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        """Push ``messages`` and collect their replies until all arrived or ``timeout`` s passed (None: wait
        for all), as Flower's grids do, but polling after 2 ms, 3 ms, ... up to ``max_interval``."""
        started = time.monotonic()
        pending = set(self.push_messages(messages))
        sent = len(pending)
        deadline = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        delay = self.min_interval
        while pending:
            cpu = time.thread_time()
            pulled = list(self.pull_messages(pending))
            pause = max(delay, poll_pause(time.thread_time() - cpu, self.poll_share))
            replies.extend(pulled)
            pending.difference_update(m.metadata.reply_to_message_id for m in pulled)
            if not pending:
                break
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                time.sleep(min(pause, remaining))
            else:
                time.sleep(pause)
            delay = min(delay * self.backoff, self.max_interval)
        if self._recording is not None:
            self._recording.exchanges.append((sent, len(replies), time.monotonic() - started))
            self._recording.errors.extend(error_reason(m) for m in replies if _has_error(m))
        return replies

    @contextlib.contextmanager
    def recording(self):
        """Within the block, ``send_and_receive`` calls and error replies are listed in the yielded
        :class:`Recording` (see the module docstring)."""
        self._recording = Recording()
        try:
            yield self._recording
        finally:
            self._recording = None


@dataclass
class Recording:
    """What :meth:`PollingGrid.recording` saw: ``(sent, received, seconds)`` per exchange; error replies' reasons."""

    exchanges: list[tuple[int, int, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _has_error(message) -> bool:
    try:
        return bool(message.has_error())
    except Exception:  # noqa: BLE001 (a reply we cannot inspect is not an error we can report)
        return False


def error_reason(message) -> str:
    """The reason Flower gives for an error reply (the client's exception text, wrapped)."""
    try:
        return str(message.error.reason)
    except Exception:  # noqa: BLE001
        return "unknown error"


def message_bytes(message: Message) -> int:
    """Payload bytes of ``message``: its records' ``count_bytes()`` (0 for an error reply)."""
    try:
        if not message.has_content():
            return 0
        return int(sum(record.count_bytes() for record in message.content.values()))
    except Exception:  # noqa: BLE001 (counting must never break a run)
        return 0


# ------------------------------------------------------------------------------ a deployment's object pulls
# Flower (1.42) moves a message's contents as objects of their own, after the message: the ServerApp pushes the
# message, then its arrays; a SuperNode that has pulled the message pulls its objects from the SuperLink, and
# hands the message to its SuperExec (a ClientApp process starts) before it has them all; the ClientApp pulls
# them from the SuperNode. Whoever pulls an object that has not arrived yet waits (pull_objects: 1 s, doubling to
# 10 s) and asks again. A message of megabytes arrives a few seconds after its head, so each hop rounded it up to
# 1 + 2 + 4 (+ 8) s: FL-AGCNS's 2.5 MB evaluation messages took 16-27 s from the ClientApp's start to its handler
# (the every-method deployment test), with the handler itself taking 0.1 s.
OBJECT_PULL_FIRST_S = 0.05  # the first wait (Flower: 1 s), doubling ...
OBJECT_PULL_CAP_S = 0.5  # ... up to this (Flower: 10 s; its own reply-polling interval is 0.5 s)
_FLOWER_PULL_DEFAULTS: dict[str, dict] = {}  # Flower's own defaults, per function, before the first change


def fast_object_pulls(first: float = OBJECT_PULL_FIRST_S, cap: float = OBJECT_PULL_CAP_S) -> bool:
    """Make this process's pulls of message objects (Flower's ``pull_objects`` and
    ``pull_and_inflate_object_from_tree``, used by the SuperNode, the ClientApp and the ServerApp's grid) wait
    ``first`` s after an object that has not arrived yet, doubling up to ``cap`` s, instead of 1 s doubling up to
    10 s. The number of tries per object grows by Flower's cap / ``cap``, so an object that never arrives is given
    up on after as long as before (and ``max_time``, Flower's bound on the whole pull, is left as it is). Nothing
    else changes (what is pulled, the errors, the concurrency). False (and a warning), changing nothing, where
    this Flower version's functions lack those keyword defaults; idempotent. In-memory grids (simulation) never
    pull objects: there it changes nothing."""
    from .._flower import PULL_KEYS, object_pull_functions, set_object_pull_defaults

    functions = object_pull_functions()
    if functions is None:
        warnings.warn(
            "flwr.supercore.inflatable's pull functions are not as in Flower 1.42 (keyword defaults "
            f"{', '.join(PULL_KEYS)}): message objects are pulled at Flower's pace",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    for fn, kw in functions:
        flower = _FLOWER_PULL_DEFAULTS.setdefault(fn.__qualname__, {k: kw[k] for k in PULL_KEYS})
        backoff_cap = min(cap, flower["backoff_cap"])
        set_object_pull_defaults(
            fn,
            initial_backoff=min(first, flower["initial_backoff"]),
            backoff_cap=backoff_cap,
            max_tries_per_object=int(round(flower["max_tries_per_object"] * flower["backoff_cap"] / backoff_cap)),
        )
    return True
