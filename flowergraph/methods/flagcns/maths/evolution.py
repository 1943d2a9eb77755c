"""Federated evolutionary optimisation (FEO, paper Section 3.3, Algorithms 1 and 2), without any training: every
class and function takes fitness values as input.

**One evolutionary step** (:class:`EvolutionaryOptimizer`, ask/tell; the reference code's operators):

1. ``propose(extra)``: the base is the current population plus ``extra`` (a client's ``P_{G_i} u P_FL``,
   Algorithm 1 step 3), without repeated networks. ``floor(parent_fraction * |base|)`` parents are drawn uniformly
   without replacement; each parent makes one child, by uniform crossover with another parent (probability
   ``crossover_prob``: 0.2 at the controller and 0.5 at the clients in the authors' 2022 rework, 0.5 at both in
   their 2021 code; ``flagcns.controller-crossover``, ``flagcns.client-crossover``) or else by mutation (each gene
   redrawn with probability ``mutation_rate``, default 1/(2L+2)). The pool is base + children without repeated
   networks (canonical codes), filled with random codes up to the population size if smaller.
2. ``select(fitness)``: with one fitness per pool member (higher is better; NaN, +-inf are worst), the
   population becomes the ``population_size`` best, best first (stable: ties keep pool order).

The controller's fitness is ``-FLL_a`` (Eq. 1, val-size weighted mean of the clients' validation losses); client
i's is ``-L_val_{G_i}(W_a, a)``. (The reference code uses validation accuracy, val-size weighted at the controller;
:mod:`.training` gives both.)

**The population rule** (Algorithm 1, controller step 6, and the text of Section 3.3): the new population is
``P = (top n_FL of P_FL by FLL) u (top n_i of P_{G_i} by L_val_{G_i}, i = 1..N)`` with ``n_FL = |P| (1 - gamma)``
and ``n_i = |P| gamma w_i / sum_j w_j``: **gamma is the clients' share** ("0 < gamma < 1 is the proportion of
clients' evolutionary results in P"), and ``gamma_t = 0.5 * 0.99^t`` shrinks it as the search goes on. The
paper's client weight is garbled (``sum_i |P_{G_i}| / sum_j |P_{G_j}|``); the reference code uses the client's
share of training nodes, which :func:`population_quotas` takes as ``client_weights``. Quotas are rounded by the
largest-remainder method (ties: controller first, then clients in order), so they always sum to |P|.
:func:`assemble_population` takes each source's quota of networks not yet in P, walking down that source's
ranking; a source that runs out leaves its seats to the others (round robin, controller first).

Note the paper's ablation text contradicts this definition: it calls gamma = 1 "ControllerEO, only the
controller's EA" and gamma = 0 "ClientEO". Under Algorithm 1 (and the reference code, which keeps
``int((1 - gamma) |P|) + 1`` of the controller's population) gamma = 0 keeps only the controller's results and
gamma = 1 only the clients'. :data:`ABLATIONS` names the variants by what they keep: ``controller-eo`` is
gamma = 0, ``client-eo`` is gamma = 1.

Every object's state is JSON (:meth:`EvolutionaryOptimizer.state`, :func:`rng_state_json`) so a search resumes
exactly: the next generation after a restore equals the uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ....errors import ConfigError
from .space import Code, SearchSpace

#: Fixed gammas of the paper's ablations, named by what they keep (module docstring); ``feo`` is the schedule.
ABLATIONS: dict[str, float | None] = {"feo": None, "controller-eo": 0.0, "client-eo": 1.0}


def gamma_at(t: int, gamma0: float = 0.5, decay: float = 0.99) -> float:
    """``gamma_t = gamma0 * decay^t`` (Algorithm 2 line 15: ``0.5 * 0.99^t``, t = 1, 2, ... the epoch)."""
    return float(gamma0 * decay**t)


# ------------------------------------------------------------------------------------------------ random state
def new_rng(seed: int, *salt: int) -> np.random.Generator:
    """A PCG64 generator seeded by ``(seed, *salt)``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, salt)]))


