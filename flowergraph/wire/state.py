"""Client checkpoints (flowergraph's own phases, answered for every method by
:class:`flowergraph.clients.base.StateCheckpoints`).

* :data:`STATE_SAVE`: server -> client values ``{RUN_TAG: str}`` (round: the message's phase round); the client
  writes its whole ``context.state`` to ``<state-dir>/<run tag>/partition-<p>/round-<k>.npz`` on its own machine
  and answers ``{"path": str, "records": "name,name,..."}``.
* :data:`STATE_LOAD`: the same request; the client replaces its ``context.state`` with that file's content (a
  missing or corrupt file fails the run, naming it) and answers the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

STATE_SAVE = "flowergraph.state-save"
STATE_LOAD = "flowergraph.state-load"
RUN_TAG = "run_tag"


@dataclass(frozen=True)
class StateRequest:
    run_tag: str

    def values(self) -> dict[str, Any]:
        return {RUN_TAG: self.run_tag}

    @classmethod
    def decode(cls, values: Mapping[str, Any]) -> "StateRequest":
        return cls(run_tag=str(values[RUN_TAG]))


@dataclass(frozen=True)
class StateReply:
    path: str
    records: tuple[str, ...]

    def values(self) -> dict[str, Any]:
        return {"path": self.path, "records": ",".join(self.records)}

    @classmethod
    def decode(cls, values: Mapping[str, Any]) -> "StateReply":
        return cls(path=str(values["path"]), records=tuple(filter(None, str(values.get("records", "")).split(","))))
