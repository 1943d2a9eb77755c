"""Bounded disk for client checkpoints: :class:`KeepNewestStates` deletes a node's older state files.

A client's state file is written on its own machine (:class:`flowergraph.clients.base.StateCheckpoints`), so
only the client can delete it: the server cannot reach a SuperNode's disk. With run config
``checkpoint-keep = N`` the server keeps its newest N checkpoints and every client its newest N + 1 state files:
the clients save before the server does, so a run stopped between the two still finds, for each checkpoint the
server kept, the clients' files of that round.
"""

from __future__ import annotations

from logging import INFO
from pathlib import Path

from flwr.common.logger import log

from .. import wire
from ..storage.checkpoint import prune_rounds, round_of_file
from ..wire.state import STATE_SAVE, StateReply
from .base import Client, ClientWrapper


class KeepNewestStates(ClientWrapper):
    """After each :data:`~flowergraph.wire.STATE_SAVE` the wrapped client answered, deletes the older state files
    in the folder it wrote to, keeping the newest ``keep`` (rounds after the one just written are left alone,
    as :func:`flowergraph.storage.checkpoint.prune_rounds` says). Wrap :class:`StateCheckpoints` with it."""

    def __init__(self, inner: Client, keep: int) -> None:
        super().__init__(inner)
        if int(keep) < 1:
            raise ValueError(f"keep={keep!r}: must be >= 1 (leave the client unwrapped to keep every file)")
        self.keep = int(keep)

    def get_properties(self, config):
        props = self.inner.get_properties(config)
        if config.get(wire.PHASE) == STATE_SAVE:
            path = Path(StateReply.decode(props).path)
            written = round_of_file(path)
            if written is not None:
                for old in prune_rounds(path.parent, self.keep, written):
                    log(INFO, "flowergraph: checkpoint-keep: deleted client state %s", old)
        return props
