"""How a federation runs, as plain values (a part of :class:`flowergraph.strategies.FederatedStrategy`):
:class:`FederationPolicy` (clients, rounds, sampling, evaluation, timeouts, secure aggregation, what clients keep),
:class:`Stage` (a run in stages, each with its own model: architecture search, then retraining), and the update
kinds a strategy accepts. The method registry builds a policy from the run configuration
(:meth:`flowergraph.methods.StrategyArgs.common`); your own app builds one directly::

    FederationPolicy(num_clients=5, num_rounds=50, fraction_fit=0.6, fused_eval=True, seed=1)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..settings.choices import SECURE_AGG
from ..settings.choices import UPDATE_KINDS as UPDATE_KINDS


@dataclass(frozen=True)
class FederationPolicy:
    """How the federation runs.

    num_clients: clients expected; the strategy waits up to ``connect_timeout`` seconds for them before the first
        round and fails with a clear error if they do not all connect.
    num_rounds: the run's length (to evaluate the last round, label progress and place stages); None: unknown.
    fraction_fit, fraction_evaluate: fraction of connected clients sampled per round (seeded by ``seed``).
    min_clients: fewest valid updates that still change the model (None: 1).
    eval_every: client-side evaluation every N rounds (the final round is always evaluated).
    fused_eval: evaluate each round's model inside the next round's ``fit`` (needs ``num_rounds`` and full
        participation; a client that ignores the flag is evaluated separately and fusion is turned off).
    seed: seeds client sampling: round r samples the same partitions in every run with this seed.
    clients_per_round: cap on the clients sampled per round (``centralized`` uses 1).
    connect_timeout: seconds to wait for ``num_clients`` clients before the first round.
    init_timeout: seconds a one-off request may take (identity, initial model, setup phases, restoring client
        state); None: ``connect_timeout``.
    round_timeout: seconds a per-round request of the strategy's own may take (phases, client checkpoints, direct
        evaluations); None waits. The training rounds' timeout is Flower's ``ServerConfig.round_timeout``.
    max_parallel: messages in flight at once in a phase.
    secure_agg: ``"none"``, ``"ckks"`` (the strategy adds encrypted updates, a client decrypts the sum) or
        ``"secagg+"`` (informational: Flower's ``SecAggPlusWorkflow`` masks the updates).
    stateful_clients: the method's clients keep state in ``context.state`` that checkpoints must save and a
        resumed run must restore.
    min_secure_clients: ``secure_agg="ckks"``: the fewest valid encrypted updates whose sum is decrypted (>= 2;
        a round with fewer is not aggregated).
    secagg_clipping_range: ``secure_agg="secagg+"``: SecAgg+'s clipping range; the unmasked average must lie in
        it (a sum outside it, or not finite, is not aggregated). None: not checked.
    max_update_norm: refuse an update whose L2 norm (against the model the client was sent) exceeds this multiple
        of the round's median update norm (0: off; needs >= 3 updates; plain aggregation only).
    """

    num_clients: int
    num_rounds: int | None = None
    fraction_fit: float = 1.0
    fraction_evaluate: float = 1.0
    min_clients: int | None = None
    eval_every: int = 1
    fused_eval: bool = False
    seed: int = 0
    clients_per_round: int | None = None
    connect_timeout: float = 600.0
    init_timeout: float | None = None
    round_timeout: float | None = None
    max_parallel: int = 16
    secure_agg: str = "none"
    stateful_clients: bool = False
    min_secure_clients: int = 2
    secagg_clipping_range: float | None = None
    max_update_norm: float = 0.0

    def __post_init__(self) -> None:
        if self.num_clients < 1:
            raise ValueError(f"num_clients must be >= 1, got {self.num_clients}")
        for name in ("fraction_fit", "fraction_evaluate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.min_clients is not None and not 0 <= self.min_clients <= self.num_clients:
            raise ValueError(f"min_clients must be in [0, num_clients={self.num_clients}], got {self.min_clients}")
        if self.secure_agg not in SECURE_AGG:
            raise ValueError(f"unknown secure_agg {self.secure_agg!r}; valid choices: {', '.join(SECURE_AGG)}")
        if self.min_secure_clients < 2:
            raise ValueError(
                f"min_secure_clients must be >= 2 (a sum of one update is that update), got {self.min_secure_clients}"
            )
        if self.max_update_norm != 0 and not self.max_update_norm > 1:
            raise ValueError(
                f"max_update_norm must be 0 (off) or > 1 (a multiple of the median norm), got {self.max_update_norm}"
            )
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {self.max_parallel}")
        if self.num_rounds is not None and self.num_rounds < 1:
            raise ValueError(f"num_rounds must be >= 1, got {self.num_rounds}")

    @property
    def full_participation(self) -> bool:
        return self.fraction_fit == 1.0 and self.fraction_evaluate == 1.0 and self.clients_per_round is None

    @property
    def effective_init_timeout(self) -> float:
        return self.connect_timeout if self.init_timeout is None else self.init_timeout

    def replace(self, **changes: Any) -> "FederationPolicy":
        return dataclasses.replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


def resolve_policy(policy: FederationPolicy | None, kwargs: dict[str, Any], owner: str) -> FederationPolicy:
    """``policy``, for the constructor of strategy ``owner``; ``kwargs`` are its keyword arguments left over, each
    refused with a TypeError: a field of the policy names ``policy=FederationPolicy(...)`` (0.3 removed the policy's
    fields as keyword arguments of a strategy), any other key the policy's fields."""
    fields = sorted(k for k in kwargs if k in FederationPolicy.field_names())
    if fields:
        raise TypeError(
            f"{owner}({', '.join(f'{k}=' for k in fields)}...): the policy's fields are not keyword "
            f"arguments of a strategy (removed in 0.3); pass "
            f"policy=FederationPolicy({', '.join(f'{k}=...' for k in fields)})"
        )
    unknown = sorted(kwargs)
    if unknown:
        raise TypeError(
            f"{owner}() got unexpected keyword argument(s) {', '.join(unknown)}; the policy's fields "
            f"are {', '.join(FederationPolicy.field_names())}"
        )
    if policy is None:
        raise TypeError(f"{owner}() needs policy=FederationPolicy(num_clients=...)")
    return policy


@dataclass(frozen=True)
class Stage:
    """One stage of a run: ``rounds`` training rounds (None: the rest of the run; only the last stage) with its
    own model. The strategy's :meth:`~flowergraph.strategies.FederatedStrategy.begin_stage` hook builds the
    stage's model when it starts; clients see the stage's ``name`` in every config (:data:`flowergraph.wire.STAGE`).
    """

    name: str
    rounds: int | None = None


class StagePlan:
    """Which stage each round belongs to (``stages`` in order, over ``num_rounds``)."""

    def __init__(self, stages: tuple[Stage, ...], num_rounds: int | None) -> None:
        if not stages:
            raise ValueError("a run needs at least one stage")
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names repeat: {names}")
        for s in stages[:-1]:
            if s.rounds is None or s.rounds < 1:
                raise ValueError(f"stage {s.name!r}: every stage but the last needs rounds >= 1, got {s.rounds}")
        if stages[-1].rounds is not None and stages[-1].rounds < 1:
            raise ValueError(f"stage {stages[-1].name!r}: rounds must be >= 1 or None, got {stages[-1].rounds}")
        fixed = sum(s.rounds or 0 for s in stages)
        if num_rounds is not None and len(stages) > 1 and fixed > num_rounds:
            raise ValueError(f"the stages take {fixed} rounds but the run has num_rounds={num_rounds}")
        self.stages = stages
        self.num_rounds = num_rounds
        self.firsts: list[int] = []
        first = 1
        for s in stages:
            self.firsts.append(first)
            first += s.rounds or 0

    def index(self, server_round: int) -> int:
        """The index of the stage round ``server_round`` belongs to."""
        out = 0
        for i, first in enumerate(self.firsts):
            if server_round >= first:
                out = i
        return out

    def last_rounds(self) -> set[int]:
        """The last round of every stage but the final one (their evaluation cannot be fused into a fit of the
        next stage, whose model differs)."""
        return {first - 1 for first in self.firsts[1:]}
