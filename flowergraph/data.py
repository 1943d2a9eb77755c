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
* :func:`node_graph`: what flowergraph's ClientApp uses: the node's own file when it has one, else the cut;
  :func:`graph_spec` / :func:`partition_spec`: the specs a run's settings name (the node task's keys ``node.*``).
* Graph classification: :class:`GraphTaskSpec` (which TU datasets, how many clients, the split and the structure
  encodings), :func:`client_graph_data` (client ``k``'s graphs: PyG ``Data`` lists for train/val/test with
  FedStar's structure encodings as each graph's ``s``, memoised per process) and :class:`ClientGraphData`;
  :func:`parse_graph_datasets` reads a dataset list (``"MUTAG,PTC_MR,BZR"``, or a group such as ``chem``).

Checking a data folder before a run (which datasets it holds, which presets and settings can run from it)::

    python -m flowergraph.data check DIR [--preset conf/fedstar-chem.toml] [--dataset Cora]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .settings import RunSettings
from .tasks.federated_graph import (
    ClientGraph,
    GraphSpec,
    PartitionSpec,
    build_client_graph,
    client_graph,
    load_global_graph,
    node_assignment,
)
from .tasks.partition_files import MANIFEST, export_partitions, load_partition_file, partition_file_name, read_manifest
from .tasks.graphcls.data import ClientGraphData, GraphTaskSpec, client_graph_data, parse_graph_datasets
from .tasks.synthetic import CSBMParams

__all__ = [
    "CSBMParams",
    "ClientGraph",
    "ClientGraphData",
    "GraphSpec",
    "GraphTaskSpec",
    "MANIFEST",
    "PartitionSpec",
    "build_client_graph",
    "client_graph",
    "client_graph_data",
    "export_partitions",
    "graph_spec",
    "load_global_graph",
    "load_partition_file",
    "node_assignment",
    "node_graph",
    "parse_graph_datasets",
    "partition_file_name",
    "partition_spec",
    "read_manifest",
    "synthetic_params",
]


def synthetic_params(k: Any) -> CSBMParams:
    """The built-in graph's parameters from a task's ``synthetic-*`` keys (``k``: the task's keys without their
    prefix, ``s.of("node")`` or ``s.of("link")``)."""
    return CSBMParams(
        num_nodes=k.synthetic_nodes,
        num_classes=k.synthetic_classes,
        p_in=k.synthetic_p_in,
        p_out=k.synthetic_p_out,
        num_features=k.synthetic_features,
        signal=k.synthetic_signal,
    )


def graph_spec(s: RunSettings) -> GraphSpec:
    """The global graph and split a node-classification run's settings name (``dataset``, ``data-dir``, ``seed``,
    ``node.split``, ``node.synthetic-*``)."""
    k = s.of("node")
    return GraphSpec(dataset=s.dataset, data_dir=s.data_dir, split=k.split, seed=s.seed, synthetic=synthetic_params(k))


def partition_spec(s: RunSettings) -> PartitionSpec:
    """The partition a node-classification run's settings name (one client holding everything for a method with
    ``whole_graph``, e.g. ``centralized``)."""
    if s.method_info.whole_graph:
        return PartitionSpec(partitioner="none", num_clients=1, seed=s.seed)
    k = s.of("node")
    return PartitionSpec(
        partitioner=k.partitioner, num_clients=s.num_clients, beta=k.beta, min_size=k.min_partition_size, seed=s.seed
    )


def node_graph(
    settings: RunSettings, partition_id: int, partition_file: str | os.PathLike | None = None
) -> ClientGraph:
    """Client ``partition_id``'s graph for a run: from ``partition_file`` (a node's own file), else from the
    run's ``partition-dir``, else cut out of the global graph. Files are checked against the run's dataset and
    number of clients and the node's partition id."""
    s = settings
    if s.method_info.whole_graph:
        return client_graph(graph_spec(s), partition_spec(s), 0)  # one client holds the whole graph
    if not partition_file and s.partition_dir:
        partition_file = Path(s.partition_dir).expanduser() / partition_file_name(partition_id)
    if partition_file:
        return load_partition_file(partition_file, dataset=s.dataset, num_clients=s.num_clients, client_id=partition_id)
    return client_graph(graph_spec(s), partition_spec(s), partition_id)


# ------------------------------------------------------------------------------------------------ data check
def preset_dirs() -> list[Path]:
    """Where presets are looked for: ``./conf`` and the checkout's ``conf/`` (if flowergraph runs from one)."""
    dirs = [Path.cwd() / "conf", Path(__file__).resolve().parents[1] / "conf"]
    return [d for d in dict.fromkeys(p.resolve() for p in dirs) if d.is_dir()]


