"""Client checkpoints: the server's checkpoints for methods whose clients keep state (a part of
:class:`flowergraph.strategies.FederatedStrategy`; usable with any :class:`~flowergraph.strategies.phases.PhaseRunner`).

A method whose clients keep state in ``context.state`` between rounds (the policy's ``stateful_clients``: FedGCN's
received aggregations, FedStar's private models and Adam moments, FedGraph's and ASFGNN's clients) cannot resume
from the server's checkpoint alone. With every server checkpoint, :meth:`ClientCheckpoints.save` asks each
connected client, in a phase ``client-checkpoint`` (message :data:`flowergraph.wire.state.STATE_SAVE`), to write
its state to a file named by the run's tag, its partition and the round
(:func:`flowergraph.clients.state.state_file`); the files each client reported, and the clients that could not save,
are the part's record, kept in the strategy's checkpointed state. A resumed run first calls
:meth:`ClientCheckpoints.restore` (phase ``client-restore``, message ``STATE_LOAD``): every client must load the
state of that round, else the run fails naming the client. The run's tag (12 hex digits) is kept across a resume.
"""

from __future__ import annotations

import uuid
from logging import INFO
from typing import Any

from flwr.common.logger import log

from ..wire.state import STATE_LOAD, STATE_SAVE, StateReply, StateRequest
from .nodes import Node
from .phases import PhaseMessage, PhaseRunner


class ClientCheckpoints:
    """The clients' saved state (see the module docstring): ``run_tag`` names the run's state files, ``last`` is the
    newest client checkpoint (``{"round", "run_tag", "files": {client: path}, "missing": [client, ...]}``, or None),
    ``restored`` tells whether this run restored its clients from one."""

    def __init__(self, phases: PhaseRunner, run_tag: str | None = None) -> None:
        self.phases = phases
        self.run_tag = run_tag or uuid.uuid4().hex[:12]
        self.last: dict[str, Any] | None = None
        self.restored = False

    def save(self, server_round: int, clients: list[Node], timeout: float | None) -> dict[str, Any]:
        """Every client in ``clients`` saves its state for round ``server_round``; returns (and keeps) what was
        saved. A client that cannot save is logged and listed under ``missing``: resuming from this checkpoint then
        fails for it, naming its file."""
        phase = self.phases.begin("client-checkpoint", server_round, timeout=timeout)
        replies = phase.send(
            STATE_SAVE, clients, PhaseMessage(values=StateRequest(self.run_tag).values()), require_all=False
        )
        record = phase.end()
        self.last = {
            "round": server_round,
            "run_tag": self.run_tag,
            "files": {r.client: StateReply.decode(r.values).path for r in replies},
            "missing": [f["client"] for f in record["failures"]],
        }
        log(
            INFO,
            "flowergraph: %d client state file(s) for round %d (%.2f s)%s",
            len(replies),
            server_round,
            record["time_s"],
            f"; MISSING for {record['failures']}" if record["failures"] else "",
        )
        return self.last

    def restore(self, clients: list[Node], timeout: float | None) -> None:
        """Every client in ``clients`` loads the state it saved at :attr:`last` (all must succeed)."""
        ckpt = self.last
        assert ckpt is not None
        phase = self.phases.begin("client-restore", int(ckpt["round"]), timeout=timeout)
        phase.send(
            STATE_LOAD, clients, PhaseMessage(values=StateRequest(str(ckpt["run_tag"])).values()), require_all=True
        )
        record = phase.end()
        self.restored = True
        log(INFO, "flowergraph: every client restored its state of round %s (%.2f s)", ckpt["round"], record["time_s"])

    def state_dict(self) -> dict[str, Any]:
        """``run_tag`` and ``client_checkpoint`` (:attr:`last`), as the strategy's checkpointed state holds them."""
        return {"run_tag": self.run_tag, "client_checkpoint": self.last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.run_tag = str(state.get("run_tag") or self.run_tag)
        self.last = state.get("client_checkpoint")