def rng_state_json(rng: np.random.Generator) -> dict[str, Any]:
    """A numpy generator's exact state as JSON-safe values (128-bit integers as hex strings)."""
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        raise ConfigError(f"only PCG64 generators are supported, got {state.get('bit_generator')!r}")
    return {
        "bit_generator": "PCG64",
        "state": format(state["state"]["state"], "x"),
        "inc": format(state["state"]["inc"], "x"),
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def rng_from_json(data: Mapping[str, Any]) -> np.random.Generator:
    """The generator :func:`rng_state_json` described, in the same state."""
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(data["state"], 16), "inc": int(data["inc"], 16)},
        "has_uint32": int(data["has_uint32"]),
        "uinteger": int(data["uinteger"]),
    }
    return rng


def _finite_or_none(values) -> list[float | None]:
    return [float(v) if v is not None and math.isfinite(v) else None for v in values]


def _sort_key(value) -> float:
    return -float(value) if value is not None and math.isfinite(value) else math.inf


def distinct(space: SearchSpace, codes: Iterable[Code]) -> list[Code]:
    """``codes`` without repeated networks (first occurrence kept; compared by :meth:`SearchSpace.canonical`)."""
    out, seen = [], set()
    for code in codes:
        code = space.check(code)
        key = space.canonical(code)
        if key not in seen:
            seen.add(key)
            out.append(code)
    return out


# --------------------------------------------------------------------------------------------- the EA itself
@dataclass(frozen=True)
class EAConfig:
    """One EA's settings (the reference code's values; the clients' EA uses ``crossover_prob=0.5``)."""

    population_size: int = 60
    crossover_prob: float = 0.2
    parent_fraction: float = 0.5
    mutation_rate: float | None = None

    def __post_init__(self) -> None:
        if self.population_size < 1:
            raise ConfigError(f"population_size must be >= 1, got {self.population_size}")
        if not 0.0 <= self.crossover_prob <= 1.0:
            raise ConfigError(f"crossover_prob must be in [0, 1], got {self.crossover_prob}")
        if not 0.0 < self.parent_fraction <= 1.0:
            raise ConfigError(f"parent_fraction must be in (0, 1], got {self.parent_fraction}")
        if self.mutation_rate is not None and not 0.0 <= self.mutation_rate <= 1.0:
            raise ConfigError(f"mutation_rate must be None (1/(2L+2)) or in [0, 1], got {self.mutation_rate}")


