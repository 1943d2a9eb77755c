"""The plain values flowergraph's core speaks: which node, what it is told, what it answered, what failed.

The core (:class:`~flowergraph.strategies.FederatedStrategy` and its parts) names no Flower type. A face turns
these values into Flower's and back:

* the Message API (:mod:`flowergraph.app.message_server`): a :class:`Node` is a grid node id, an
  :class:`Instruction` a ``train`` / ``evaluate`` Message (ArrayRecord + ConfigRecord), a :class:`Reply` the
  reply's ArrayRecord and MetricRecord, and the :class:`Federation` sends a phase's ``query`` messages to many
  nodes in one push;
* the legacy stack (:mod:`flowergraph.app.loop`: Flower's legacy ``Strategy`` API, kept for SecAgg+): a
  :class:`Node` stands for a client proxy, an :class:`Instruction` for a fit or evaluate instruction, a
  :class:`Reply` for its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Protocol, Sequence, Union

import numpy as np

Scalar = Union[bool, bytes, float, int, str]  # what a config or metrics value may be (Flower's scalar types)
Arrays = list  # list[np.ndarray]: a model's arrays, in order


@dataclass(frozen=True)
class Node:
    """One node of the federation, addressed by Flower's node id.

    ``name``: how logs name the node when its partition is unknown (default: the node id); ``partition``: the
    partition id it said it holds, once the core's client directory knows it (not part of equality)."""

    node_id: int
    name: str = ""
    partition: int | None = field(default=None, compare=False)

    @property
    def cid(self) -> str:
        """The node's name as a string (the key the core's tables use)."""
        return self.name or str(self.node_id)


@dataclass
class Instruction:
    """What one node is told to do in a ``train`` (fit) or ``evaluate`` message: ``arrays`` (a model or a part of
    it, in order), their ``names`` when known (state-dict keys; None: positional) and ``config`` (scalars)."""

    arrays: list[np.ndarray]
    config: dict[str, Scalar]
    names: list[str] | None = None


@dataclass
class Reply:
    """One node's answer to an :class:`Instruction`: ``arrays`` (its update; none for an evaluation),
    ``num_examples``, ``metrics`` (scalars: what the client reported, bookkeeping keys included) and ``loss`` (an
    evaluation's)."""

    arrays: list[np.ndarray]
    num_examples: int
    metrics: dict[str, Scalar]
    loss: float | None = None


@dataclass
class Failure:
    """A node that did not answer usefully: ``node`` (None when the transport could not say which), ``error``
    (the exception or the error text) and the ``reply`` when the node answered with an error status."""

    node: Node | None
    error: BaseException | str
    reply: Reply | None = None


class Federation(Protocol):
    """How the core reaches the nodes (the face provides it): list them, wait for them, send many a query at
    once, fetch one's initial model, evaluate some now (fused evaluation's fallback). ``query`` keeps at most
    ``max_parallel`` queries awaiting a reply and draws a lazy ``requests`` as places free, so a phase holds at
    most that many large messages."""

    def nodes(self) -> list[Node]: ...

    def wait_for(self, count: int, timeout: float) -> bool: ...

    def query(
        self,
        requests: Iterable[tuple[Node, dict[str, Any]]],
        timeout: float | None,
        group_id: int,
        max_parallel: int | None = None,
    ) -> Iterator[tuple[Node, "dict[str, Any] | BaseException"]]: ...

    def get_model(self, node: Node, timeout: float | None) -> list[np.ndarray]: ...

    def evaluate(
        self, requests: list[tuple[Node, Instruction]], timeout: float | None, group_id: int
    ) -> Iterator[tuple[Node, "Reply | BaseException"]]: ...


def arrays_of(arrays: Mapping[str, np.ndarray] | Sequence[np.ndarray] | None) -> list[np.ndarray] | None:
    """``arrays`` as a list (a mapping's values, in order)."""
    if arrays is None:
        return None
    return list(arrays.values()) if isinstance(arrays, Mapping) else list(arrays)
