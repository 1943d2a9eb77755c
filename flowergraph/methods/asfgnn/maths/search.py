"""Hyper-parameter search drivers with one interface: SMAC3 (Bayesian optimisation), grid search, random search.

A configuration is a plain JSON-able dict with the shared hidden size and one entry per client::

    {"hidden": 256, "clients": [{"dropout": 0.5, "l2": 0.005, "depth": 4, "lr": 0.01},
                                {"dropout": 0.5, "l2": 0.005, "depth": 2, "lr": 0.01}]}

(:func:`client_hyperparams` turns it into :class:`~.training.HyperParams` per client). The search space
(:class:`SearchSpace`, paper section 5.1.4 and 5.3) per client: dropout in [0, 0.5], L2 in [0, 1e-2], depth K in
1..5, lr in [5e-4, 1e-2]; the hidden size in {64, 128, 256, 512} is shared. ``per_client=False`` ties the
clients' values (one set for all, as for the FL baseline). The paper's discrete grid (for grid search) is
d in {0, 0.5}, l2 in {0, 5e-4, 1e-3, 5e-3, 1e-2}, K in 1..5, lr in {5e-4, 1e-3, 5e-3, 1e-2}, l in {64, ..., 512}.

Every driver (:class:`SearchDriver`)::

    trial = driver.ask()               # Trial(index, config) or None when the budget / grid is spent
    driver.tell(trial.index, cost)     # cost to minimise, e.g. 1 - M(theta)
    state = driver.export_state()      # JSON-able; load_driver(state) continues where it stopped

Trials may be told out of order; trials asked and not yet told when the state is exported are offered again
(same index, same configuration) by the resumed driver before anything new.

SMAC (:class:`SmacSearch`): ``Scenario(configspace, n_trials, deterministic=True, seed)`` and
``HyperparameterOptimizationFacade`` (random-forest surrogate, log-EI) by default, or ``facade="blackbox"``
(``BlackBoxFacade``: Gaussian process + EI, the surrogate and acquisition the paper names in section 3.5), both
with ``max_config_calls=1``, driven through ``ask()`` / ``tell(info, TrialValue(cost=...))``. lr is searched
on a log scale, dropout and L2 linearly, K as an integer, the hidden size as an ordinal. On resume SMAC is
rebuilt from the recorded history: a fresh SMAC with the same scenario and seed replays every ask and tell in
their original order, checking that each replayed ask returns the recorded configuration. SMAC's proposals are
a deterministic function of (scenario, seed, history), so the resumed driver then proposes exactly what the
uninterrupted one would (tested). If a replayed ask ever differs (another SMAC version, say), the driver falls
back to SMAC's documented warm start (a fresh SMAC told every finished trial without asking), keeps the
recorded trials, and sets ``resume_mode = "warmstart"``: the search continues correctly but its next proposals
are no longer those of the uninterrupted run. Replaying costs what the original asks cost (about 0.3 s per
trial with the random forest, over 1 s with the GP).

Grid search (:class:`GridSearch`): every point of the grid in a fixed order (mixed radix over hidden, then
each client's dropout, l2, depth, lr; ``shuffle_seed`` permutes the order), nothing materialised (two clients
already give 4 x 200^2 = 160,000 points).

Random search (:class:`RandomSearch`): trial i is drawn from ``numpy.random.default_rng([seed, i])`` with the
same distributions as SMAC's space (uniform, log-uniform lr, uniform integer K, uniform hidden), so trial i does
not depend on earlier trials and resuming needs no generator state.
"""

from __future__ import annotations

import abc
import json
import math
import shutil
import tempfile
import warnings
import weakref
from dataclasses import asdict, dataclass, field
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import ConfigError
from .training import HyperParams

DRIVER_KINDS = ("smac", "grid", "random")
CLIENT_KEYS = ("dropout", "l2", "depth", "lr")
SMAC_FACADES = ("hpo", "blackbox")
STATE_VERSION = 1

Config = dict[str, Any]