class EvolutionaryOptimizer:
    """An ask/tell EA over codes (module docstring). ``population`` is kept best first after :meth:`select`."""

    def __init__(
        self,
        space: SearchSpace,
        config: EAConfig | None = None,
        seed: int = 0,
        salt: int = 0,
        population: Sequence[Code] | None = None,
    ):
        self.space, self.config = space, EAConfig() if config is None else config
        self.rng = new_rng(seed, 0xEA, salt)
        self.population: list[Code] = []
        self.fitness: list[float | None] | None = None
        self.pending: list[Code] | None = None
        self.generation = 0
        if population is not None:
            self.set_population(population)

    def set_population(self, codes: Sequence[Code], fitness: Sequence[float] | None = None) -> None:
        """Replace the population (e.g. by the assembled P, Algorithm 2); fitness unknown unless given."""
        codes = [self.space.check(c) for c in codes]
        if fitness is not None and len(fitness) != len(codes):
            raise ConfigError(f"{len(codes)} codes but {len(fitness)} fitness values")
        self.population = codes
        self.fitness = None if fitness is None else _finite_or_none(fitness)
        self.pending = None

    def propose(self, extra: Iterable[Code] = ()) -> list[Code]:
        """The pool to evaluate: base (population + ``extra``) + children, distinct, filled with random codes up to
        the population size. Call :meth:`select` with one fitness per pool member next."""
        space, cfg, rng = self.space, self.config, self.rng
        base = distinct(space, list(self.population) + list(extra))
        if not base:
            raise ConfigError("the EA has no population to evolve; set_population first")
        n_parents = max(1, int(cfg.parent_fraction * len(base)))
        parents = [base[i] for i in rng.choice(len(base), size=n_parents, replace=False)]
        children = []
        for j, parent in enumerate(parents):
            if n_parents > 1 and rng.random() < cfg.crossover_prob:
                k = int(rng.integers(n_parents - 1))
                k += int(k >= j)
                children.append(space.crossover(parent, parents[k], rng))
            else:
                children.append(space.mutate(parent, rng, cfg.mutation_rate))
        pool = distinct(space, base + children)
        if len(pool) < cfg.population_size:
            seen = {space.canonical(c) for c in pool}
            tries = 0
            while len(pool) < cfg.population_size and tries < 1000 * cfg.population_size:
                code = space.sample(rng)
                tries += 1
                if space.canonical(code) not in seen:
                    seen.add(space.canonical(code))
                    pool.append(code)
        self.pending = pool
        return list(pool)

    def select(self, fitness: Sequence[float]) -> list[Code]:
        """Keep the ``population_size`` fittest of the proposed pool (best first); returns the new population."""
        if self.pending is None:
            raise ConfigError("select() needs a pool: call propose() first")
        if len(fitness) != len(self.pending):
            raise ConfigError(f"select() got {len(fitness)} fitness values for a pool of {len(self.pending)}")
        values = _finite_or_none(fitness)
        order = sorted(range(len(values)), key=lambda i: _sort_key(values[i]))[: self.config.population_size]
        self.population = [self.pending[i] for i in order]
        self.fitness = [values[i] for i in order]
        self.pending = None
        self.generation += 1
        return list(self.population)

    def ranked(self) -> list[Code]:
        """The population, best first (after :meth:`select`)."""
        return list(self.population)

    def state(self) -> dict[str, Any]:
        """Everything needed to continue exactly (JSON-safe; non-finite fitness stored as null = worst)."""
        return {
            "config": asdict(self.config),
            "generation": self.generation,
            "population": [list(c) for c in self.population],
            "fitness": self.fitness,
            "pending": None if self.pending is None else [list(c) for c in self.pending],
            "rng": rng_state_json(self.rng),
            "code_length": self.space.code_length,
        }

    @classmethod
    def from_state(cls, space: SearchSpace, state: Mapping[str, Any]) -> "EvolutionaryOptimizer":
        if int(state["code_length"]) != space.code_length:
            raise ConfigError(
                f"EA state is for codes of length {state['code_length']}, the space's are "
                f"{space.code_length} (L={space.num_layers})"
            )
        ea = cls(space, EAConfig(**state["config"]))
        ea.population = [space.check(c) for c in state["population"]]
        ea.fitness = None if state["fitness"] is None else list(state["fitness"])
        ea.pending = None if state["pending"] is None else [space.check(c) for c in state["pending"]]
        ea.generation = int(state["generation"])
        ea.rng = rng_from_json(state["rng"])
        return ea


# ------------------------------------------------------------------------------------------- population rule
def population_quotas(population_size: int, gamma: float, client_weights: Sequence[float]) -> tuple[int, list[int]]:
    """``(n_FL, [n_1, ..., n_N])``: seats of the controller's and each client's results in P (module docstring):
    quotas ``|P| (1 - gamma)`` and ``|P| gamma w_i / sum_j w_j`` rounded by largest remainder; they sum to |P|."""
    if population_size < 0:
        raise ConfigError(f"population_size must be >= 0, got {population_size}")
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be in [0, 1], got {gamma}")
    weights = [float(w) for w in client_weights]
    if not weights:
        raise ConfigError("population_quotas needs at least one client weight")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"client weights must be >= 0 with a positive sum, got {weights}")
    total = sum(weights)
    quotas = [population_size * (1.0 - gamma)] + [population_size * gamma * w / total for w in weights]
    quotas = [round(q, 9) for q in quotas]  # 41.9999999997 is 42
    seats = [math.floor(q) for q in quotas]
    left = population_size - sum(seats)
    order = sorted(range(len(quotas)), key=lambda j: (-(quotas[j] - seats[j]), j))
    for j in order[:left]:
        seats[j] += 1
    return seats[0], seats[1:]


