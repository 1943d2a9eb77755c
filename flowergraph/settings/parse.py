"""The run configuration: every key, its default, its type and its check (Flower-free).

The keys every run has are :data:`COMMON_OPTIONS` below; each registered method adds its own, named
``<method>.<key>`` (:mod:`flowergraph.methods`). Together they are the single source of truth for
``[tool.flwr.app.config]`` in ``pyproject.toml`` (a test checks they agree), for the configuration
reference (``python -m flowergraph.settings --markdown``, grouped as docs/configuration.md lists them) and for validation:
:func:`parse_run_config` turns Flower's ``context.run_config`` (or any mapping) into a :class:`RunSettings` and
raises :class:`~flowergraph.errors.ConfigError` naming the bad value and the valid choices before anything is
trained.

A key renamed before 0.3 is an unknown key under its old name (0.3 removed the old names); the refusal names the
new one (:func:`renamed_hint`, from :data:`~flowergraph.settings.keys.REMOVED_KEYS`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Iterable, Mapping

from ..errors import ConfigError
from .checks import check_settings
from .keys import COMMON_OPTIONS, REMOVED_KEYS
from .options import Option
from ..methods.registry import get_method, methods, suggest, task_of_dataset, tasks
from .datasets import normalize_dataset


def natural_num_clients(method: str, dataset: str | None) -> int:
    """The number of clients a run has when none is given: what the dataset implies for its task (graph
    classification given several datasets: one client per dataset), else the ``num-clients`` default."""
    default = next(o.default for o in COMMON_OPTIONS if o.key == "num-clients")
    if dataset:
        task = task_of_dataset(normalize_dataset(dataset))
        if task.natural_num_clients is not None:
            return task.natural_num_clients(normalize_dataset(dataset)) or default
    return default


def all_options() -> tuple[Option, ...]:
    """The common keys, then each registered task's and method's own keys (in registration order)."""
    out = list(COMMON_OPTIONS)
    for task in tasks().values():
        out.extend(task.options)
    for method in methods().values():
        out.extend(method.options)
    return tuple(out)


def option_by_key() -> dict[str, Option]:
    return {o.key: o for o in all_options()}


def __getattr__(name: str):  # OPTIONS / OPTION_BY_KEY / METHODS: computed, since plugins register late
    if name == "OPTIONS":
        return all_options()
    if name == "OPTION_BY_KEY":
        return option_by_key()
    if name == "METHODS":

        return tuple(methods())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def defaults() -> dict[str, Any]:
    return {o.key: o.default for o in all_options()}


def renamed_hint(keys: Iterable[str], *, named: bool = False) -> str:
    """For the old names among ``keys`` (keys renamed before 0.3: :data:`~flowergraph.settings.keys.REMOVED_KEYS`),
    ``": it was renamed to 'fedgcn.hops' (0.3 removed the old name)"`` (several: ``": 'hops' was renamed to
    'fedgcn.hops', 'he' to 'fedgcn.he' (...)"``; ``named``: the one key by name too); '' when none is an old
    name."""
    old = [k for k in keys if k in REMOVED_KEYS]
    if not old:
        return ""
    registered = tasks()

    def new_names(key: str) -> str:
        new = REMOVED_KEYS[key]
        if len(new) == 1:
            return repr(new[0])
        return " or ".join(f"{n!r}" + (f" ({registered[t].description})" if (t := n.partition(".")[0]) in registered
                                       else "") for n in new)

    if len(old) == 1 and not named:
        return f": it was renamed to {new_names(old[0])} (0.3 removed the old name)"
    parts = [f"{k!r} was renamed to {new_names(k)}" if i == 0 else f"{k!r} to {new_names(k)}"
             for i, k in enumerate(old)]
    return f": {', '.join(parts)} (0.3 removed the old name{'s' if len(old) > 1 else ''})"


def unknown_key(key: str, known: Iterable[str]) -> ConfigError:
    """The refusal of an unknown run-config key: the new name of an old one, else a close match and the valid
    keys."""
    hint = renamed_hint([key])
    if hint:
        return ConfigError(f"unknown run-config key {key!r}{hint}")
    known = list(known)
    return ConfigError(f"unknown run-config key {key!r}{suggest(key, known)}; valid keys: {', '.join(known)}")


class RunSettings:
    """Validated run configuration; attribute names are the common keys with ``-`` replaced by ``_``
    (``s.num_clients``); a task's or method's keys: ``s["node.hidden"]``, ``s["fedgcn.hops"]`` or
    ``s.of("fedgcn").hops``."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        key = name.replace("_", "-")
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"RunSettings({self._values!r})"

    def of(self, method: str | None = None) -> SimpleNamespace:
        """The keys of a method or task (default: the run's method) without their prefix, ``-`` as ``_``."""
        prefix = f"{method or self.method}."
        return SimpleNamespace(**{k[len(prefix):].replace("-", "_"): v for k, v in self._values.items()
                                  if k.startswith(prefix)})

    @property
    def method_info(self):
        """The registered :class:`flowergraph.methods.Method` of this run."""

        return get_method(self.method)

    @property
    def task_info(self):
        """The registered :class:`flowergraph.methods.Task` of this run (the one its dataset belongs to)."""
        return task_of_dataset(self.dataset)

    @property
    def task(self) -> str:
        return self.task_info.name

    @property
    def needs_key_file(self) -> bool:
        """Whether the data owners must hold a CKKS key file for this run (the method encrypts, or the training
        rounds are aggregated under CKKS)."""
        return self.method_info.key_file_needed(self) or self.secure_agg == "ckks"

    @property
    def secagg_weight_bound(self) -> float:
        """SecAgg+'s bound on a client's weight (Flower's ``max_weight``): ``secagg-max-weight``, or 1 with
        ``weighting=uniform``, else Flower's default 1000. A client whose weight exceeds it refuses the round
        (Flower would clip its scaled update silently)."""
        if self.secagg_max_weight > 0:
            return float(self.secagg_max_weight)
        return 1.0 if self.weighting == "uniform" else 1000.0

    @property
    def clients_per_round(self) -> int:
        """Clients sampled for training each round."""
        return max(1, int(round(self.fraction_fit * self.effective_num_clients)))

    # The node task's specs (kept here for code written before the task owned its keys).
    def graph_spec(self):
        from ..methods.node import graph_spec

        return graph_spec(self)

    def partition_spec(self):
        from ..methods.node import partition_spec

        return partition_spec(self)

    def train_config(self):
        from ..methods.node import train_config

        return train_config(self)

    @property
    def effective_num_clients(self) -> int:
        """Clients the federation has: 1 for a method where one client holds the whole graph (``centralized``)."""
        return 1 if self.method_info.whole_graph else self.num_clients


def parse_run_config(raw: Mapping[str, Any], *, allow_unknown: bool = False) -> RunSettings:
    """Validate a run configuration (missing keys take their defaults).

    Raises ConfigError for an unknown key (unless ``allow_unknown``: a user's own app may add keys; an old name
    of a renamed key is refused even then, naming the new one), a value of the wrong type, an unknown choice, an
    out-of-range number or an inconsistent combination.
    """
    by_key = option_by_key()
    values = {k: o.default for k, o in by_key.items()}
    for key, value in raw.items():
        option = by_key.get(key)
        if option is None:
            if allow_unknown and key not in REMOVED_KEYS:
                continue
            raise unknown_key(key, by_key)
        values[key] = option.parse(value)
    method = get_method(values["method"])  # ConfigError naming the registered methods
    values["dataset"] = normalize_dataset(values["dataset"])
    settings = RunSettings(values)
    if method.fixed_rounds is not None and values["rounds"] == by_key["rounds"].default:
        # the method's schedule fixes the rounds and the run did not ask for others (a plain `flwr run` passes
        # every key, so the default value stands for "not given"): take the schedule's number
        values["rounds"] = int(method.fixed_rounds(settings))
        settings = RunSettings(values)
    check_settings(settings)
    return settings
