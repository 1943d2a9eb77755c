"""Parsing a run configuration (Flower-free): every key (the common keys of :mod:`~flowergraph.settings.keys`,
then each registered task's and method's own, named ``<owner>.<key>``: :mod:`flowergraph.methods`) with its
default, type and check. They are the single source of truth for ``[tool.flwr.app.config]`` in ``pyproject.toml``
(a test checks they agree), for the configuration reference (``python -m flowergraph.settings --markdown``,
grouped as docs/configuration.md lists them) and for validation: :func:`parse_run_config` turns Flower's
``context.run_config`` (or any mapping) into a :class:`~flowergraph.methods.registry.RunSettings` and raises
:class:`~flowergraph.errors.ConfigError` naming the bad value and the valid choices before anything is trained.

An unknown key is refused naming the keys it may mean (:func:`unknown_key`: a key of another namespace with the
same last part, ``lr`` -> ``node.lr``, else a close match).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..errors import ConfigError, unknown_keys_message
from ..methods.registry import RunSettings, get_method, methods, suggest, task_of_dataset, tasks
from .checks import check_settings
from .datasets import normalize_dataset
from .keys import COMMON_OPTIONS
from .options import Option


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


def unknown_key(key: str, known: Iterable[str]) -> ConfigError:
    """The refusal of an unknown run-config key (:func:`~flowergraph.errors.unknown_keys_message`): the keys it may
    mean, the few closest and where every key is listed."""
    return ConfigError(unknown_keys_message([key], known))


def check_task(name: str, dataset: str) -> None:
    """``task``: ``auto`` or a registered task that can use ``dataset`` (normalised); ConfigError naming the valid
    tasks, or the dataset and the tasks it supports."""
    if name == "auto":
        return
    registry = tasks()
    if name not in registry:
        raise ConfigError(
            f"unknown task {name!r}; valid choices: auto, {', '.join(registry)}{suggest(name, ['auto', *registry])}"
        )
    task = registry[name]
    if not task.accepts(dataset):
        supported = [t.name for t in registry.values() if t.accepts(dataset)]
        raise ConfigError(
            f"task={name!r} ({task.description}) cannot use dataset {dataset!r}, which supports task "
            f"{' or '.join(repr(t) for t in supported) or 'none'}; valid datasets for task {name!r}: "
            f"{task.datasets()}"
        )


def parse_run_config(raw: Mapping[str, Any], *, allow_unknown: bool = False) -> RunSettings:
    """Validate a run configuration (missing keys take their defaults).

    Raises ConfigError for an unknown key (unless ``allow_unknown``: a user's own app may add keys, which are left
    out), a value of the wrong type, an unknown choice, an out-of-range number or an inconsistent combination.
    """
    by_key = option_by_key()
    values = {k: o.default for k, o in by_key.items()}
    for key, value in raw.items():
        option = by_key.get(key)
        if option is None:
            if allow_unknown:
                continue
            raise unknown_key(key, by_key)
        values[key] = option.parse(value)
    method = get_method(values["method"])  # ConfigError naming the registered methods
    values["dataset"] = normalize_dataset(values["dataset"])
    check_task(values.get("task", "auto"), values["dataset"])
    settings = RunSettings(values)
    if method.fixed_rounds is not None and values["rounds"] == by_key["rounds"].default:
        # the method's schedule fixes the rounds and the run did not ask for others (a plain `flwr run` passes
        # every key, so the default value stands for "not given"): take the schedule's number
        values["rounds"] = int(method.fixed_rounds(settings))
        settings = RunSettings(values)
    check_settings(settings)
    return settings