@dataclass
class Assembled:
    """The new population P, where each member came from (-1: the controller, i: client i), and the quotas."""

    population: list[Code]
    sources: list[int]
    quotas: tuple[int, list[int]]

    def counts(self) -> tuple[int, list[int]]:
        """Members taken from the controller and from each client."""
        n = len(self.quotas[1])
        return self.sources.count(-1), [self.sources.count(i) for i in range(n)]


def assemble_population(
    space: SearchSpace,
    controller_ranked: Sequence[Code],
    clients_ranked: Sequence[Sequence[Code]],
    gamma: float,
    client_weights: Sequence[float],
    population_size: int | None = None,
    distinct_networks: bool = True,
) -> Assembled:
    """Algorithm 1, controller step 6: P from the controller's ranking of P_FL (best first) and each client's
    ranking of its P_{G_i} (best first), by :func:`population_quotas`. With ``distinct_networks`` a network
    already in P is skipped and the source takes its next one; a source that runs out leaves its seats to the
    others (round robin, controller first). P is shorter than ``population_size`` only when the sources together
    hold fewer distinct networks."""
    if len(clients_ranked) != len(client_weights):
        raise ConfigError(f"{len(clients_ranked)} client rankings but {len(client_weights)} client weights")
    size = len(controller_ranked) if population_size is None else int(population_size)
    quotas = population_quotas(size, gamma, client_weights)
    lists = [[space.check(c) for c in controller_ranked]] + [[space.check(c) for c in r] for r in clients_ranked]
    wanted = [quotas[0]] + list(quotas[1])
    cursors = [0] * len(lists)
    population: list[Code] = []
    sources: list[int] = []
    seen: set[Code] = set()

    def take(j: int) -> bool:
        while cursors[j] < len(lists[j]):
            code = lists[j][cursors[j]]
            cursors[j] += 1
            key = space.canonical(code)
            if distinct_networks and key in seen:
                continue
            seen.add(key)
            population.append(code)
            sources.append(j - 1)
            return True
        return False

    for j, n in enumerate(wanted):
        for _ in range(n):
            if not take(j):
                break
    while len(population) < size:
        progress = False
        for j in range(len(lists)):
            if len(population) >= size:
                break
            progress = take(j) or progress
        if not progress:
            break
    return Assembled(population, sources, quotas)


def best_architecture(codes: Sequence[Code], fll: Sequence[float]) -> tuple[Code, float]:
    """Algorithm 2 line 22: the code with the lowest FLL (first on ties; NaN ignored)."""
    if len(codes) != len(fll) or not codes:
        raise ConfigError(
            f"best_architecture needs one FLL value per code, got {len(codes)} codes and {len(fll)} values"
        )
    finite = [i for i, v in enumerate(fll) if v is not None and math.isfinite(v)]
    if not finite:
        raise ConfigError("best_architecture: no finite FLL value")
    i = min(finite, key=lambda j: fll[j])
    return tuple(codes[i]), float(fll[i])


def best_architectures(
    space: SearchSpace, codes: Sequence[Code], fll: Sequence[float], k: int
) -> list[tuple[Code, float, int]]:
    """The ``k`` codes with the lowest FLL, one per network (:meth:`SearchSpace.canonical`), in FLL order (first
    on ties; NaN ignored): ``(code, FLL, index in codes)``. ``k = 1`` is :func:`best_architecture`'s choice."""
    if k < 1:
        raise ConfigError(f"best_architectures needs k >= 1, got {k}")
    if len(codes) != len(fll) or not codes:
        raise ConfigError(
            f"best_architectures needs one FLL value per code, got {len(codes)} codes and {len(fll)} values"
        )
    order = sorted((i for i, v in enumerate(fll) if v is not None and math.isfinite(v)), key=lambda j: fll[j])
    if not order:
        raise ConfigError("best_architectures: no finite FLL value")
    out: dict[Any, tuple[Code, float, int]] = {}
    for i in order:
        out.setdefault(space.canonical(codes[i]), (tuple(codes[i]), float(fll[i]), i))
        if len(out) == k:
            break
    return list(out.values())


