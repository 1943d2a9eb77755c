"""Flower-free core of FedStar (Tan et al., AAAI 2023): federated graph classification across datasets/domains.

* :mod:`.data` -- settings (CHEM, BIO-CHEM, BIO-CHEM-SN, BIO-SN-CV), :class:`GraphTaskSpec`, per-client
  stratified train/val/test graphs with features and structure embeddings.
* :mod:`.structure` -- DSE and RWSE structure embeddings, with an on-disk cache.
* :mod:`.models` -- FedStar's decoupled GNN and the GIN baseline, and their parts as arrays.
* :mod:`.training` -- mini-batch training (FedProx optional), evaluation, persistable optimiser, Local baseline.

The package exports the TU datasets' loading too (:data:`GRAPH_DATASETS`, :func:`load_pyg_dataset`: one dataset
whole, as the clients' splits start from).

Nothing here imports ``flwr``.
"""

from ..datasets import GRAPH_DATASETS, load_pyg_dataset
from .data import (
    NODE_ATTRIBUTES,
    SETTINGS,
    ClientGraphData,
    GraphTaskSpec,
    available_offline,
    client_graph_data,
    parse_graph_datasets,
    stratified_split,
)
from .models import DecoupledGIN, GIN, build_graph_model, get_arrays, part_keys, set_arrays
from .structure import degree_se, parse_structure, random_walk_se, rwse_cache_path, structure_dim, structure_embeddings
from .training import FEDPROX_MU, GraphTrainConfig, evaluate, make_optimizer, train_epochs, train_local

__all__ = [
    "GRAPH_DATASETS",
    "load_pyg_dataset",
    "NODE_ATTRIBUTES",
    "SETTINGS",
    "ClientGraphData",
    "GraphTaskSpec",
    "available_offline",
    "client_graph_data",
    "parse_graph_datasets",
    "stratified_split",
    "DecoupledGIN",
    "GIN",
    "build_graph_model",
    "get_arrays",
    "part_keys",
    "set_arrays",
    "degree_se",
    "parse_structure",
    "random_walk_se",
    "rwse_cache_path",
    "structure_dim",
    "structure_embeddings",
    "FEDPROX_MU",
    "GraphTrainConfig",
    "evaluate",
    "make_optimizer",
    "train_epochs",
    "train_local",
]
