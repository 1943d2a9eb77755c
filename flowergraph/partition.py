"""``python -m flowergraph.partition``: give each data owner its own partition file.

    python -m flowergraph.partition export --dataset Cora --data-dir ../shared/datasets --num-clients 10 \\
        --set node.partitioner=louvain --out parts/cora-10
    python -m flowergraph.partition show parts/cora-10            # the manifest, one line per client
    python -m flowergraph.partition show parts/cora-10/client-3.npz

``export`` validates the settings as a run would (``--set KEY=VALUE`` takes the run-config keys of the dataset,
split, partitioner and synthetic graph), cuts the global graph and writes ``client-K.npz`` per client plus
``manifest.json`` (format: :mod:`flowergraph.tasks.partition_files`). A method that assigns nodes to clients its
own way exports its split (``--set method=asfgnn --set asfgnn.setting=label ...``: its registration's
``extra["export_partitions"]``). Hand client K its file; its SuperNode
then reads only that file (node config ``partition-file=...``), or a simulation reads the folder
(run config ``partition-dir=...``). Exit status 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import FlowergraphError


def _export(a) -> int:
    from .data import graph_spec, partition_spec
    from .settings import parse_run_config
    from .settings import parse_set
    from .tasks.partition_files import export_partitions

    raw = parse_set(a.set)
    raw.update({"num-clients": a.num_clients, "dataset": a.dataset})
    if a.data_dir:
        raw["data-dir"] = a.data_dir
    s = parse_run_config(raw)
    if s.method_info.task != "node":
        raise SystemExit("only node-level datasets are partitioned into files")
    exporter = s.method_info.extra.get("export_partitions")  # a method that assigns nodes its own way
    if exporter is not None:
        manifest = exporter(s, a.out, a.force)
    else:
        manifest = export_partitions(graph_spec(s), partition_spec(s), a.out, force=a.force)
    print(f"manifest: {manifest}")
    return 0


def _show(a) -> int:
    from .tasks.partition_files import MANIFEST, load_partition_file, read_manifest

    path = Path(a.path)
    if path.is_dir():
        m = read_manifest(path)
        print(
            f"{m['dataset']}: {m['num_global_nodes']} nodes, {m['num_clients']} clients, partition "
            f"{json.dumps(m['partition'])}, graph {json.dumps(m['graph'])}"
        )
        for f in m["files"]:
            print(
                f"  client {f['client_id']}: {f['file']} ({f['nodes']} nodes, {f['edges']} internal and "
                f"{f['cross_edges']} cross-client edges, sha256 {f['sha256'][:16]}...)"
            )
        return 0
    if path.name == MANIFEST:
        return _show(argparse.Namespace(path=str(path.parent)))
    g = load_partition_file(path)
    print(
        f"client {g.client_id} of {g.num_clients}: {g.num_nodes} nodes, {g.num_features} features, "
        f"{g.num_classes} classes, {int(g.edge_index.size(1))} internal and {int(g.cross_edges.size(1))} "
        f"cross-client edges; train/val/test {g.num_train}/{g.num_val}/{g.num_test}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m flowergraph.partition", description="Write one partition file per data owner, or show one."
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "export",
        help="cut the global graph and write client-K.npz per client + manifest.json",
        description="Cut a node-classification dataset into one partition file per data owner "
        "(client-K.npz: its nodes, features, labels, split masks, internal and "
        "cross-client edges) plus manifest.json. Give owner K its file and start its "
        "SuperNode with --node-config 'partition-file=\"client-K.npz\"'; it then never "
        "reads the global dataset.",
    )
    s.add_argument(
        "--dataset",
        default="synthetic",
        help="node-classification dataset: Cora, CiteSeer, PubMed or synthetic (default: %(default)s)",
    )
    s.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="raw files in PyG's layout (<DIR>/Planetoid/Cora/raw/...; default $FLOWERGRAPH_DATA, else "
        "PyG downloads them); `python -m flowergraph.data check DIR` lists what DIR holds",
    )
    s.add_argument(
        "--num-clients",
        type=int,
        required=True,
        metavar="K",
        help="number of data owners: one file per owner, client-0.npz .. client-(K-1).npz",
    )
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run-config keys of the split, partitioner and synthetic graph (repeatable), e.g. "
        "--set node.partitioner=louvain --set seed=1",
    )
    s.add_argument("--out", required=True, metavar="DIR", help="the folder to write (a new one, unless --force)")
    s.add_argument("--force", action="store_true", help="overwrite an earlier export in --out")
    s.set_defaults(fn=_export)
    s = sub.add_parser(
        "show",
        help="describe an export folder or one client's file",
        description="Describe an export folder (its manifest and every client's file) or one client's partition file.",
    )
    s.add_argument("path", help="an export folder (with manifest.json) or one client-K.npz")
    s.set_defaults(fn=_show)
    a = p.parse_args(argv)
    try:
        return a.fn(a)
    except FlowergraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
