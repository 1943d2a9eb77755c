"""Fault injection plans (Flower-free): which client misbehaves how, in which round.

A plan is the run-config value ``inject-faults``: comma-separated ``kind:partition@round`` entries, e.g.
``"raise:1@2,nan:0@3,shape:2@1,exit:1@4"``; ``@*`` means every round (``scale:0@*``: a client that poisons
every update). Partition ``p`` then misbehaves in its training (``fit``) message of round ``r`` as its kind says
(:data:`FAULT_KINDS`). The client side is
:class:`flowergraph.clients.faults.FaultInjectingClient`, which wraps any method's client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError, did_you_mean

# kind -> what the client does in the fit message of the chosen round (docs/reliability.md documents these).
FAULT_KINDS: dict[str, str] = {
    "raise": "raises an exception instead of answering (Flower reports the message as failed)",
    "nan": "trains, then returns its arrays filled with NaN",
    "shape": "trains, then returns its first array with one row too few",
    "exit": "kills its own process (os._exit) in the middle of the round, without a reply (simulation: its Ray "
    "actor; deployment: the ClientApp process of that message)",
    "hang": "sleeps past round-timeout before answering (the server stops waiting at round-timeout)",
    "scale": "trains, then returns a poisoned but well-formed update: the global model + 100 x its update "
    "(a model-boosting attack)",
    "flip": "trains, then returns the global model - 10 x its update (a sign-flipping attack)",
}
# Poisoning kinds: finite, well-shaped updates that validation cannot reject (robust aggregation's job).
POISON_SCALE = {"scale": 100.0, "flip": -10.0}

_ENTRY = re.compile(r"^\s*([A-Za-z_-]+)\s*:\s*([^@\s]+)\s*@\s*(\S+)\s*$")


@dataclass(frozen=True, order=True)
class Fault:
    round: int
    partition: int
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.partition}@{self.round}"


def parse_faults(spec: str, *, num_clients: int | None = None, rounds: int | None = None) -> tuple[Fault, ...]:
    """Parse an ``inject-faults`` value; ConfigError names the bad entry and the valid choices.

    ``num_clients`` / ``rounds``, when given, bound the partition ids and rounds.
    """
    if not spec or not spec.strip():
        return ()
    faults: list[Fault] = []
    seen: dict[tuple[int, int], str] = {}
    for entry in spec.split(","):
        if not entry.strip():
            raise ConfigError(
                f"inject-faults={spec!r}: empty entry; expected kind:partition@round entries "
                f"separated by commas, e.g. 'raise:1@2,nan:0@3'"
            )
        m = _ENTRY.match(entry)
        if m is None:
            raise ConfigError(
                f"inject-faults: entry {entry.strip()!r} is not kind:partition@round "
                f"(e.g. 'raise:1@2'); valid kinds: {', '.join(FAULT_KINDS)}"
            )
        kind, part, rnd = m.group(1).lower(), m.group(2), m.group(3)
        if kind not in FAULT_KINDS:
            raise ConfigError(
                f"inject-faults: unknown fault kind {m.group(1)!r} in {entry.strip()!r}; valid "
                f"choices: {', '.join(FAULT_KINDS)}{did_you_mean(m.group(1), FAULT_KINDS)}"
            )
        try:
            partition = int(part)
        except ValueError:
            raise ConfigError(f"inject-faults: partition {part!r} in {entry.strip()!r} is not an integer") from None
        if partition < 0 or (num_clients is not None and partition >= num_clients):
            bound = f"[0, {num_clients - 1}] (num-clients={num_clients})" if num_clients else ">= 0"
            raise ConfigError(
                f"inject-faults: partition {partition} in {entry.strip()!r} is out of range; valid partitions: {bound}"
            )
        if rnd == "*":
            if rounds is None:
                raise ConfigError(f"inject-faults: {entry.strip()!r} (every round) needs the number of rounds")
            server_rounds = list(range(1, rounds + 1))
        else:
            try:
                server_rounds = [int(rnd)]
            except ValueError:
                raise ConfigError(
                    f"inject-faults: round {rnd!r} in {entry.strip()!r} is not an integer or '*' (every round)"
                ) from None
        for server_round in server_rounds:
            if server_round < 1 or (rounds is not None and server_round > rounds):
                bound = f"[1, {rounds}] (rounds={rounds})" if rounds else ">= 1"
                raise ConfigError(
                    f"inject-faults: round {server_round} in {entry.strip()!r} is out of range; valid rounds: {bound}"
                )
            key = (partition, server_round)
            if key in seen:
                raise ConfigError(
                    f"inject-faults: partition {partition} has two faults in round {server_round} "
                    f"({seen[key]!r} and {entry.strip()!r}); give one per partition and round"
                )
            seen[key] = entry.strip()
            faults.append(Fault(server_round, partition, kind))
    return tuple(sorted(faults))


def faults_for(faults: tuple[Fault, ...], partition: int) -> dict[int, str]:
    """``{round: kind}`` for one partition."""
    return {f.round: f.kind for f in faults if f.partition == partition}
