"""The run configuration (Flower-free, public API): every key with its default, type and check, parsing of run
configs, presets and ``--set`` pairs, the checks across keys, the generated reference, and the run plan the
launchers and the ServerApp share.

    from flowergraph.settings import parse_run_config, load_preset, Option

* :class:`Option` (one key) and its checks :func:`at_least`, :func:`within`, :func:`left_open`,
  :func:`right_open`: what a method or a task declares its keys with;
* :data:`COMMON_OPTIONS` (the keys every run has), :func:`all_options` / :func:`option_by_key` (with every
  registered method's and task's keys);
* :func:`parse_run_config` -> :class:`RunSettings` (ConfigError naming the bad value and the valid choices);
  :func:`load_preset`, :func:`parse_set`; :func:`check_settings` (combinations across keys);
* :func:`markdown_table` / :func:`toml_table` (the configuration reference of docs/configuration.md and a Flower app's
  ``[tool.flwr.app.config]``; ``python -m flowergraph.settings --help``);
* the choices several layers read: :data:`WEIGHTINGS`, :data:`AGGREGATORS`, :data:`SECURE_AGG`, :data:`DP_MODES`.

The import order is one way (``tests/test_layout.py`` checks it, lazy exports and function-level imports
included): the schema (:mod:`~flowergraph.settings.options`, :mod:`~flowergraph.settings.keys`,
:mod:`~flowergraph.settings.choices`) imports nothing above it; the registry (:mod:`flowergraph.methods.registry`:
``Task``, ``Method``, ``register`` and :class:`RunSettings`) imports only the schema; parsing, the checks, the dataset
names, presets and the reference sit above the registry.

Names are imported on first use (importing the package costs nothing); type checkers see them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .checks import check_privacy as check_privacy, check_settings as check_settings
    from .choices import (
        AGGREGATORS as AGGREGATORS,
        DP_MODES as DP_MODES,
        SECURE_AGG as SECURE_AGG,
        WEIGHTINGS as WEIGHTINGS,
    )
    from .datasets import dataset_task as dataset_task, normalize_dataset as normalize_dataset
    from .keys import COMMON_OPTIONS as COMMON_OPTIONS, GROUPS as GROUPS
    from .options import (
        Option as Option,
        at_least as at_least,
        coerce as coerce,
        left_open as left_open,
        right_open as right_open,
        within as within,
    )
    from ..methods.registry import RunSettings as RunSettings
    from .parse import (
        all_options as all_options,
        defaults as defaults,
        natural_num_clients as natural_num_clients,
        option_by_key as option_by_key,
        parse_run_config as parse_run_config,
    )
    from .presets import flatten_tables as flatten_tables, load_preset as load_preset, parse_set as parse_set
    from .reference import markdown_table as markdown_table, toml_table as toml_table, toml_value as toml_value
    from .parse import OPTIONS as OPTIONS, OPTION_BY_KEY as OPTION_BY_KEY, METHODS as METHODS

_EXPORTS = {
    "check_privacy": "checks",
    "check_settings": "checks",
    "AGGREGATORS": "choices",
    "DP_MODES": "choices",
    "SECURE_AGG": "choices",
    "WEIGHTINGS": "choices",
    "dataset_task": "datasets",
    "normalize_dataset": "datasets",
    "COMMON_OPTIONS": "keys",
    "GROUPS": "keys",
    "Option": "options",
    "at_least": "options",
    "coerce": "options",
    "left_open": "options",
    "right_open": "options",
    "within": "options",
    "RunSettings": "flowergraph.methods.registry",
    "all_options": "parse",
    "defaults": "parse",
    "natural_num_clients": "parse",
    "option_by_key": "parse",
    "parse_run_config": "parse",
    "OPTIONS": "parse",
    "OPTION_BY_KEY": "parse",
    "METHODS": "parse",
    "flatten_tables": "presets",
    "load_preset": "presets",
    "parse_set": "presets",
    "markdown_table": "reference",
    "toml_table": "reference",
    "toml_value": "reference",
}
__all__ = sorted(_EXPORTS)  # the one table: _EXPORTS (tests/test_typing.py holds the TYPE_CHECKING imports to it)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
