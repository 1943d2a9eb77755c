"""Method phases: named message exchanges besides training, sent as queries to many nodes at once (a part of
:class:`flowergraph.strategies.FederatedStrategy`, usable on its own).

A **phase** is one step of a method that is not a training round: FedGCN's one-shot exchange of neighbour
aggregations before round 1, FedGraph's embedding exchange before every round, an architecture-search
generation with several message kinds. :meth:`PhaseRunner.begin` opens one, timed and counted as one record;
:meth:`Phase.send` sends one message kind to a set of clients (the same message, or one per client),
through the runner's :class:`~flowergraph.strategies.nodes.Federation` (the Message API: one push of ``query``
messages; the legacy face: ``get_properties`` calls, at most ``max_parallel`` at once), handing each reply to
``on_reply`` as it arrives (so a server can add ciphertexts while others are still encrypting); :meth:`Phase.end`
closes it and returns its record (``phase``, ``round``, ``time_s``, ``bytes_down``/``bytes_up``, ``messages``,
``failures`` and whatever the method adds). The strategy writes a one-off phase as its own record (FedGCN: round 0 of
``rounds.jsonl``) or adds a per-round phase to that round's record (``phases``).

Failure policy, per send: ``require_all=True`` (every client must answer: a failure raises :class:`PhaseError`
naming the client and the reason) or ``False`` (failed clients are logged, recorded in ``failures`` and left
out; the method goes on with the others). A client that refuses the run because of bad input always fails the
run with its message.

Why queries (``get_properties`` on the legacy face): Flower's client mods for training messages
(``secaggplus_mod``, the differential-privacy mods) act on training messages only; a phase sent as ``fit`` fails
in a ClientApp that carries ``secaggplus_mod`` (``KeyError: 'secaggplus_configs'``). The wire format is in
:mod:`flowergraph.wire`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from logging import WARNING
from typing import Any, Callable

import numpy as np
from flwr.common.logger import log

from .. import wire
from ..wire import PhaseMessage
from .common import config_bytes
from .directory import ClientDirectory, failure_reason, refusal
from .nodes import Federation, Node


class PhaseError(RuntimeError):
    """A client that a phase needed did not answer it."""


@dataclass
class PhaseReply:
    """One client's answer."""

    proxy: Node
    client: str  # label: the partition id
    arrays: list[np.ndarray]
    values: dict[str, Any]


