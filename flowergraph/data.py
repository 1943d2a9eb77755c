"""Data for federated graph learning, for your own Flower apps and for flowergraph's (public API).

    from flowergraph.data import GraphSpec, PartitionSpec, client_graph, load_partition_file

* :class:`GraphSpec` / :class:`PartitionSpec`: which global graph, split and partition (hashable specs);
  :func:`client_graph` cuts client ``k``'s part out of the global graph (memoised per process; every client
  computes the same partition in its own process); :func:`load_global_graph` is the global graph itself.
* :class:`ClientGraph`: what a client holds (its nodes, features, labels, masks, internal edges and
  cross-client edges with the owners' ids, never remote features).
* Data owners with their own files: :func:`export_partitions` writes one file per client plus a manifest
  (``python -m flowergraph.partition export``); :func:`load_partition_file` reads one, checked against the
  dataset, the number of clients and the client id; :func:`read_manifest` checks an export folder.
* :func:`node_graph`: what flowergraph's ClientApp uses: the node's own file when it has one, else the cut.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tasks.federated_graph import (ClientGraph, GraphSpec, PartitionSpec, build_client_graph, client_graph,
                                    load_global_graph, node_assignment)
from .tasks.partition_files import (MANIFEST, export_partitions, load_partition_file, partition_file_name,
                                    read_manifest)
from .tasks.synthetic import CSBMParams

__all__ = ["CSBMParams", "ClientGraph", "GraphSpec", "MANIFEST", "PartitionSpec", "build_client_graph",
           "client_graph", "export_partitions", "load_global_graph", "load_partition_file", "node_assignment",
           "node_graph", "partition_file_name", "read_manifest"]


def node_graph(settings, partition_id: int, partition_file: str | os.PathLike | None = None) -> ClientGraph:
    """Client ``partition_id``'s graph for a run: from ``partition_file`` (a node's own file), else from the
    run's ``partition-dir``, else cut out of the global graph. Files are checked against the run's dataset and
    number of clients and the node's partition id."""
    s = settings
    if s.method_info.whole_graph:
        return client_graph(s.graph_spec(), s.partition_spec(), 0)  # one client holds the whole graph
    if not partition_file and s.partition_dir:
        partition_file = Path(s.partition_dir).expanduser() / partition_file_name(partition_id)
    if partition_file:
        return load_partition_file(partition_file, dataset=s.dataset, num_clients=s.num_clients,
                                   client_id=partition_id)
    return client_graph(s.graph_spec(), s.partition_spec(), partition_id)
