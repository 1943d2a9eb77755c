"""Dataset names in the run configuration (Flower-free): canonical spelling and the task a dataset belongs to."""

from __future__ import annotations

from ..errors import ConfigError
from ..tasks.datasets import canonical_name, dataset_info


def normalize_dataset(value: str) -> str:
    """The canonical spelling of a dataset name, of a graph-level setting (``chem`` -> ``CHEM``) or of a
    comma-separated list of TU datasets (``mutag,bzr`` -> ``MUTAG,BZR``); ConfigError names the valid choices."""
    from ..tasks.graphcls.data import SETTINGS, parse_graph_datasets

    text = str(value).strip()
    setting = next((k for k in SETTINGS if k.lower() == text.lower()), None)
    if setting is not None:
        return setting
    if "," in text:
        return ",".join(parse_graph_datasets(text))
    try:
        return canonical_name(text)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; graph-level settings {', '.join(SETTINGS)} (or a comma-separated list of graph "
                          f"datasets)") from None


def dataset_task(value: str) -> tuple[str, str]:
    """(task, family) of a normalised dataset value: a setting or a list is graph-level TU data."""
    from ..tasks.graphcls.data import SETTINGS

    if "," in value or value in SETTINGS:
        return "graph", "TUDataset"
    info = dataset_info(value)
    return info.task, info.family