def datasets_needed(value: str) -> tuple[str, ...]:
    """The raw datasets a run-config ``dataset`` value needs (a setting such as CHEM: all of its datasets; the
    built-in synthetic graph: none)."""
    from .settings.datasets import normalize_dataset
    from .tasks.datasets import NODE_DATASETS, SYNTHETIC
    from .tasks.graphcls.data import parse_graph_datasets

    value = normalize_dataset(value)
    if value == SYNTHETIC:
        return ()
    if value in NODE_DATASETS:
        return (value,)
    return parse_graph_datasets(value)


def check_data_dir(
    data_dir: str | os.PathLike, presets: list[str] | None = None, datasets: list[str] | None = None, out=None
) -> int:
    """Print which datasets ``data_dir`` holds and which presets (``conf/*.toml``) and FedStar settings can run
    from it; returns 0 when everything asked for (``presets``, ``datasets``; nothing asked: every preset in
    ``conf/``) is there, else 1."""
    from .settings import load_preset
    from .tasks.datasets import PLANETOID, TU_DATASETS, data_dir_report
    from .tasks.graphcls.data import SETTINGS

    out = out or sys.stdout
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {str(data_dir)!r} does not exist")
    asked = [d for name in (datasets or []) for d in datasets_needed(name)]
    rows = {r.name: r for r in data_dir_report(root, tuple(dict.fromkeys((*PLANETOID, *TU_DATASETS, *asked))))}
    print(
        f"data folder {root.resolve()} (PyG layout: <dir>/Planetoid/<name>/raw, <dir>/TUDataset/<name>/raw)", file=out
    )
    width = max(len(n) for n in rows)
    for row in rows.values():
        state = "ok     " if row.present else "MISSING"
        print(f"  {row.name:<{width}}  {row.family:<9}  {state}  {row.where}", file=out)
    missing_any = False

    def report(label: str, needs: tuple[str, ...], counts: bool) -> None:
        nonlocal missing_any
        lacking = [d for d in needs if not rows[d].present]
        missing_any |= counts and bool(lacking)
        what = "no raw data (built-in synthetic graph)" if not needs else ", ".join(needs)
        state = f"MISSING {', '.join(lacking)}" if lacking else "ok"
        print(f"  {label}: {state}  (needs {what})", file=out)

    if presets is None or presets:
        files = [Path(p) for p in presets] if presets else sorted(f for d in preset_dirs() for f in d.glob("*.toml"))
        print("presets:", file=out)
        for path in files:
            values = load_preset(path)
            if "dataset" not in values:  # an add-on preset (e.g. fedgcn-cora-he.toml) keeps the other's dataset
                print(f"  {path.name}: no dataset of its own (combine it with another preset)", file=out)
                continue
            report(path.name, datasets_needed(str(values["dataset"])), True)
    if datasets:
        print("asked for:", file=out)
        for name in datasets:
            report(name, datasets_needed(name), True)
    if not datasets and not presets:
        print("FedStar settings (dataset=<setting>):", file=out)
        for name, members in SETTINGS.items():
            report(name, members, False)
    if missing_any or not all(r.present for r in rows.values()):
        print(
            "Missing raw files: online, PyG downloads them into the cache on first use (leave data-dir empty); "
            "offline, put them at the paths shown above.",
            file=out,
        )
    return 1 if missing_any else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .errors import FlowergraphError

    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.data",
        description="Check a data folder: which datasets' raw files it holds, and which "
        "presets and FedStar settings can run from it offline.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser(
        "check",
        help="list what a data folder holds and what is missing per preset/dataset",
        description="List the datasets a data folder holds (PyG layout) and, for every preset in "
        "conf/ (or those given), whether its datasets are there. Exit status 1 when "
        "something asked for is missing.",
    )
    check.add_argument("dir", nargs="?", default=None, help="the data folder (default: $FLOWERGRAPH_DATA)")
    check.add_argument(
        "--preset",
        action="append",
        default=None,
        metavar="TOML",
        help="check only this preset file (repeatable; default: every conf/*.toml)",
    )
    check.add_argument(
        "--dataset",
        action="append",
        default=None,
        metavar="NAME",
        help="check this dataset value too (repeatable): a dataset, a FedStar setting such as CHEM, "
        "or a comma-separated list",
    )
    args = parser.parse_args(argv)
    folder = args.dir or os.environ.get("FLOWERGRAPH_DATA")
    if not folder:
        parser.error("give the data folder (or set FLOWERGRAPH_DATA)")

    try:  # a read-only check: it starts no process, so it needs no launcher's signal handling
        presets = args.preset if args.preset is not None else ([] if args.dataset else None)
        return check_data_dir(folder, presets, args.dataset)
    except (FileNotFoundError, FlowergraphError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