class Phase:
    """One open phase (see the module docstring); made by :meth:`PhaseRunner.begin`."""

    def __init__(self, runner: "PhaseRunner", name: str, server_round: int, timeout: float | None) -> None:
        self.runner = runner
        self.name = name
        self.server_round = int(server_round)
        self.timeout = timeout
        self.record: dict[str, Any] = {
            "round": self.server_round,
            "phase": name,
            "bytes_down": 0,
            "bytes_up": 0,
            "messages": 0,
            "failures": [],
        }
        self._start = time.perf_counter()
        self._lock = threading.Lock()
        self.client_bytes: dict[str, int] = {}  # per client label: bytes sent to it and received from it
        self.sends = 0  # message kinds sent, one after another: the phase's sequential message round trips

    def send(
        self,
        kind: str,
        clients: list[Node],
        message: PhaseMessage | Callable[[Node], PhaseMessage] | None = None,
        *,
        require_all: bool = True,
        on_reply: Callable[[PhaseReply], None] | None = None,
        max_parallel: int | None = None,
        timeout: float | None = None,
    ) -> list[PhaseReply]:
        """Send message ``kind`` to ``clients`` and collect the replies (ordered by client); see the module
        docstring for the failure policy."""
        message = message if message is not None else PhaseMessage()
        timeout = self.timeout if timeout is None else timeout
        directory = self.runner.directory
        replies: list[PhaseReply] = []
        if not clients:
            return replies
        self.sends += 1

        def request(proxy: Node) -> dict[str, Any]:
            msg = message(proxy) if callable(message) else message
            config = wire.phase_message(kind, msg.arrays, self.server_round, model=msg.model, **msg.values)
            size = config_bytes(config)
            label = directory.label(proxy)
            with self._lock:
                self.record["bytes_down"] += size
                self.record["messages"] += 1
                self.client_bytes[label] = self.client_bytes.get(label, 0) + size
            return config

        def handle(proxy: Node, props: dict[str, Any]) -> None:
            size = config_bytes(props)
            with self._lock:
                self.record["bytes_up"] += size
                label = directory.label(proxy)
                self.client_bytes[label] = self.client_bytes.get(label, 0) + size
            try:
                reply = PhaseReply(proxy, directory.label(proxy, props), wire.unpack_arrays(props), wire.scalars(props))
            except ValueError as exc:
                self._failed(proxy, kind, f"undecodable reply ({exc})", require_all)
                return
            if on_reply is not None:
                on_reply(reply)
            replies.append(reply)

        federation = self.runner.federation
        if federation is None:
            raise RuntimeError(f"{self.name}: the phase runner has no federation to send through")
        workers = max(1, min(max_parallel or self.runner.max_parallel, len(clients)))
        requests = ((p, request(p)) for p in clients)  # built as places in flight free: at most `workers` held
        for proxy, outcome in federation.query(requests, timeout, self.server_round, workers):
            if isinstance(outcome, BaseException):
                self._failed(proxy, kind, failure_reason(outcome), require_all)
            else:
                handle(proxy, outcome)
            del outcome  # no reference kept: a large reply is freed once handled
        return sorted(replies, key=lambda r: (0, int(r.client)) if r.client.isdigit() else (1, r.client))

    def _failed(self, proxy: Node, kind: str, reason: str, require_all: bool) -> None:
        label = self.runner.directory.label(proxy)
        node = f" (node {proxy.cid})" if not label.startswith("node") else ""
        if refusal(reason):
            raise RuntimeError(f"{self.name}: client {label}{node} {refusal(reason)}")
        if require_all:
            raise PhaseError(f"{self.name} ({kind}): client {label}{node} failed: {reason}")
        log(WARNING, "%s (%s): client %s%s failed: %s; going on without it", self.name, kind, label, node, reason)
        with self._lock:
            self.record["failures"].append({"client": label, "message": kind, "reason": reason})

    def end(self, **extra: Any) -> dict[str, Any]:
        """Close the phase: its record with ``time_s`` and ``extra``."""
        self.record["time_s"] = time.perf_counter() - self._start
        self.record.update(extra)
        return self.record


def relay(
    phase: Phase,
    clients: list[Node],
    *,
    collect: str,
    request: PhaseMessage | Callable[[Node], PhaseMessage] | None,
    deliver: str,
    route: Callable[[Node, PhaseReply], PhaseMessage],
    on_collect: Callable[[PhaseReply], None] | None = None,
    require_all: bool = True,
) -> list[PhaseReply]:
    """Collect, route, deliver: Flower has no channel between clients, so an exchange among them goes through the
    server. Send ``collect`` (``request``) to ``clients``: each answers with what it owns and what it needs;
    ``on_collect`` sees each answer as it arrives (to add it into running sums and drop it, keeping the server's
    memory to one answer); once every answer is in, ``route(proxy, its answer)`` builds what each client that
    answered receives, sent as ``deliver``. Returns the ``deliver`` replies. FedGCN's exchange of neighbour
    aggregations runs on it (once); so can an embedding exchange (every round)."""
    collected = phase.send(collect, clients, request, on_reply=on_collect, require_all=require_all)
    answered = {reply.proxy.cid: reply for reply in collected}
    targets = [proxy for proxy in clients if proxy.cid in answered]
    return phase.send(deliver, targets, lambda proxy: route(proxy, answered[proxy.cid]), require_all=require_all)


class PhaseRunner:
    """Opens phases for a strategy: ``directory`` names clients, ``max_parallel`` caps messages in flight."""

    def __init__(self, directory: ClientDirectory, *, max_parallel: int = 16) -> None:
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {max_parallel}")
        self.directory = directory
        self.max_parallel = max_parallel
        # How a phase's messages travel: the face's nodes (set by the strategy when a round or its setup
        # starts); ``query(requests, timeout, round, max_parallel)`` yields ``(node, reply values or the
        # exception)`` as replies arrive
        self.federation: Federation | None = None

    def begin(self, name: str, server_round: int = 0, *, timeout: float | None = None) -> Phase:
        return Phase(self, name, server_round, timeout)
