"""What every flowergraph client shares: its identity, named phases, the fit/evaluate template, wrappers, and
state checkpoints.

* :class:`Client` is what every flowergraph client is: four methods over plain values (``get_properties``,
  ``get_parameters``, ``fit``, ``evaluate``: numpy arrays and dicts), with no Flower type. flowergraph's Message-API
  handlers (:mod:`flowergraph.app.message_client`) call them; the legacy stack's client is one adapter
  (:mod:`flowergraph.app.legacy`).
* :class:`FlowergraphClient` is a :class:`Client` that answers the identity request and the method's **phase
  messages** (``get_properties`` messages naming a phase, see :mod:`flowergraph.wire`): a subclass returns
  ``{"<method>.<kind>": handler}`` from :meth:`FlowergraphClient.phase_handlers`, where
  ``handler(request: PhaseRequest) -> (arrays, values)`` (the request carries the phase's round, arrays, values and
  the model the server sent with it, if any).
* :class:`FederatedClient` is the template of a training client: ``fit`` loads what it received, evaluates it first
  when the server fuses evaluation into training, trains and returns what it shares; ``evaluate`` loads and
  evaluates; the partition id, fused evaluation and named arrays are handled once, here.
* :class:`ClientWrapper` passes every message to an inner client; wrappers override what they change
  (:class:`flowergraph.clients.faults.FaultInjectingClient`, :class:`StateCheckpoints`).
* :class:`StateCheckpoints` answers flowergraph's own two phases for any client: write the node's whole
  ``context.state`` to its node-local ``state-dir`` at a checkpoint, and read it back when a run resumes.
"""

from __future__ import annotations

import inspect
import math
import os
from typing import Any, Callable, Mapping, Union

import numpy as np
from .. import wire
from ..wire import PhaseRequest
from ..wire.state import STATE_LOAD, STATE_SAVE, StateReply, StateRequest
from .state import ClientState, state_file

PhaseHandler = Callable[[PhaseRequest], "tuple[list[np.ndarray], dict[str, Any]]"]
Arrays = Union[list[np.ndarray], Mapping[str, np.ndarray]]


def _old_handler(handler: Callable) -> bool:
    """Whether ``handler`` has the signature before 0.3, ``(arrays, values)`` (two required positional
    parameters): refused naming the new one."""
    try:
        params = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    return len(required) >= 2


def answer_phase(handlers: dict[str, Callable], partition_id: int, config: dict[str, Any]) -> dict[str, Any]:
    """Run the handler ``config`` names and encode its reply (the client side of a phase message)."""
    request = wire.decode_phase(config)
    handler = handlers.get(request.kind)
    if handler is None:
        valid = ", ".join(sorted(handlers)) or "none"
        raise ValueError(f"this client does not answer phase {request.kind!r}; valid phases: {valid}")
    if _old_handler(handler):  # the signature before PhaseRequest existed
        raise TypeError(
            f"phase handler for {request.kind!r} takes (arrays, values); a phase handler takes one "
            f"flowergraph.wire.PhaseRequest (its .arrays, .values, .round, .model): "
            f"def handler(request) -> (arrays, values) (0.3 removed the old signature)"
        )
    arrays, values = handler(request)
    return wire.phase_reply(partition_id, list(arrays), values)


