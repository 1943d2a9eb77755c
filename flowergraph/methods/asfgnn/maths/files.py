"""The data owners' own files for ASFGNN's splits (Flower-free): each client's induced subgraph
(:func:`~.data.client_data`) in flowergraph's partition-file format (:mod:`flowergraph.tasks.partition_files`), so
a SuperNode reads only its own file (node config ``partition-file``) and never the global dataset.

The files are ordinary partition files (``python -m flowergraph.partition show`` reads them) with an empty set
of cross-client edges (an ASFGNN client holds the induced subgraph of its nodes only; the paper's clients know
nothing of each other's graphs) and the split in the header's ``partition``: ``{"partitioner": "asfgnn",
"setting", "alpha", "split_seed", "degree_threshold", "split", "sizes"}``; a node refuses a file exported for another
split. Written by :func:`export_asfgnn_partitions` (``python -m flowergraph.partition export --set
method=asfgnn --set asfgnn.setting=... --num-clients 2 --dataset Cora --out DIR``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .data import ClientData, _canonical_dataset, client_data, client_members, load_graph

PARTITIONER = "asfgnn"


@dataclass(frozen=True)
class SplitSpec:
    """Which ASFGNN split: every argument of :func:`~.data.client_data` but the client."""

    dataset: str
    setting: str = "label"
    alpha: float = 1.0
    split_seed: int = 0
    num_clients: int = 2
    data_dir: str = ""
    split: str = "public"
    degree_threshold: int = 3
    sizes: str = "disjoint"

    def partition(self) -> dict[str, Any]:
        """The ``partition`` header of its files (a file exported before ``sizes`` existed lacks it and is
        refused: export it again)."""
        return {
            "partitioner": PARTITIONER,
            "setting": self.setting,
            "alpha": float(self.alpha),
            "split_seed": int(self.split_seed),
            "degree_threshold": int(self.degree_threshold),
            "split": self.split,
            "sizes": self.sizes,
        }

    def client(self, client: int) -> ClientData:
        return client_data(
            self.dataset,
            self.setting,
            self.alpha,
            self.split_seed,
            client,
            num_clients=self.num_clients,
            data_dir=self.data_dir or None,
            split=self.split,
            degree_threshold=self.degree_threshold,
            sizes=self.sizes,
        )


def _as_client_graph(data: ClientData, num_global_nodes: int):
    from ....tasks.federated_graph import ClientGraph

    empty = torch.zeros((2, 0), dtype=torch.long)
    return ClientGraph(
        client_id=data.client,
        num_clients=data.num_clients,
        global_ids=data.global_ids,
        x=data.x,
        y=data.y,
        train_mask=data.train_mask,
        val_mask=data.val_mask,
        test_mask=data.test_mask,
        edge_index=data.edge_index,
        cross_edges=empty,
        cross_owner=torch.zeros(0, dtype=torch.long),
        num_global_nodes=num_global_nodes,
        num_classes=data.num_classes,
    )


def export_asfgnn_partitions(spec: SplitSpec, out_dir: str | os.PathLike, *, force: bool = False, log=print) -> Path:
    """Write ``client-K.npz`` for every client of ``spec`` and the manifest; returns the manifest's path."""
    from ....tasks.partition_files import check_export_folder, write_partitions

    out = Path(out_dir).expanduser()
    check_export_folder(out, force)
    name = _canonical_dataset(spec.dataset)
    client_members(
        name,
        spec.setting,
        float(spec.alpha),
        int(spec.split_seed),
        int(spec.num_clients),
        spec.data_dir or None,
        spec.split,
        int(spec.degree_threshold),
        spec.sizes,
    )  # ConfigError for bad input
    graph = load_graph(name, spec.data_dir or None, spec.split, spec.split_seed)
    header = {
        "dataset": name,
        "num_clients": int(spec.num_clients),
        "num_global_nodes": int(graph.num_nodes),
        "num_classes": int(graph.num_classes),
        "num_features": int(graph.num_features),
        "graph": {"split": spec.split, "seed": int(spec.split_seed), "synthetic": None},
        "partition": spec.partition(),
    }
    graphs = (_as_client_graph(spec.client(k), int(graph.num_nodes)) for k in range(int(spec.num_clients)))
    return write_partitions(graphs, header, out, log=log)


def load_asfgnn_partition(path: str | os.PathLike, spec: SplitSpec, client: int) -> ClientData:
    """Client ``client``'s data from its own file, checked against the run (dataset, clients, partition id and
    the split); memoised per process."""
    from ....tasks.partition_files import load_partition_file

    name = _canonical_dataset(spec.dataset)
    g = load_partition_file(
        path, dataset=name, num_clients=int(spec.num_clients), client_id=int(client), partition=spec.partition()
    )
    return ClientData(
        dataset=name,
        setting=spec.setting,
        client=int(client),
        num_clients=int(spec.num_clients),
        global_ids=g.global_ids,
        x=g.x,
        y=g.y,
        edge_index=g.edge_index,
        train_mask=g.train_mask,
        val_mask=g.val_mask,
        test_mask=g.test_mask,
        num_classes=g.num_classes,
    )