#: How the search's result is picked from the final P (:func:`final_candidates`): ``fll``, the lowest FLL (the paper,
#: Algorithm 2 line 22), or ``accuracy``, the highest federated validation accuracy (the authors' 2021 code:
#: ``federal.py`` at d360d44, ``ControllerSuperNet.work`` ends with ``get_best_supermask()``, which sums the
#: clients' ``accuracy * val_rate`` for every member of the final population and keeps the first maximum)
FINAL_PICKS = ("fll", "accuracy")


def final_candidates(
    space: SearchSpace, codes: Sequence[Code], scores: Sequence[Sequence[float]], k: int = 1, rule: str = "fll"
) -> list[tuple[Code, float, float, int]]:
    """The ``k`` best networks of the final population ``codes`` under ``rule`` (:data:`FINAL_PICKS`), one per
    network (:meth:`SearchSpace.canonical`), best first: ``(code, FLL, federated validation accuracy, index in
    codes)``. ``scores`` holds one ``(FLL, federated validation accuracy)`` per code. Ties go to the member that
    comes first in ``codes`` (the 2021 code's strict ``>`` over the population in order); a non-finite value is
    never picked. ``rule="fll"`` with ``k = 1`` is :func:`best_architecture`'s choice, with ``k`` > 1
    :func:`best_architectures`'."""
    if rule not in FINAL_PICKS:
        raise ConfigError(f"unknown final pick {rule!r}; valid choices: {', '.join(FINAL_PICKS)}")
    if k < 1:
        raise ConfigError(f"final_candidates needs k >= 1, got {k}")
    if len(codes) != len(scores) or not codes:
        raise ConfigError(
            f"final_candidates needs one (FLL, accuracy) pair per code, got {len(codes)} codes and {len(scores)} pairs"
        )
    column, sign = (0, 1.0) if rule == "fll" else (1, -1.0)
    values = [None if s[column] is None else float(s[column]) for s in scores]
    order = sorted(
        (i for i, v in enumerate(values) if v is not None and math.isfinite(v)), key=lambda i: sign * values[i]
    )
    if not order:
        what = "FLL" if rule == "fll" else "federated validation accuracy"
        raise ConfigError(f"final_candidates: no finite {what} value")
    out: dict[Any, tuple[Code, float, float, int]] = {}
    for i in order:
        fll, acc = scores[i][0], scores[i][1]
        out.setdefault(
            space.canonical(codes[i]),
            (tuple(codes[i]), math.nan if fll is None else float(fll), math.nan if acc is None else float(acc), i),
        )
        if len(out) == k:
            break
    return list(out.values())


def sample_members(population: Sequence[Code], k: int, rng: np.random.Generator) -> list[Code]:
    """``k`` members drawn uniformly without replacement (the SuperNet step's 20 of the 60; all if fewer)."""
    if k < 1:
        raise ConfigError(f"sample size must be >= 1, got {k}")
    if k >= len(population):
        return list(population)
    return [tuple(population[i]) for i in rng.choice(len(population), size=k, replace=False)]


