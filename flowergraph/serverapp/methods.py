"""``STRATEGIES``: every method's Strategy class that :mod:`flowergraph.serverapp` exports, in its table's order
(each class lives in its method's folder, ``flowergraph/methods/<name>/strategy.py``)."""

from __future__ import annotations

import importlib

from .strategy import GraphStrategy


def _strategies() -> tuple[type[GraphStrategy], ...]:
    package = importlib.import_module(__package__ or "flowergraph.serverapp")
    found = []
    for name, module in package._EXPORTS.items():
        if name == "STRATEGIES":
            continue
        value = getattr(importlib.import_module(module if "." in module else f"{package.__name__}.{module}"), name)
        if isinstance(value, type) and issubclass(value, GraphStrategy) and value is not GraphStrategy:
            found.append(value)
    return tuple(found)


STRATEGIES: tuple[type[GraphStrategy], ...] = _strategies()
