"""Federated methods by name: the registry (:mod:`flowergraph.methods.registry`) and the built-in methods.

    from flowergraph.methods import Method, register, get_method, methods

See :mod:`flowergraph.methods.registry` for what a registration holds and how packages add methods.
"""

from .registry import (ENTRY_POINT_GROUP, PLUGINS_ENV, TASKS, ClientArgs, Method, StrategyArgs, get_method,
                       methods, register, unregister)

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_ENV", "TASKS", "ClientArgs", "Method", "StrategyArgs", "get_method",
           "methods", "register", "unregister"]
