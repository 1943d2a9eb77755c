"""The parallel clock (``fedgraph.round-time=parallel``): a model of one FedGraph round's completion time delta on
one machine per client, the paper's testbed (20 machines) in place of a measured wall time (Flower-free).

    delta = max_i (c * work_i + c0 * steps_i + c1 * rows_i) + max_i (8 * bytes_i / B) + messages * RTT + server_s

* ``work_i``: the multiply-adds client i computes in the round's training part: its local iterations' forward and
  backward passes (:func:`~.model.train_macs`) and, as an owner, the rows it computes for others
  (:func:`~.model.owner_rows_and_macs`); ``steps_i``: its local iterations, ``rows_i``: its rows computations.
  ``c`` (seconds per multiply-add), ``c0`` (fixed seconds per local iteration: sampling's index work, Python,
  autograd, Adam's step, small matrices' lower efficiency) and ``c1`` (fixed seconds per rows computation) are
  calibrated once from isolated single-thread timings of this machine (``benchmarks/fedgraph_clock.py``,
  docs/results/fedgraph_clock.md: the fit of measured CPU time minimising relative error). :data:`SECONDS_PER_MAC`,
  :data:`SECONDS_PER_STEP`, :data:`SECONDS_PER_ROWS`; ``fedgraph.seconds-per-mac`` and
  ``fedgraph.seconds-per-step`` override the first two (``seconds-per-step=0`` also sets ``c1`` to 0: the
  issue's proportional model ``max_i (c * work_i)``, which the calibration shows under-prices small samples
  2-4x: a kappa 32, p 0.1 iteration on Cora takes 1.5 ms, 0.4 ms at c alone);
* ``bytes_i``: what client i sends and receives in the round's training part (its exchange messages and its
  ``fit``), ``B`` the network's bandwidth in bit/s;
* ``messages``: the number of sequential message round trips of the round's training part (every phase message
  kind sent to the clients, then ``fit``): 1 with nothing exchanged, 3 with the same-round exchange (rows, store,
  fit), ``2 T + 1`` with the per-iteration exchange of T local iterations;
* ``server_s``: the server's own time (routing, aggregation, the agent's step and its test evaluation), measured
  as CPU time of the server's threads (so a paused or shared machine does not stretch it).

Networks (:data:`NETWORKS`): ``lan`` 1 Gbit/s and 1 ms round trip; ``wan`` 50 Mbit/s and 30 ms.

What the model leaves out (docs/methods/fedgraph.md says it too): contention between clients' links at the
server (each client is charged its own bytes, the server's link is taken as wide enough for all), stragglers and
unequal machines (every client computes at the same c), the barriers inside a round (the compute term is the
largest round total, not the sum over message steps of each step's largest part), serialisation and message
framing beyond the arrays' and values' bytes, TCP slow start, the per-iteration fixed costs that do not scale
with multiply-adds beyond one constant per computation (c0, c1: the calibration's per-group table shows what
is left), and evaluation (a round's delta ends with aggregation and the agent's step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from ....errors import ConfigError


@dataclass(frozen=True)
class Network:
    """A network profile: bandwidth (bit/s) and round-trip time (s)."""

    name: str
    bandwidth_bps: float
    rtt_s: float


NETWORKS = {"lan": Network("lan", 1e9, 1e-3), "wan": Network("wan", 50e6, 30e-3)}

# Seconds per multiply-add of FedGraph's local work and seconds per computation (local iteration or rows
# computation), one thread of this machine: the calibration's medians (see docs/results/fedgraph_clock.md for the
# command, the spread and the fit).
SECONDS_PER_MAC = 5.79e-11
SECONDS_PER_STEP = 1.08e-3
SECONDS_PER_ROWS = 0.419e-3


def network(name: str) -> Network:
    if name not in NETWORKS:
        raise ConfigError(f"unknown network {name!r}; valid choices: {', '.join(NETWORKS)}")
    return NETWORKS[name]


@dataclass
class RoundCost:
    """One round's parts of delta: per client (in partition order) its work (multiply-adds), its computations
    (local iterations and rows computations) and bytes sent and received; the sequential message round trips; the
    server's own seconds."""

    work: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    messages: int = 0
    server_s: float = 0.0
    steps: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)

    def compute(self, seconds_per_mac: float, seconds_per_step: float, seconds_per_rows: float) -> list[float]:
        """Every client's modelled compute seconds, ``c x work + c0 x steps + c1 x rows``."""
        steps = self.steps or [0] * len(self.work)
        rows = self.rows or [0] * len(self.work)
        return [
            seconds_per_mac * w + seconds_per_step * n + seconds_per_rows * m
            for w, n, m in zip(self.work, steps, rows, strict=True)
        ]

    def delta(
        self, seconds_per_mac: float, net: Network, seconds_per_step: float = 0.0, seconds_per_rows: float = 0.0
    ) -> dict[str, float]:
        """The parts of delta in seconds and their sum (``delta_s``) on ``net``."""
        if not (math.isfinite(seconds_per_mac) and seconds_per_mac > 0):
            raise ConfigError(f"seconds-per-mac={seconds_per_mac!r}: must be a finite number > 0")
        for name, value in (("seconds-per-step", seconds_per_step), ("seconds-per-rows", seconds_per_rows)):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name}={value!r}: must be a finite number >= 0")
        compute = max(self.compute(seconds_per_mac, seconds_per_step, seconds_per_rows), default=0.0)
        transfer = 8.0 * max(self.bytes, default=0) / net.bandwidth_bps
        latency = self.messages * net.rtt_s
        return {
            "compute_s": compute,
            "transfer_s": transfer,
            "latency_s": latency,
            "server_s": float(self.server_s),
            "delta_s": compute + transfer + latency + float(self.server_s),
        }

    def record(self, seconds_per_mac: float, seconds_per_step: float, seconds_per_rows: float) -> dict[str, object]:
        """What a round record keeps: the parts, the constants and delta on every network."""
        out: dict[str, object] = {
            "work": [int(w) for w in self.work],
            "steps": [int(n) for n in self.steps],
            "rows": [int(n) for n in self.rows],
            "bytes": [int(b) for b in self.bytes],
            "messages": int(self.messages),
            "server_s": float(self.server_s),
            "seconds_per_mac": float(seconds_per_mac),
            "seconds_per_step": float(seconds_per_step),
            "seconds_per_rows": float(seconds_per_rows),
        }
        for name, net in NETWORKS.items():
            out[f"{name}_s"] = self.delta(seconds_per_mac, net, seconds_per_step, seconds_per_rows)["delta_s"]
        return out


def delta_of(record: dict, net: str, **constants: float) -> float:
    """delta recomputed from a round record's ``clock`` entry (:meth:`RoundCost.record`), optionally with other
    constants (``seconds_per_mac``, ``seconds_per_step``, ``seconds_per_rows``): what a table or a test does to
    check or re-price a stored round."""
    c = {
        k: float(constants.get(k, record.get(k, 0.0)))
        for k in ("seconds_per_mac", "seconds_per_step", "seconds_per_rows")
    }
    zeros = [0] * len(record["work"])
    cost = RoundCost(
        list(record["work"]),
        list(record["bytes"]),
        int(record["messages"]),
        float(record["server_s"]),
        list(record.get("steps") or zeros),
        list(record.get("rows") or zeros),
    )
    return cost.delta(c["seconds_per_mac"], network(net), c["seconds_per_step"], c["seconds_per_rows"])["delta_s"]


def summed(values: Sequence[float]) -> list[float]:
    """Running sums (a curve's clock from per-round deltas)."""
    out, total = [], 0.0
    for v in values:
        total += float(v)
        out.append(total)
    return out
