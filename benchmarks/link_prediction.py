"""Link prediction with links split across silos (issue 92): centralized, local only, FedAvg, FedProx, FedPer and
FedGCN 0/1/2-hop on Cora, CiteSeer and the synthetic graph, AUC and Hits@50 on each client's own test edges and on
the cross-client test set; writes docs/results/link_prediction.md.

The federated rows run in this process on the Flower-free core (flowergraph.tasks.link), as the launcher's
clients compute them (``task=link``: the same data, model, local epochs, negatives and seeds; the server's
sample-weighted mean of the shared arrays), without Flower's messaging: the numbers do not depend on it
(tests/test_link_task.py checks the launcher's client against the core). A fraction of the cross-client edges
(``--cross-known-fraction``, ``link.cross-known-fraction``) is known to both owners and is not a test edge; the rest
is the cross-client test set, the same for every method. FedGCN's rows run its exchange in this process
(:func:`flowergraph.methods.fedgcn.links.exchange`, what the launcher's clients receive in messages:
tests/test_link_fedgcn.py) over G = every client's training edges plus the known cross edges, and its 2-layer GCN
encoder on the result; 0-hop is FedAvg. The other methods cannot use the known cross edges (the far endpoint's
features are at another silo).

    .venv/bin/python benchmarks/link_prediction.py --seeds 0 1 2 --rounds 50 --local-steps 2
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import data_dir, mean_std, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

METHODS = ("centralized", "local", "fedavg", "fedprox", "fedper", "fedgcn-0", "fedgcn-1", "fedgcn-2")
DATASETS = ("Cora", "CiteSeer", "synthetic")
K = 50


def _pooled(rows: list[dict], key: str, count: str) -> float:
    pairs = [(r[key], r[count]) for r in rows if r[count] > 0 and not math.isnan(r[key])]
    return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else math.nan


def federated(
    method: str, clients, cross, *, seed: int, rounds: int, local_steps: int, mu: float, encoders=None
) -> dict:
    """One federated run in-process: every client every round, sample-weighted averaging of the shared arrays;
    own metrics (each client's model on its own test pairs, pooled as the launcher's round record: weighted by test
    pairs) and, with one global model, the cross-client test set. ``encoders``: each client's
    :data:`~flowergraph.tasks.link.training.Encode` by client id (FedGCN's), else its message-passing graph."""
    from flowergraph.clients.node import round_seed
    from flowergraph.tasks.link import LinkPredictor, embed, evaluate_cross, evaluate_link, train_link
    from flowergraph.tasks import TrainConfig

    cfg = TrainConfig(local_steps=local_steps, optimizer="adam", lr=0.01, weight_decay=0.0)
    models = [LinkPredictor(c.num_features, "gcn", seed=seed) for c in clients]
    keys = list(models[0].state_dict())
    personal = {"local": keys, "fedper": [k for k in keys if k.startswith("encoder.convs.1.")]}.get(method, [])
    shared = [k for k in keys if k not in personal]
    glob = {k: v.clone() for k, v in models[0].state_dict().items() if k in shared}
    for r in range(1, rounds + 1):
        updates, weights = [], []
        for c, m in zip(clients, models):
            if method != "local":
                m.load_state_dict({**m.state_dict(), **glob})
            torch.manual_seed(round_seed(seed, r, c.client_id))
            enc = (encoders or {}).get(c.client_id)
            train_link(m, c, cfg, seed=seed, start_epoch=(r - 1) * local_steps, prox_mu=mu, encode=enc)
            if shared:
                updates.append({k: v.detach().clone() for k, v in m.state_dict().items() if k in shared})
                weights.append(float(c.train_pos.size(1)))
        if shared and method != "local":
            total = sum(weights)
            glob = {k: sum(u[k] * (w / total) for u, w in zip(updates, weights)) for k in shared}
    for m in models:
        if method != "local":
            m.load_state_dict({**m.state_dict(), **glob})
    enc = encoders or {}
    rows = [evaluate_link(m, c, k=K, encode=enc.get(c.client_id)) for c, m in zip(clients, models)]
    for row in rows:
        row["num_test"] = row["num_test_pos"] + row["num_test_neg"]
    out = {"auc": _pooled(rows, "test_auc", "num_test"), "hits": _pooled(rows, f"test_hits@{K}", "num_test")}
    if not personal:  # one global model: every owner's embeddings live in one space
        z = {c.client_id: embed(m, c, enc.get(c.client_id)) for c, m in zip(clients, models)}
        r = evaluate_cross(cross, z, k=K)
        out.update(cross_auc=r["cross_auc"], cross_hits=r[f"cross_hits@{K}"])
    return out


def cell(dataset: str, method: str, seed: int, a) -> dict:
    from flowergraph.data import GraphSpec, PartitionSpec
    from flowergraph.tasks.link import LinkSpec, client_link_data, cross_test_set, train_centralized

    g = GraphSpec(dataset=dataset, data_dir=a.data_dir, seed=seed)
    lspec = LinkSpec(seed=seed, cross_known_fraction=a.cross_known_fraction)
    started = time.perf_counter()
    if method == "centralized":
        r = train_centralized(g, lspec, epochs=a.rounds * a.local_steps, k=K, seed=seed)
        out = {"auc": r["test_auc"], "hits": r[f"test_hits@{K}"]}
    else:
        p = PartitionSpec(partitioner=a.partitioner, num_clients=a.clients, seed=seed)
        clients = [client_link_data(g, p, lspec, k) for k in range(a.clients)]
        cross = cross_test_set(g, p, lspec)
        kind, _, hops = method.partition("-")
        encoders = None
        if kind == "fedgcn" and int(hops) > 0:
            from flowergraph.methods.fedgcn.links import exchange, fedgcn_encode

            encoders = {k: fedgcn_encode(ext) for k, ext in exchange(clients, int(hops)).items()}
        base = "fedavg" if kind == "fedgcn" else kind
        mu = a.mu if base == "fedprox" else 0.0
        out = federated(
            base, clients, cross, seed=seed, rounds=a.rounds, local_steps=a.local_steps, mu=mu, encoders=encoders
        )
    out["seconds"] = time.perf_counter() - started
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument(
        "--methods", nargs="+", default=[m for m in METHODS if m != "fedgcn-0"], choices=METHODS
    )  # fedgcn-0 is FedAvg by construction (equal numbers, checked on Cora seed 0): run it by naming it
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--partitioner", default="louvain")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--local-steps", type=int, default=2)
    parser.add_argument("--mu", type=float, default=0.01)
    parser.add_argument("--cross-known-fraction", type=float, default=0.5)
    a = parser.parse_args(argv)
    a.data_dir = data_dir()
    from flowergraph.tasks import configure_torch

    configure_torch()
    started = time.perf_counter()
    results: dict[tuple[str, str], list[dict]] = {}
    for dataset in a.datasets:
        for method in a.methods:
            for seed in a.seeds:
                r = cell(dataset, method, seed, a)
                results.setdefault((dataset, method), []).append(r)
                print(f"{dataset} {method} seed {seed}: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items()), flush=True)
    wall = time.perf_counter() - started
    rows = []
    for (dataset, method), runs in results.items():

        def col(key: str, runs=runs) -> str:
            return mean_std([r.get(key) for r in runs if r.get(key) is not None and not math.isnan(r[key])], 3)

        seconds = f"{np.mean([r['seconds'] for r in runs]):.1f}"
        rows.append([dataset, method, *(col(k) for k in ("auc", "hits", "cross_auc", "cross_hits")), seconds])
    setting = {"partitioner": a.partitioner, "local_steps": a.local_steps, "known": f"{a.cross_known_fraction:g}"}
    setting.update(clients=a.clients, rounds=a.rounds, seeds=a.seeds, epochs=a.rounds * a.local_steps)
    body = (
        render("link_prediction/setting", **setting, minutes=f"{wall / 60:.1f}")
        + "\n\n"
        + table(["dataset", "method", "own AUC", "own Hits@50", "cross AUC", "cross Hits@50", "s per run"], rows)
        + "\n\n"
        + render("link_prediction/notes")
    )
    write_result("link_prediction", "Link prediction with links split across silos (issue 92)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
