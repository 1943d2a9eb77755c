"""Tasks and federated methods by name (public API): the registry (:mod:`flowergraph.methods.registry`), the
built-in registrations, and what a method author needs to write one.

    from flowergraph.methods import Method, Task, register, get_method, methods, Option

* registering: :class:`Method`, :class:`Task`, :func:`register`, :func:`register_task`; a method's keys declared
  once as :func:`option` fields of an :class:`Options` dataclass, whose run-config keys :func:`options_of` derives
  (and which the method's Strategy class inherits: :class:`flowergraph.serverapp.GraphStrategy`), or one by one
  as :class:`Option` (:func:`namespace`: ``opt = namespace("mymethod")``, keys ``mymethod.<key>``); the checks
  (:func:`at_least`, :func:`within`, :func:`left_open`, :func:`right_open`);
* what builders receive: :class:`StrategyArgs` (``.common()``: the strategy's policy, aggregator, recorder, ...),
  :class:`ClientArgs` (``.data()``: the node's data for the run's task), :class:`Sharing`;
* looking up: :func:`get_method`, :func:`methods`, :func:`get_task`, :func:`tasks`, :func:`task_of_dataset`;
* the tasks' toolkits, for a method on a built-in task: :mod:`flowergraph.methods.node` (``model_kwargs``,
  ``train_config``, ``graph_spec``, ``partition_spec``, ``node_data``) and :mod:`flowergraph.methods.graph`
  (``task_spec``, ``train_config``, ``model_kwargs``, ``graph_data``).

See :mod:`flowergraph.methods.registry` for what a registration holds and how packages add tasks and methods.
"""

from ..settings.options import Option, Options, at_least, left_open, namespace, option, options_of, right_open, within
from .registry import (
    ENTRY_POINT_GROUP,
    PLUGINS_ENV,
    TASKS,
    ClientArgs,
    Method,
    Sharing,
    StrategyArgs,
    Task,
    get_method,
    get_task,
    methods,
    register,
    register_task,
    task_of_dataset,
    tasks,
    unregister,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGINS_ENV",
    "TASKS",
    "ClientArgs",
    "Method",
    "Option",
    "Options",
    "Sharing",
    "StrategyArgs",
    "Task",
    "at_least",
    "get_method",
    "get_task",
    "left_open",
    "methods",
    "namespace",
    "option",
    "options_of",
    "register",
    "register_task",
    "right_open",
    "task_of_dataset",
    "tasks",
    "unregister",
    "within",
]
