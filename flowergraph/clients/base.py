"""What every flowergraph client shares: its identity, named phases, wrappers, and state checkpoints.

* :class:`FlowergraphClient` is a ``NumPyClient`` that answers the identity request and the method's **phase
  messages** (``get_properties`` messages naming a phase, see :mod:`flowergraph.wire`): a subclass returns
  ``{"<method>.<kind>": handler}`` from :meth:`FlowergraphClient.phase_handlers`, where
  ``handler(arrays, values) -> (arrays, values)``.
* :class:`ClientWrapper` passes every message to an inner client; wrappers override what they change
  (:class:`flowergraph.clients.faults.FaultInjectingClient`, :class:`StateCheckpoints`).
* :class:`StateCheckpoints` answers flowergraph's own two phases for any client: write the node's whole
  ``context.state`` to its node-local ``state-dir`` at a checkpoint, and read it back when a run resumes.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
from flwr.client import NumPyClient

from .. import wire
from .state import ClientState, state_file

PhaseHandler = Callable[[list[np.ndarray], dict[str, Any]], "tuple[list[np.ndarray], dict[str, Any]]"]


def answer_phase(handlers: dict[str, PhaseHandler], partition_id: int, config: dict[str, Any]) -> dict[str, Any]:
    """Run the handler ``config`` names and encode its reply (the client side of a phase message)."""
    name = str(config[wire.PHASE])
    handler = handlers.get(name)
    if handler is None:
        valid = ", ".join(sorted(handlers)) or "none"
        raise ValueError(f"this client does not answer phase {name!r}; valid phases: {valid}")
    arrays, values = handler(wire.unpack_arrays(config), wire.scalars(config))
    bad = [k for k in values if k.startswith(wire.RESERVED_PREFIX)]
    if bad:
        raise ValueError(f"phase {name!r} reply uses the reserved prefix {wire.RESERVED_PREFIX!r}: {bad}")
    return {wire.PARTITION_ID: int(partition_id), **values, **wire.pack_arrays(list(arrays))}


class FlowergraphClient(NumPyClient):
    """A NumPyClient with an identity (``partition_id``) and named phases (see the module docstring)."""

    partition_id: int = 0

    def phase_handlers(self) -> dict[str, PhaseHandler]:
        """``{phase name: handler}``; the default answers no phase."""
        return {}

    def get_properties(self, config):
        """The identity request (which partition this node holds), or a phase message."""
        if wire.PHASE in config:
            return answer_phase(self.phase_handlers(), self.partition_id, dict(config))
        return {wire.PARTITION_ID: int(self.partition_id)}


class ClientWrapper(NumPyClient):
    """Passes every message to ``inner``; subclasses override the messages they change."""

    def __init__(self, inner: NumPyClient) -> None:
        self.inner = inner

    def get_properties(self, config):
        return self.inner.get_properties(config)

    def get_parameters(self, config):
        return self.inner.get_parameters(config)

    def fit(self, parameters, config):
        return self.inner.fit(parameters, config)

    def evaluate(self, parameters, config):
        return self.inner.evaluate(parameters, config)


class StateCheckpoints(ClientWrapper):
    """Answers :data:`~flowergraph.wire.STATE_SAVE` / :data:`~flowergraph.wire.STATE_LOAD` for any client.

    ``state`` is the node's :class:`ClientState`; files go to ``state_dir`` (node-local; empty: the default,
    see :func:`flowergraph.clients.state.state_file`)."""

    def __init__(self, inner: NumPyClient, state: ClientState, partition_id: int,
                 state_dir: str | os.PathLike | None = None) -> None:
        super().__init__(inner)
        self.state = state
        self.partition_id = int(partition_id)
        self.state_dir = state_dir

    def get_properties(self, config):
        phase = config.get(wire.PHASE)
        if phase not in (wire.STATE_SAVE, wire.STATE_LOAD):
            return self.inner.get_properties(config)
        tag, server_round = str(config[wire.RUN_TAG]), int(config[wire.PHASE_ROUND])
        path = state_file(self.state_dir, tag, self.partition_id, server_round)
        if phase == wire.STATE_SAVE:
            self.state.write(path, partition_id=self.partition_id, run_tag=tag, server_round=server_round)
            names = self.state.names()
        else:
            self.state.read(path, partition_id=self.partition_id, run_tag=tag, server_round=server_round)
            names = self.state.names()
        return {wire.PARTITION_ID: self.partition_id, "path": str(path), "records": ",".join(names),
                wire.ARRAY_COUNT: 0}