@dataclass(frozen=True)
class SearchSpace:
    """Ranges (continuous search) and the discrete grid, for ``num_clients`` clients."""

    num_clients: int = 2
    per_client: bool = True
    dropout: tuple[float, float] = (0.0, 0.5)
    l2: tuple[float, float] = (0.0, 1e-2)
    depth: tuple[int, int] = (1, 5)
    lr: tuple[float, float] = (5e-4, 1e-2)
    lr_log: bool = True
    hidden: tuple[int, ...] = (64, 128, 256, 512)
    grid_dropout: tuple[float, ...] = (0.0, 0.5)
    grid_l2: tuple[float, ...] = (0.0, 5e-4, 1e-3, 5e-3, 1e-2)
    grid_depth: tuple[int, ...] = (1, 2, 3, 4, 5)
    grid_lr: tuple[float, ...] = (5e-4, 1e-3, 5e-3, 1e-2)

    def __post_init__(self) -> None:
        if isinstance(self.num_clients, bool) or not isinstance(self.num_clients, int) or self.num_clients < 1:
            raise ConfigError(f"num_clients {self.num_clients!r} must be an integer >= 1")
        for name in ("dropout", "l2", "depth", "lr"):
            lo, hi = getattr(self, name)
            if not lo <= hi:
                raise ConfigError(f"{name} range {getattr(self, name)!r} is empty (low > high)")
        if not (0.0 <= self.dropout[0] and self.dropout[1] < 1.0):
            raise ConfigError(f"dropout range {self.dropout!r} must lie in [0, 1)")
        if self.l2[0] < 0:
            raise ConfigError(f"l2 range {self.l2!r} must be >= 0")
        if self.lr[0] <= 0:
            raise ConfigError(f"lr range {self.lr!r} must be > 0")
        if self.depth[0] < 1 or self.depth[1] > 5:
            raise ConfigError(f"depth range {self.depth!r} must lie in 1..5")
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ConfigError(f"hidden sizes {self.hidden!r} must be positive integers")
        for key in CLIENT_KEYS:
            for v in getattr(self, f"grid_{key}"):
                if not self._in_range(key, v):
                    raise ConfigError(f"grid value {key}={v!r} lies outside the range {getattr(self, key)!r}")

    # ----------------------------------------------------------------------------------------------- (de)serial
    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SearchSpace:
        valid = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - valid)
        if unknown:
            raise ConfigError(f"unknown search-space fields {unknown}; valid: {', '.join(sorted(valid))}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()})

    @property
    def num_groups(self) -> int:
        """How many independent per-client blocks the space has (1 when the clients share values)."""
        return self.num_clients if self.per_client else 1

    # --------------------------------------------------------------------------------------------- validation
    def _in_range(self, key: str, value) -> bool:
        lo, hi = getattr(self, key)
        if key == "depth":
            return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and lo <= value <= hi
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            return False
        v = float(value)
        return math.isfinite(v) and lo - 1e-12 <= v <= hi + 1e-12

    def validate(self, config: Mapping[str, Any]) -> Config:
        """Check a configuration against the space; returns a normalised copy (plain ints / floats)."""
        if not isinstance(config, Mapping) or set(config) != {"hidden", "clients"}:
            keys = sorted(config) if isinstance(config, Mapping) else type(config).__name__
            raise ConfigError(f"a configuration has exactly the keys 'hidden' and 'clients'; got {keys}")
        hidden = config["hidden"]
        if isinstance(hidden, bool) or not isinstance(hidden, (int, np.integer)) or int(hidden) not in self.hidden:
            raise ConfigError(f"hidden size {hidden!r} is invalid; valid choices: {', '.join(map(str, self.hidden))}")
        clients = config["clients"]
        if not isinstance(clients, Sequence) or len(clients) != self.num_clients:
            raise ConfigError(
                f"'clients' must list {self.num_clients} clients' values, got "
                f"{len(clients) if isinstance(clients, Sequence) else type(clients).__name__}"
            )
        out = []
        for i, c in enumerate(clients):
            if not isinstance(c, Mapping) or set(c) != set(CLIENT_KEYS):
                raise ConfigError(
                    f"client {i}'s values must have exactly the keys {', '.join(CLIENT_KEYS)}; "
                    f"got {sorted(c) if isinstance(c, Mapping) else c!r}"
                )
            for key in CLIENT_KEYS:
                if not self._in_range(key, c[key]):
                    raise ConfigError(f"client {i}: {key} {c[key]!r} is outside the valid range {getattr(self, key)!r}")
            out.append(
                {"dropout": float(c["dropout"]), "l2": float(c["l2"]), "depth": int(c["depth"]), "lr": float(c["lr"])}
            )
        if not self.per_client and any(o != out[0] for o in out[1:]):
            raise ConfigError(
                "this search space shares one set of values across clients (per_client=False), "
                f"but the clients' values differ: {out}"
            )
        return {"hidden": int(hidden), "clients": out}

    # ------------------------------------------------------------------------------------------ flat <-> nested
    def _flat_name(self, group: int, key: str) -> str:
        return f"c{group}.{key}" if self.per_client else key

    def to_flat(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The configuration as SMAC's flat names (``c0.dropout`` ..., ``hidden``)."""
        cfg = self.validate(config)
        flat: dict[str, Any] = {"hidden": cfg["hidden"]}
        for g in range(self.num_groups):
            for key in CLIENT_KEYS:
                flat[self._flat_name(g, key)] = cfg["clients"][g][key]
        return flat

    def from_flat(self, flat: Mapping[str, Any]) -> Config:
        groups = [{key: flat[self._flat_name(g, key)] for key in CLIENT_KEYS} for g in range(self.num_groups)]
        clients = groups if self.per_client else [dict(groups[0]) for _ in range(self.num_clients)]
        return self.validate(
            {
                "hidden": int(flat["hidden"]),
                "clients": [
                    {
                        "dropout": float(c["dropout"]),
                        "l2": float(c["l2"]),
                        "depth": int(c["depth"]),
                        "lr": float(c["lr"]),
                    }
                    for c in clients
                ],
            }
        )

    # ------------------------------------------------------------------------------------------------- grid
    def grid_axes(self) -> list[tuple[str, tuple]]:
        """The grid's axes, most significant first: hidden, then per group dropout, l2, depth, lr."""
        axes: list[tuple[str, tuple]] = [("hidden", tuple(self.hidden))]
        for g in range(self.num_groups):
            for key in CLIENT_KEYS:
                axes.append((self._flat_name(g, key), tuple(getattr(self, f"grid_{key}"))))
        return axes

    def grid_size(self) -> int:
        return math.prod(len(values) for _, values in self.grid_axes())

    def grid_point(self, index: int) -> Config:
        """The ``index``-th grid point (mixed-radix decoding, last axis fastest)."""
        size = self.grid_size()
        if not 0 <= int(index) < size:
            raise ConfigError(f"grid index {index!r} is out of range 0..{size - 1}")
        flat: dict[str, Any] = {}
        rest = int(index)
        for name, values in reversed(self.grid_axes()):
            rest, digit = divmod(rest, len(values))
            flat[name] = values[digit]
        return self.from_flat(flat)

    # ----------------------------------------------------------------------------------------------- random
    def sample(self, rng: np.random.Generator) -> Config:
        """One configuration: uniform dropout and L2, log-uniform (or uniform) lr, uniform K and hidden."""
        flat: dict[str, Any] = {"hidden": int(self.hidden[int(rng.integers(len(self.hidden)))])}
        for g in range(self.num_groups):
            lr_lo, lr_hi = self.lr
            lr = math.exp(rng.uniform(math.log(lr_lo), math.log(lr_hi))) if self.lr_log else rng.uniform(lr_lo, lr_hi)
            flat[self._flat_name(g, "dropout")] = float(rng.uniform(*self.dropout))
            flat[self._flat_name(g, "l2")] = float(rng.uniform(*self.l2))
            flat[self._flat_name(g, "depth")] = int(rng.integers(self.depth[0], self.depth[1] + 1))
            flat[self._flat_name(g, "lr")] = float(min(max(lr, lr_lo), lr_hi))
        return self.from_flat(flat)

    # ------------------------------------------------------------------------------------------ ConfigSpace
    def configspace(self, seed: int = 0):
        """The space as a ``ConfigSpace.ConfigurationSpace`` (SMAC's input)."""
        from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer

        cs = ConfigurationSpace(seed=int(seed))
        params = []
        for g in range(self.num_groups):
            params += [
                Float(self._flat_name(g, "dropout"), tuple(map(float, self.dropout))),
                Float(self._flat_name(g, "l2"), tuple(map(float, self.l2))),
                Integer(self._flat_name(g, "depth"), tuple(map(int, self.depth))),
                Float(self._flat_name(g, "lr"), tuple(map(float, self.lr)), log=self.lr_log),
            ]
        params.append(Categorical("hidden", [int(h) for h in self.hidden], ordered=True))
        cs.add(params)
        return cs


def client_hyperparams(config: Mapping[str, Any], space: SearchSpace | None = None) -> list[HyperParams]:
    """Per-client :class:`HyperParams` of a configuration (validated against ``space`` when given)."""
    cfg = space.validate(config) if space is not None else config
    try:
        return [
            HyperParams(
                hidden=int(cfg["hidden"]),
                depth=int(c["depth"]),
                dropout=float(c["dropout"]),
                l2=float(c["l2"]),
                lr=float(c["lr"]),
            )
            for c in cfg["clients"]
        ]
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"configuration {cfg!r} is malformed ({exc}); expected "
            "{'hidden': int, 'clients': [{'dropout', 'l2', 'depth', 'lr'}, ...]}"
        ) from None


def config_from_hyperparams(hps: Sequence[HyperParams]) -> Config:
    """The inverse of :func:`client_hyperparams` (all hidden sizes must be equal)."""
    hidden = sorted({hp.hidden for hp in hps})
    if len(hidden) != 1:
        raise ConfigError(f"the clients' hidden sizes {hidden} differ; a configuration has one hidden size")
    return {
        "hidden": hidden[0],
        "clients": [
            {"dropout": float(hp.dropout), "l2": float(hp.l2), "depth": int(hp.depth), "lr": float(hp.lr)} for hp in hps
        ],
    }


# ------------------------------------------------------------------------------------------------------ drivers
@dataclass(frozen=True)
class Trial:
    index: int
    config: Config


@dataclass
class _Record:
    config: Config
    cost: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # driver-specific (e.g. SMAC's trial seed)


class SearchDriver(abc.ABC):
    """The common interface: ask / tell / export_state (see the module docstring)."""

    kind: str = ""

    def __init__(self, space: SearchSpace, n_trials: int | None):
        if not isinstance(space, SearchSpace):
            raise ConfigError(f"space must be a SearchSpace, got {type(space).__name__}")
        if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1):
            raise ConfigError(f"n_trials {n_trials!r} must be a positive integer (or None where allowed)")
        self.space = space
        self.n_trials = n_trials
        self._trials: list[_Record] = []
        self._history: list[list] = []  # ["ask", i] / ["tell", i, cost] in the order they happened
        self._requeue: list[int] = []  # pending trials offered again after a resume

    # ---------------------------------------------------------------------------------------------- interface
    def ask(self) -> Trial | None:
        """The next trial to evaluate, or None when the budget (``n_trials``) or the grid is spent."""
        if self._requeue:
            index = self._requeue.pop(0)
            return Trial(index, _copy(self._trials[index].config))
        if self.n_trials is not None and len(self._trials) >= self.n_trials:
            return None
        proposed = self._propose(len(self._trials))
        if proposed is None:
            return None
        config, extra = proposed
        index = len(self._trials)
        self._trials.append(_Record(self.space.validate(config), None, extra))
        self._history.append(["ask", index])
        return Trial(index, _copy(self._trials[index].config))

    def tell(self, index: int, cost: float) -> None:
        """Report trial ``index``'s cost (lower is better). Each trial is told once."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < len(self._trials):
            raise ConfigError(f"trial index {index!r} was never asked; asked trials: 0..{len(self._trials) - 1}")
        if self._trials[index].cost is not None:
            raise ConfigError(f"trial {index} was already told (cost {self._trials[index].cost})")
        if index in self._requeue:
            raise ConfigError(f"trial {index} must be asked again after the resume before it is told")
        try:
            value = float(cost)
        except (TypeError, ValueError):
            raise ConfigError(f"cost {cost!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"cost {cost!r} must be finite")
        self._observe(index, value)
        self._trials[index].cost = value
        self._history.append(["tell", int(index), value])

    def export_state(self) -> dict[str, Any]:
        """A JSON-able snapshot: settings, every trial (configuration, cost or None) and the ask/tell order."""
        state = {
            "version": STATE_VERSION,
            "kind": self.kind,
            "space": self.space.to_dict(),
            "n_trials": self.n_trials,
            "settings": self._settings(),
            "trials": [
                {"index": i, "config": _copy(r.config), "cost": r.cost, "extra": dict(r.extra)}
                for i, r in enumerate(self._trials)
            ],
            "history": [list(h) for h in self._history],
        }
        json.dumps(state)  # fail here, not in the caller's writer, if anything is not JSON-able
        return state

    # --------------------------------------------------------------------------------------------- inspection
    @property
    def trials(self) -> list[tuple[int, Config, float | None]]:
        return [(i, _copy(r.config), r.cost) for i, r in enumerate(self._trials)]

    @property
    def finished(self) -> list[tuple[int, Config, float]]:
        return [(i, _copy(r.config), r.cost) for i, r in enumerate(self._trials) if r.cost is not None]

    @property
    def pending(self) -> list[int]:
        return [i for i, r in enumerate(self._trials) if r.cost is None]

    def best(self) -> tuple[int, Config, float] | None:
        """The finished trial with the lowest cost (the earliest on ties), or None."""
        done = self.finished
        return min(done, key=lambda t: (t[2], t[0])) if done else None

    # ------------------------------------------------------------------------------------------------ hooks
    @abc.abstractmethod
    def _propose(self, index: int) -> tuple[Config, dict[str, Any]] | None: ...

    def _observe(self, index: int, cost: float) -> None:
        pass

    def _settings(self) -> dict[str, Any]:
        return {}

    def _restore(self, state: Mapping[str, Any]) -> None:
        """Load the recorded trials (subclasses replay them into their optimiser first)."""
        for t in state["trials"]:
            self._trials.append(_Record(self.space.validate(t["config"]), t["cost"], dict(t.get("extra", {}))))
        self._history = [list(h) for h in state["history"]]
        self._requeue = self.pending


def _copy(config: Config) -> Config:
    return {"hidden": config["hidden"], "clients": [dict(c) for c in config["clients"]]}


class GridSearch(SearchDriver):
    """Every grid point once, in mixed-radix order (or a seeded permutation of it)."""

    kind = "grid"

    def __init__(self, space: SearchSpace, n_trials: int | None = None, shuffle_seed: int | None = None):
        super().__init__(space, n_trials)
        self.shuffle_seed = shuffle_seed
        self._order: np.ndarray | None = None
        if shuffle_seed is not None:
            size = space.grid_size()
            if size > 10_000_000:
                raise ConfigError(f"the grid has {size} points; shuffling needs at most 10,000,000")
            self._order = np.random.default_rng(np.random.SeedSequence([int(shuffle_seed), 0x6A1D])).permutation(size)

    def grid_index(self, trial_index: int) -> int:
        return int(self._order[trial_index]) if self._order is not None else int(trial_index)

    def _propose(self, index: int):
        if index >= self.space.grid_size():
            return None
        return self.space.grid_point(self.grid_index(index)), {}

    def _settings(self) -> dict[str, Any]:
        return {"shuffle_seed": self.shuffle_seed}

    def __iter__(self) -> Iterator[Config]:
        """All grid points in this driver's order (does not touch the driver's trials)."""
        for i in range(self.space.grid_size()):
            yield self.space.grid_point(self.grid_index(i))


class RandomSearch(SearchDriver):
    """Trial i drawn from ``default_rng([seed, i])`` (see the module docstring)."""

    kind = "random"

    def __init__(self, space: SearchSpace, n_trials: int, seed: int = 0):
        if n_trials is None:
            raise ConfigError("random search needs n_trials (a positive integer)")
        super().__init__(space, n_trials)
        self.seed = int(seed)

    def _propose(self, index: int):
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x7A2D, int(index)]))
        return self.space.sample(rng), {}

    def _settings(self) -> dict[str, Any]:
        return {"seed": self.seed}


class SmacSearch(SearchDriver):
    """SMAC3's ask/tell loop (see the module docstring). ``output_directory`` defaults to a temporary folder
    removed with the driver."""

    kind = "smac"

    def __init__(
        self,
        space: SearchSpace,
        n_trials: int,
        seed: int = 0,
        facade: str = "hpo",
        output_directory: str | None = None,
        initial_design_configs: int | None = None,
    ):
        if n_trials is None:
            raise ConfigError("SMAC needs n_trials (a positive integer)")
        if facade not in SMAC_FACADES:
            raise ConfigError(f"SMAC facade {facade!r} is unknown; valid choices: {', '.join(SMAC_FACADES)}")
        super().__init__(space, n_trials)
        self.seed = int(seed)
        self.facade = facade
        self.initial_design_configs = initial_design_configs
        self.resume_mode = "fresh"
        if output_directory is None:
            output_directory = tempfile.mkdtemp(prefix="flowergraph-smac-")
            weakref.finalize(self, shutil.rmtree, output_directory, True)
        self._output_directory = output_directory
        self._infos: dict[int, Any] = {}  # trial index -> SMAC TrialInfo (asked, not yet told)
        self._smac = self._new_smac()

    def _new_smac(self):
        import logging
        from pathlib import Path

        try:
            from smac import BlackBoxFacade, HyperparameterOptimizationFacade, Scenario
        except ImportError as exc:
            raise ImportError("the SMAC driver needs SMAC3 >= 2.2: pip install -c constraints.txt 'smac>=2.2'") from exc

        cls = HyperparameterOptimizationFacade if self.facade == "hpo" else BlackBoxFacade
        scenario = Scenario(
            self.space.configspace(self.seed),
            n_trials=int(self.n_trials),
            deterministic=True,
            seed=self.seed,
            output_directory=Path(self._output_directory),
        )
        kwargs: dict[str, Any] = {"intensifier": cls.get_intensifier(scenario, max_config_calls=1)}
        if self.initial_design_configs is not None:
            kwargs["initial_design"] = cls.get_initial_design(scenario, n_configs=int(self.initial_design_configs))
        smac = cls(scenario, target_function=None, overwrite=True, logging_level=logging.ERROR, **kwargs)
        _ordered_start_points(smac)
        return smac

    def _propose(self, index: int):
        info = self._smac.ask()
        self._infos[index] = info
        return self.space.from_flat(dict(info.config)), {"smac_seed": info.seed}

    def _observe(self, index: int, cost: float) -> None:
        from smac.runhistory.dataclasses import TrialValue

        info = self._infos.pop(index, None)
        if info is None:  # a requeued trial after a warm-start resume: tell it without ask
            info = self._trial_info(self._trials[index])
        self._smac.tell(info, TrialValue(cost=cost), save=False)

    def _trial_info(self, record: _Record):
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo

        config = Configuration(self._smac.scenario.configspace, values=self.space.to_flat(record.config))
        return TrialInfo(config=config, seed=record.extra.get("smac_seed"))

    def _settings(self) -> dict[str, Any]:
        return {"seed": self.seed, "facade": self.facade, "initial_design_configs": self.initial_design_configs}

    def _restore(self, state: Mapping[str, Any]) -> None:
        from smac.runhistory.dataclasses import TrialValue

        trials = state["trials"]
        replayed: dict[int, Any] = {}
        exact = True
        for event in state["history"]:
            if event[0] == "ask":
                info = self._smac.ask()
                recorded = self.space.validate(trials[event[1]]["config"])
                if self.space.from_flat(dict(info.config)) != recorded:
                    exact = False
                    break
                replayed[event[1]] = info
            else:
                self._smac.tell(replayed.pop(event[1]), TrialValue(cost=float(event[2])), save=False)
        super()._restore(state)
        if exact:
            self.resume_mode = "replay"
            self._infos = replayed  # pending trials are asked again with the same SMAC TrialInfo
            return
        warnings.warn(
            "SMAC's replayed proposals differ from the recorded trials (another SMAC version?); "
            "resuming by warm start: the next proposals differ from the uninterrupted run's",
            RuntimeWarning,
            stacklevel=3,
        )
        self.resume_mode = "warmstart"
        self._smac = self._new_smac()
        self._infos = {}
        for i, record in enumerate(self._trials):
            if record.cost is not None:
                self._smac.tell(self._trial_info(record), TrialValue(cost=record.cost), save=False)


def _ordered_start_points(smac: Any) -> None:
    """Make SMAC's proposals independent of the interpreter's string-hash seed.

    SMAC's local search (``LocalSearch._get_init_points_from_previous_configs``, smac 2.4) de-duplicates its start
    points with ``list(set(...))``: their order, hence the local searches' order and the proposal, follows the
    configurations' hashes, which Python salts per interpreter (``PYTHONHASHSEED``). A resumed tuning run is a new
    interpreter, so it proposed other configurations than the uninterrupted run (a replay inside one interpreter
    did not show it). This replaces that method on this SMAC's own local search by the same code with an
    order-preserving de-duplication (first occurrence kept, as SMAC's docstring describes); the random numbers it
    draws are unchanged."""
    import itertools

    import numpy as np

    maximizer = getattr(smac, "_acquisition_maximizer", None)
    local = getattr(maximizer, "_local_search", None)
    if local is None or not hasattr(local, "_get_init_points_from_previous_configs"):
        return

    def get_init_points(previous_configs: list, n_points: int, additional_start_points: list | None) -> list:
        acquisition = local._acquisition_function
        sorted_by_cost = []
        if acquisition.model is not None:
            from smac.utils.configspace import convert_configurations_to_array

            conf_array = convert_configurations_to_array(previous_configs)
            costs = acquisition.model.predict_marginalized(conf_array)[0]
            if len(costs.shape) == 2 and costs.shape[1] > 1:
                weights = np.array([local._rng.rand() for _ in range(costs.shape[1])])
                costs = costs @ (weights / np.sum(weights))
            random = local._rng.rand(len(costs))
            indices = np.lexsort((random.flatten(), costs.flatten()))
            sorted_by_cost = [previous_configs[i] for i in indices][:n_points]
        extra = [point[1] for point in additional_start_points] if additional_start_points is not None else []
        return list(dict.fromkeys(itertools.chain(sorted_by_cost, extra)))

    local._get_init_points_from_previous_configs = get_init_points


def make_driver(kind: str, space: SearchSpace, n_trials: int | None = None, **settings: Any) -> SearchDriver:
    """A driver by name: ``smac`` (n_trials, seed, facade), ``grid`` (n_trials optional, shuffle_seed),
    ``random`` (n_trials, seed)."""
    if kind == "smac":
        return SmacSearch(space, n_trials, **settings)
    if kind == "grid":
        return GridSearch(space, n_trials, **settings)
    if kind == "random":
        return RandomSearch(space, n_trials, **settings)
    raise ConfigError(f"search driver {kind!r} is unknown; valid choices: {', '.join(DRIVER_KINDS)}")


def load_driver(state: Mapping[str, Any], output_directory: str | None = None) -> SearchDriver:
    """Rebuild a driver from :meth:`SearchDriver.export_state` so that it continues where it stopped."""
    if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
        raise ConfigError(
            f"search state version {state.get('version') if isinstance(state, Mapping) else None!r} "
            f"is not supported; valid: {STATE_VERSION}"
        )
    kind = state.get("kind")
    if kind not in DRIVER_KINDS:
        raise ConfigError(f"search state kind {kind!r} is unknown; valid choices: {', '.join(DRIVER_KINDS)}")
    space = SearchSpace.from_dict(state["space"])
    settings = dict(state.get("settings", {}))
    if kind == "smac" and output_directory is not None:
        settings["output_directory"] = output_directory
    driver = make_driver(kind, space, state.get("n_trials"), **settings)
    driver._restore(state)
    return driver