class Client:
    """A flowergraph client: what a node answers, as plain values (no Flower type).

    * ``get_properties(config) -> dict``: the identity request, or a phase message (:mod:`flowergraph.wire`);
    * ``get_parameters(config) -> list[np.ndarray]``: its initial model;
    * ``fit(arrays, config) -> (arrays, num_examples, metrics)``: train on the arrays the server sent;
    * ``evaluate(arrays, config) -> (loss, num_examples, metrics)``.

    The same four methods (and signatures) as Flower's legacy NumPy client, so the legacy face adapts a client
    without changing it (:class:`flowergraph.app.legacy.LegacyClient`)."""

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        return {}

    def get_parameters(self, config: dict[str, Any]) -> list[np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} has no initial model (get_parameters)")

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict]:
        raise NotImplementedError(f"{type(self).__name__} does not train (fit)")

    def evaluate(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[float, int, dict]:
        raise NotImplementedError(f"{type(self).__name__} does not evaluate")


class FlowergraphClient(Client):
    """A :class:`Client` with an identity (``partition_id``) and named phases (see the module docstring)."""

    partition_id: int = 0

    def phase_handlers(self) -> dict[str, PhaseHandler]:
        """``{phase name: handler}``; the default answers no phase."""
        return {}

    def get_properties(self, config):
        """The identity request (which partition this node holds), or a phase message."""
        if wire.PHASE in config:
            return answer_phase(self.phase_handlers(), self.partition_id, dict(config))
        return {wire.PARTITION_ID: int(self.partition_id)}


class FederatedClient(FlowergraphClient):
    """The template of a client that trains (see the module docstring). A subclass implements:

    * :meth:`load` (copy what the server sent into its model; ``keys`` are the arrays' names when the server sent
      them with :data:`~flowergraph.wire.KEYS`, else None: the arrays are the shared part in the client's order);
    * :meth:`train` (local training; returns its number of examples, which the server weighs the update by, and
      metrics such as ``train_loss``);
    * :meth:`shared_arrays` (what it sends back: a list, or a mapping name -> array whose names travel too);
    * :meth:`evaluation` (metrics of the model as loaded: ``accuracy``, ``loss``, ``num_test``, ``val_*``).
    """

    def load(self, arrays: list[np.ndarray], keys: list[str] | None, config: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def train(self, config: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def shared_arrays(self) -> Arrays:
        raise NotImplementedError

    def evaluation(self) -> dict[str, Any]:
        raise NotImplementedError

    def model_keys(self) -> list[str] | None:
        """The names (state-dict keys) of the arrays ``get_parameters`` returns, told to the server in the
        identity reply so that it can hold the model by name (None: the server names them by position)."""
        return None

    def get_properties(self, config):
        props = super().get_properties(config)
        if wire.PHASE not in config:  # the identity reply: also the model's names
            keys = self.model_keys()
            if keys is not None:
                props[wire.KEYS] = wire.encode_keys(keys)
        return props

    def _receive(self, parameters, config) -> None:
        arrays = list(parameters)
        self.load(arrays, wire.decode_keys(config, len(arrays)), config)

    def _outgoing(self, metrics: dict[str, Any]) -> list[np.ndarray]:
        out = self.shared_arrays()
        if isinstance(out, Mapping):
            metrics[wire.KEYS] = wire.encode_keys(out.keys())
            return [np.asarray(a) for a in out.values()]
        return list(out)

    def get_parameters(self, config):
        return self._outgoing({})

    def fit(self, parameters, config):
        self._receive(parameters, config)
        metrics: dict[str, Any] = {}
        if config.get(wire.EVALUATE_GLOBAL):  # fused evaluation: the model as received, before training
            metrics.update(
                {f"{wire.EVAL_PREFIX}{k}": v for k, v in self.evaluation().items() if k != wire.PARTITION_ID}
            )
        num_examples, trained = self.train(config)
        metrics.update(trained)
        metrics[wire.PARTITION_ID] = int(self.partition_id)
        return self._outgoing(metrics), int(num_examples), metrics

    def evaluate(self, parameters, config):
        self._receive(parameters, config)
        metrics = {**self.evaluation(), wire.PARTITION_ID: int(self.partition_id)}
        loss = metrics.get(wire.LOSS, 0.0)
        loss = 0.0 if loss is None or (isinstance(loss, float) and math.isnan(loss)) else float(loss)
        return loss, int(metrics.get(wire.NUM_TEST, 0)), metrics


class ClientWrapper(Client):
    """Passes every message to ``inner``; subclasses override the messages they change."""

    def __init__(self, inner: Client) -> None:
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

    def __init__(
        self, inner: Client, state: ClientState, partition_id: int, state_dir: str | os.PathLike | None = None
    ) -> None:
        super().__init__(inner)
        self.state = state
        self.partition_id = int(partition_id)
        self.state_dir = state_dir

    def get_properties(self, config):
        phase = config.get(wire.PHASE)
        if phase not in (STATE_SAVE, STATE_LOAD):
            return self.inner.get_properties(config)
        request = wire.decode_phase(config)
        tag = StateRequest.decode(request.values).run_tag
        path = state_file(self.state_dir, tag, self.partition_id, request.round)
        if phase == STATE_SAVE:
            self.state.write(path, partition_id=self.partition_id, run_tag=tag, server_round=request.round)
        else:
            self.state.read(path, partition_id=self.partition_id, run_tag=tag, server_round=request.round)
        return wire.phase_reply(self.partition_id, [], StateReply(str(path), tuple(self.state.names())).values())


class NodeRank(ClientWrapper):
    """Adds the node's place in Flower's simulation queue (:data:`~flowergraph.wire.NODE_RANK`) to the identity
    reply, so that the server sends each round's messages in the order the simulation serves them
    (``client-order``; :func:`flowergraph.app.node_client.client_schedule`)."""

    def __init__(self, inner: Client, rank: int) -> None:
        super().__init__(inner)
        self.rank = int(rank)

    def get_properties(self, config):
        props = self.inner.get_properties(config)
        if wire.PHASE not in config:
            props = {**props, wire.NODE_RANK: self.rank}
        return props
