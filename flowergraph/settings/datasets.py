"""Dataset names in the run configuration: the canonical spelling, and the task a dataset belongs to (each
registered task says which datasets are its own: :class:`flowergraph.methods.Task`)."""

from __future__ import annotations

from ..errors import ConfigError
from ..methods.registry import suggest, task_of_dataset, tasks


def normalize_dataset(value: str) -> str:
    """The canonical spelling of a dataset value (``cora`` -> ``Cora``, ``chem`` -> ``CHEM``, ``mutag,bzr`` ->
    ``MUTAG,BZR``), as the first task that accepts it spells it; ConfigError naming every task's datasets."""
    text = str(value).strip()
    specific: list[ConfigError] = []
    for task in tasks().values():
        try:
            candidate = task.normalize(text) if task.normalize is not None else text
        except ConfigError as exc:
            if not str(exc).startswith("unknown"):  # the value is this task's, but wrong (a dataset listed twice)
                specific.append(exc)
            continue
        if task.accepts(candidate):
            return candidate
    if specific:
        raise specific[0]
    valid = "; ".join(f"{t.description}: {t.datasets()}" for t in tasks().values())
    from ..tasks.datasets import GRAPH_DATASETS, NODE_DATASETS
    from ..tasks.graphcls.data import SETTINGS

    hint = suggest(text, (*NODE_DATASETS, *GRAPH_DATASETS, *SETTINGS))
    raise ConfigError(f"unknown dataset {text!r}; valid choices: {valid}{hint}")


def dataset_task(value: str) -> str:
    """The name of the task a normalised dataset value belongs to."""
    return task_of_dataset(value).name