# ------------------------------------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class SearchSchedule:
    """The search's budget and its EA's rates.

    Epochs t = 1..``epochs``: each epoch ``steps_per_epoch`` SuperNet steps, each on ``sample_size`` codes drawn
    from the population (all of it when ``sample_size`` = ``population_size``: the paper's Eq. 2); the first
    ``warmup_epochs`` epochs draw a fresh random population every epoch and skip FEO; every later epoch runs one
    FEO generation with :meth:`gamma` (``fixed_gamma`` when set, the ablations of :data:`ABLATIONS`). The chosen
    architecture is retrained ``retrain_runs`` times for ``retrain_epochs``.

    The defaults are the schedule of the presets that were called "paper" until 2026-12-02
    (:data:`WARMUP50_SCHEDULE`): the paper's population, epochs and steps (Section 4.1), with the authors' 2022
    rework's 50 warm-up epochs and controller crossover 0.2 and their code's 20 sampled members per step.
    :data:`PAPER_SCHEDULE` is the paper's, :data:`CODE2021_SCHEDULE` the authors' 2021 code's."""

    population_size: int = 60
    sample_size: int = 20
    epochs: int = 250
    warmup_epochs: int = 50
    steps_per_epoch: int = 5
    gamma0: float = 0.5
    gamma_decay: float = 0.99
    fixed_gamma: float | None = None
    controller_crossover: float = 0.2
    client_crossover: float = 0.5
    parent_fraction: float = 0.5
    retrain_runs: int = 10
    retrain_epochs: int = 50

    def __post_init__(self) -> None:
        for name in ("population_size", "sample_size", "epochs", "steps_per_epoch", "retrain_runs", "retrain_epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.sample_size > self.population_size:
            raise ConfigError(f"sample_size must be <= population_size={self.population_size}, got {self.sample_size}")
        if not 0 <= self.warmup_epochs <= self.epochs:
            raise ConfigError(f"warmup_epochs must be in [0, epochs={self.epochs}], got {self.warmup_epochs}")
        if self.fixed_gamma is not None and not 0.0 <= self.fixed_gamma <= 1.0:
            raise ConfigError(f"fixed_gamma must be None (the schedule) or in [0, 1], got {self.fixed_gamma}")
        if not 0.0 <= self.gamma0 <= 1.0 or not 0.0 < self.gamma_decay <= 1.0:
            raise ConfigError(f"need 0 <= gamma0 <= 1 and 0 < gamma_decay <= 1, got {self.gamma0}, {self.gamma_decay}")

    def evolves(self, epoch: int) -> bool:
        """Whether epoch ``epoch`` (1-based) runs an FEO generation."""
        return epoch > self.warmup_epochs

    def gamma(self, epoch: int) -> float:
        return self.fixed_gamma if self.fixed_gamma is not None else gamma_at(epoch, self.gamma0, self.gamma_decay)

    def controller_config(self) -> EAConfig:
        return EAConfig(self.population_size, self.controller_crossover, self.parent_fraction)

    def client_config(self) -> EAConfig:
        return EAConfig(self.population_size, self.client_crossover, self.parent_fraction)


#: The paper's budget (with ``SearchSpace(num_layers=6)``): |P| = 60, E_evo = 250, E_weight = 5 (Section 4.1), every
#: SuperNet step on all of P (Eq. 2's ``1/|P| sum_{a in P}``), no warm-up and an FEO generation from t = 1
#: (Algorithm 2: gamma = 0.5 x 0.99^t, t = 1..E_evo). The EA's rates, which the paper does not give, are the
#: authors' code's (crossover 0.2 at the controller as in their 2022 rework, 0.5 at the clients; half the base as
#: parents).
PAPER_SCHEDULE = SearchSchedule(sample_size=60, warmup_epochs=0)
#: The authors' 2021 code's (github 21S003018/FL-AGCNS at d360d44, ``federal.py``): 250 epochs, 60 members, 20 of them
#: sampled per step (``EVO_EPOCH``, ``NUM_POP``, ``SAMPLE_SIZE``), no warm-up, crossover 0.5 at the controller and
#: the clients (``l = 0.5`` in ``ControllerSuperNet.evo`` and ``ClientSuperNet.process_population``), and gamma
#: ``0.5 * 0.99^epoch`` with the 0-based epoch, i.e. ``gamma0 = 0.5 / 0.99`` on this 1-based t. Its fitness and final
#: pick (validation accuracy) are run settings (``flagcns.fitness``, ``flagcns.final-pick``), not the schedule's.
CODE2021_SCHEDULE = SearchSchedule(sample_size=20, warmup_epochs=0, controller_crossover=0.5, gamma0=0.5 / 0.99)
#: The schedule of the presets called "paper" until 2026-12-02 and of ``benchmarks/flagcns.py --budget paper``'s
#: cells: the paper's |P|, E_evo and E_weight with 50 warm-up epochs (the 2022 rework's; neither the paper nor the 2021
#: code has them) and 20 sampled members per step.
WARMUP50_SCHEDULE = SearchSchedule()
