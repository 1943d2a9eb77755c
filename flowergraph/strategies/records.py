"""Round records: the clock, the bytes each way, and writing one record per round (a part of
:class:`flowergraph.strategies.FederatedStrategy`).

A round's record is opened by the first hook of the round (``configure_fit``), collects what the strategy adds
(training results, evaluation, bytes, phases), and is closed when the round ends (after its evaluation, or
held back while its evaluation travels inside the next round's ``fit``: fused evaluation). ``time_s`` is the
round's wall time, ``elapsed_s`` the time since the first round started (carried across a resume). Records go
to a :class:`flowergraph.storage.results.RunRecorder` (``rounds.jsonl``); without one they are only kept in memory.
Every closed record is also handed to the book's ``listeners`` (the strategy's
:meth:`~flowergraph.strategies.FederatedStrategy.round_closed` hook: e.g. an agent's reward from the round's time
and accuracy), in the order records are written.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from .common import config_bytes, arrays_bytes


class RoundBook:
    """The current round's record, the record held back for fused evaluation, and the run's clock."""

    def __init__(self, recorder=None, listeners: list[Callable[[dict[str, Any]], None]] | None = None) -> None:
        self.recorder = recorder
        self.listeners = list(listeners or [])
        self.pending: dict[str, Any] = {}
        self.held: dict[str, Any] | None = None
        self._t0: float | None = None
        self._round_start: float | None = None
        self._elapsed_offset = 0.0

    def start(self, server_round: int) -> dict[str, Any]:
        """Open round ``server_round``'s record (no-op if it is open); returns it."""
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now - self._elapsed_offset
        if self._round_start is None or self.pending.get("round") != server_round:
            self._round_start = now
            self.pending = {"round": server_round, "bytes_down": 0, "bytes_up": 0}
        return self.pending

    def add_bytes(self, down: int = 0, up: int = 0) -> None:
        self.pending["bytes_down"] = self.pending.get("bytes_down", 0) + int(down)
        self.pending["bytes_up"] = self.pending.get("bytes_up", 0) + int(up)

    def count_sent(self, instructions: list[Any]) -> list[Any]:
        """``instructions`` (``(node, Instruction)`` pairs), their bytes added to the record's ``bytes_down``."""
        self.add_bytes(down=sum(arrays_bytes(ins.arrays) + config_bytes(ins.config) for _, ins in instructions))
        return instructions

    def add_phase(self, record: dict[str, Any]) -> None:
        """A phase that ran inside the current round (e.g. an embedding exchange before training): its record goes
        under ``phases`` and its bytes count in the round's totals."""
        entry = {k: v for k, v in record.items() if k not in ("round", "phase")}
        self.pending.setdefault("phases", {})[record["phase"]] = entry
        self.add_bytes(record.get("bytes_down", 0), record.get("bytes_up", 0))

    def measured(self, server_round: int, down: int, up: int, stages: Sequence[tuple[int, int, float]] = ()) -> None:
        """Round ``server_round``'s bytes as measured on the grid (they replace the record's own count) and, as
        ``fit_stages``, the message exchanges ``(sent, received, seconds)`` a fit workflow such as SecAgg+ ran."""
        rec = self.start(server_round)
        rec.update(bytes_down=int(down), bytes_up=int(up), bytes_measured="grid")
        if stages:
            rec["fit_stages"] = [
                {"messages": int(n), "replies": int(r), "time_s": round(float(t), 4)} for n, r, t in stages
            ]

    def close(self) -> dict[str, Any] | None:
        """End the current round's clock; returns its record (not yet written)."""
        if not self.pending:
            return None
        now = time.perf_counter()
        record = self.pending
        record["time_s"] = now - (self._round_start or now)
        record["elapsed_s"] = now - (self._t0 or now)
        record["ended_at"] = time.time()  # wall clock: plots place rounds after the run's start-up
        self.pending = {}
        self._round_start = None
        return record

    def write(self, record: dict[str, Any] | None) -> None:
        if record is None:
            return
        if self.recorder is not None:
            self.recorder.write_round(record)
        for listener in self.listeners:
            listener(record)

    def flush(self) -> None:
        """Close and write the current round's record."""
        self.write(self.close())

    def hold(self) -> None:
        """Close the current round but keep its record until its fused evaluation arrives."""
        self.held = self.close()

    def take_held(self) -> dict[str, Any] | None:
        held, self.held = self.held, None
        return held

    def finish(self) -> None:
        """Write any record still held back (fused evaluation whose next fit never came; a failed run)."""
        self.write(self.take_held())
        self.flush()

    def elapsed(self) -> float:
        return (time.perf_counter() - self._t0) if self._t0 is not None else self._elapsed_offset

    def state_dict(self) -> dict[str, Any]:
        return {"held": dict(self.held) if self.held is not None else None, "elapsed_s": float(self.elapsed())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.held = dict(state["held"]) if state.get("held") is not None else None
        self._elapsed_offset = float(state.get("elapsed_s", 0.0))
        self._t0 = None
