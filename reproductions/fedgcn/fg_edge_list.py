"""The fedgraph library (0.2.5, unmodified) on a graph given as an edge list: run with the interpreter of its venv
(``../shared/anchors/fedgraph/setup.sh`` builds /tmp/fg_venv), never with flowergraph's. Its Planetoid path builds
a dense N x N adjacency (229 GB at ogbn-arxiv's size); this loader hands ``run_NC`` the tuple its own
``data_loader_NC`` returns, from the file instead: the edges (both directions, no self loops, as its ogbn-arxiv path
has them), features, labels, train and test nodes, and each trainer's nodes (``owner``: the partition flowergraph
uses, so both libraries train on the same clients), with the communication indexes from the library's own
``get_in_comm_indexes``. :func:`graph_keys` and :func:`export` (the file from flowergraph's graph) run with
flowergraph's interpreter; nothing at module level imports either library.

    /tmp/fg_venv/bin/python reproductions/fedgcn/fg_edge_list.py --graph G.npz [--rounds 30] [--lr 0.5] [--check]

The graph file (``numpy.savez``): ``edge_index`` [2, E] int64, ``x`` [N, d] float32, ``y`` [N] int64, ``train``
and ``test`` (node ids), ``owner`` [N]. Prints ``FG_RESULT {json}``: each round's test accuracy and the wall clock
(``time.time()``) at which the library printed it. ``--check`` prints each trainer's data (``FG_CHECK``), no run.
"""

import argparse
import json
import os
import shutil
import sys
import time

SCRIPT = os.path.abspath(__file__)
ANCHOR = os.path.join(os.path.dirname(SCRIPT), "..", "..", "..", "shared", "anchors", "fedgraph")


def graph_keys(nodes: int, edges: int, features: int, classes: int, homophily: float = 0.65, scale_to: int = 0):
    """flowergraph's run-config keys of the built-in graph at these sizes (expected degree 2 edges / nodes,
    ``homophily`` of it within a class: ogbn-arxiv's edge homophily); ``scale_to`` nodes instead, degree kept."""
    nodes, edges = (scale_to, round(edges * scale_to / nodes)) if scale_to else (nodes, edges)
    deg, per = 2 * edges / nodes, nodes / classes
    p = {"p-in": homophily * deg / (per - 1), "p-out": (1 - homophily) * deg / (nodes - per)}
    return {
        f"node.synthetic-{k}": v for k, v in {"nodes": nodes, "classes": classes, "features": features, **p}.items()
    }


def export(preset, keys: dict, path) -> dict:
    """Write the graph file from flowergraph's global graph, split and partition of the run that ``preset`` (a
    run-config file) and ``keys`` (run-config keys) name; run with flowergraph's interpreter. Its nodes and edges."""
    import numpy as np

    from flowergraph.data import graph_spec, load_global_graph, node_assignment, partition_spec
    from flowergraph.settings import load_preset, parse_run_config

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    s = parse_run_config({**load_preset(preset), **keys})
    g = load_global_graph(graph_spec(s))
    ids = {k: getattr(g, f"{k}_mask").nonzero().view(-1).numpy() for k in ("train", "test")}
    owner = node_assignment(graph_spec(s), partition_spec(s))
    np.savez(path, edge_index=g.edge_index.numpy(), x=g.x.numpy(), y=g.y.numpy(), owner=owner, **ids)
    return {"nodes": g.num_nodes, "edges": g.edge_index.size(1) // 2}


def result(log) -> tuple[list, list, float]:
    """From a run's output (read with any interpreter): each round's test accuracy, the wall clock at which it was
    printed, and the library's own count of the MB that travelled (its MiB figures, converted)."""
    lines = [x for x in open(log, errors="replace").read().splitlines() if x.startswith("FG_RESULT ")]
    if not lines:
        return [], [], 0.0
    r = json.loads(lines[-1][len("FG_RESULT ") :])
    mib = sum(r.get(f"lib_theor_{k}_comm_mb") or 0.0 for k in ("pretrain", "train"))
    return r["round_acc"], r["round_at"], mib * 2**20 / 1e6


def fedgraph_data(path: str, hops: int):
    import numpy as np
    import torch
    from fedgraph.utils_nc import get_in_comm_indexes

    g = np.load(path)
    edge_index, x, y = (torch.from_numpy(g[k]) for k in ("edge_index", "x", "y"))
    train, test = torch.from_numpy(g["train"]), torch.from_numpy(g["test"])
    owner = g["owner"]
    split = [torch.from_numpy(np.flatnonzero(owner == k)) for k in range(int(owner.max()) + 1)]
    comm, in_train, in_test, edges = get_in_comm_indexes(edge_index, split, len(split), hops, train, test)
    return (edge_index, x, y, train, test, int(y.max()) + 1, split, comm, in_train, in_test, edges)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--local-step", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--ray-tmp", default=f"/tmp/fg_ray_{os.getpid()}")
    ap.add_argument("--ray-cpus", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, ANCHOR)
    from fg_run_one import Tee, parse_fedgraph_stdout

    try:
        import torch_sparse  # noqa: F401  (a real build if the venv has one, else the anchor's pure-PyTorch shim)
    except ImportError:
        sys.path.insert(0, os.path.join(ANCHOR, "shim"))  # PYTHONPATH too: Ray's workers re-import fedgraph
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [sys.path[0], os.environ.get("PYTHONPATH")]))
    data = fedgraph_data(a.graph, a.hops)
    if a.check:
        edge_index, _, y, _, _, _, split, comm, in_train, in_test, edges = data
        for k in range(len(split)):
            part = {"nodes": split[k].tolist(), "edges": edges[k].t().tolist(), "comm": comm[k].tolist()}
            part["train_labels"] = y[comm[k]][in_train[k]].tolist()
            part["test_labels"] = y[comm[k]][in_test[k]].tolist()
            print("FG_CHECK " + json.dumps(part))
        return 0
    import attridict
    import ray
    from fedgraph.federated_methods import run_NC

    init = ray.init
    ray.init = lambda *args, **kw: init(  # a private local Ray, never one already running on the machine
        *args, address="local", num_cpus=a.ray_cpus, include_dashboard=False, _temp_dir=a.ray_tmp
    )
    stamps = []

    class Stamped(Tee):
        def write(self, s):
            stamps.extend(time.time() for _ in range(s.count("Global Test Accuracy")))
            return super().write(s)

    sys.stdout = tee = Stamped(sys.stdout)
    config = dict(fedgraph_task="NC", dataset="simulate", method="FedGCN", iid_beta=10000, distribution_type="average")
    config.update(global_rounds=a.rounds, local_step=a.local_step, learning_rate=a.lr, n_trainer=len(data[6]))
    config.update(
        batch_size=-1, num_layers=2, num_hops=a.hops, gpu=False, num_cpus_per_trainer=a.ray_cpus / len(data[6])
    )
    config.update(num_gpus_per_trainer=0, logdir="./runs", use_encryption=False, use_huggingface=False)
    config.update(saveto_huggingface=False, use_cluster=False)
    run_NC(attridict(config), data)  # "simulate": hidden 16 and its AggreGCN, as for Cora, CiteSeer, PubMed
    ray.shutdown()
    shutil.rmtree(a.ray_tmp, ignore_errors=True)
    sys.stdout = tee.stream
    res = parse_fedgraph_stdout(tee.buf.getvalue())
    print("FG_RESULT " + json.dumps({**res, "round_at": stamps[: len(res["round_acc"])]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
