"""FedGraph's Flower-free core (flowergraph.methods.fedgraph.maths): numbers for planning the Flower side.

Five measurements, all in this one process (1 torch thread), no Flower:

A. Local round time on one Cora client (the median-sized one) with 10 and 20 clients, for the paper's
   synthesis (xi ~ N(0.8, 0.1)) and METIS: full batch, FedGraph policies, GraphSAGE (25, 10), FastGCN (256); one
   round = 3 local iterations (Adam lr 0.01), same-round exchange rows given. Also the owner's cost of computing
   its rows for the round and their size.
B. One DDPG update (actor/critic 512-256, K = 64) and one PCA state observation, 10 and 20 clients, Cora's GCN.
C. Centralised sanity: the 3-layer GCN (2 convolutions, 16 hidden) on all of Cora with sampling, public split and a
   random 60/20/20 split, 3 seeds: test accuracy at the best validation accuracy.
D. In-process federated sanity (not the acceptance benchmark): Cora, 10 clients (METIS, a random partition, the
   synthesis), full-batch local rounds, eq. 8 averaging, same-round exchange, fedgraph vs allshare vs nonshare.
E. FastGCN's accuracy against its layer size (the estimator is unbiased; its variance at 256 is the cost).

    .venv/bin/python reproductions/fedgraph/core_check.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from flowergraph.tasks import TrainConfig, configure_torch, load_module_arrays, module_arrays  # noqa: E402
from flowergraph.data import ClientGraph, GraphSpec, build_client_graph, load_global_graph  # noqa: E402
from flowergraph.methods.fedgraph.maths import (
    ActionSpace,
    DDPGAgent,
    DDPGConfig,
    FullBatch,
    LayerWise,
    NodeWise,
    SamplingPolicy,
    aggregate,
    build_model,
    build_view,
    client_graphs,
    evaluate,
    exchange_degrees,
    exchange_in_process,
    export_plan,
    owner_rows,
    split_rows,
    train_round,
)

TRAIN = TrainConfig(local_steps=3, optimizer="adam", lr=0.01, weight_decay=5e-4)
SCHEMES = [
    ("full batch", FullBatch()),
    ("FedGraph kappa=256 p=(1, 1)", SamplingPolicy(256, (1.0, 1.0))),
    ("FedGraph kappa=256 p=(0.5, 0.5)", SamplingPolicy(256, (0.5, 0.5))),
    ("FedGraph kappa=256 p=(0.2, 0.2)", SamplingPolicy(256, (0.2, 0.2))),
    ("FedGraph kappa=64 p=(0.5, 0.5)", SamplingPolicy(64, (0.5, 0.5))),
    ("GraphSAGE 256, (25, 10)", NodeWise(256, (25, 10))),
    ("FastGCN 256, layer 256", LayerWise(256, 256)),
]


NOTES = """## Reading

* **Round time** on a Cora client is dominated by fixed per-iteration costs once the sample is small: on METIS
  clients (130-280 nodes) every scheme takes about the same time, and sampling's own cost (a few ms per iteration)
  can exceed what it saves. Sampling pays off on the synthesis' large clients (1,000-2,700 nodes, 80% of Cora
  each), where full batch touches ~6,500 nodes per iteration against ~700-2,100 for the policies. Timings were
  taken on a shared 2-core machine: compare medians within a table, not across tables.
* **Owner side**: one round's rows (7 floats per boundary node for the 2-convolution GCN) cost a few ms to a few
  tens of ms and tens of kB per client.
* **Centralised**: the 2-convolution GCN with FedGraph sampling reaches ~80% on Cora's public split and ~89% on a
  random 60/20/20 split, like full batch and GraphSAGE. FastGCN with layer size 256 is far worse on the random
  split; section E shows it recovers with larger layers, i.e. this is its variance, not a bias.
* **Federated**: cross-client sharing only matters where many edges cross clients. With METIS (few cut edges) and
  the 80%-overlap synthesis (each client already holds most neighbours), nonShare is within noise of FedGraph;
  with a random partition (most edges cross) FedGraph is >10 points above nonShare and close to allShare. The
  public split (14 labels per client) stays near 56-59% for every variant: that is the averaging with few labels
  and Adam restarted every round, not the convolution (allShare is the centralised forward).
"""


def _views(graphs):
    degrees = exchange_degrees(graphs)
    return [build_view(g, degrees[g.client_id]) for g in graphs]


def round_times(gspec: GraphSpec, data_scheme: str, k: int, rounds: int) -> tuple[list[list], dict]:
    graphs = client_graphs(gspec, data_scheme, k, seed=0, var=0.1)
    t0 = time.perf_counter()
    views = _views(graphs)
    view_s = (time.perf_counter() - t0) / k
    data = load_global_graph(gspec)
    model = build_model(data.num_features, data.num_classes, seed=0)
    order = sorted(range(k), key=lambda i: graphs[i].num_nodes)
    c = order[k // 2]
    view = views[c]
    tables = exchange_in_process([model] * k, views, "fedgraph")
    t0 = time.perf_counter()
    for _ in range(5):
        rows = owner_rows(model, view, "fedgraph", 1)
        parts = split_rows(rows, export_plan(view.graph))
    owner_ms = (time.perf_counter() - t0) / 5 * 1e3
    info = {
        "client": c,
        "nodes": view.num_own,
        "train": view.graph.num_train,
        "remote": view.num_remote,
        "boundary": len(rows),
        "owner_ms": owner_ms,
        "sent_kb": sum(p.nbytes for p in parts.values()) / 1e3,
        "view_ms": view_s * 1e3,
        "sizes": [g.num_nodes for g in graphs],
    }
    # Schemes interleaved round by round (the machine is shared: load spikes hit every scheme alike).
    models = {name: build_model(data.num_features, data.num_classes, seed=0) for name, _ in SCHEMES}
    gens = {name: torch.Generator().manual_seed(0) for name, _ in SCHEMES}
    results: dict[str, list] = {name: [] for name, _ in SCHEMES}
    for rep in range(rounds + 1):
        for name, scheme in SCHEMES:
            res = train_round(models[name], view, scheme, "fedgraph", tables[c], TRAIN, gens[name])
            if rep:  # the first round warms up
                results[name].append(res)
    out = []
    for name, _ in SCHEMES:
        rs = results[name]
        times = [r.seconds * 1e3 for r in rs]
        out.append(
            [
                name,
                rs[0].num_samples,
                f"{statistics.median(times):.1f}",
                f"{min(times):.1f}",
                f"{statistics.median([r.sample_seconds * 1e3 for r in rs]):.1f}",
                f"{statistics.mean([r.nodes_per_iteration for r in rs]):.0f}",
                f"{statistics.mean([r.edges_per_iteration for r in rs]):.0f}",
            ]
        )
    return out, info


def ddpg_times(num_params_model, k: int, reps: int) -> list:
    space = ActionSpace(num_clients=k, num_convs=2)
    agent = DDPGAgent(space, DDPGConfig(), seed=0)
    rng = np.random.default_rng(0)
    base = {n: a for n, a in num_params_model.items()}
    clients = [{n: a + 0.01 * rng.standard_normal(a.shape).astype(a.dtype) for n, a in base.items()} for _ in range(k)]
    t0 = time.perf_counter()
    state = agent.observe(base, clients)
    fit_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    for _ in range(reps):
        state = agent.observe(base, clients)
    observe_ms = (time.perf_counter() - t0) / reps * 1e3
    agent.start_episode(state)
    for _ in range(80):  # fill the buffer past one mini-batch
        agent.buffer.add(state, rng.uniform(-1, 1, space.dim), float(rng.normal()), state, False)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        agent.update()
        times.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    arrays, _ = agent.export_state()
    export_ms = (time.perf_counter() - t0) * 1e3
    mb = sum(a.nbytes for a in arrays.values()) / 1e6
    return [
        k,
        agent.state_dim,
        space.dim,
        f"{statistics.median(times):.1f}",
        f"{fit_ms:.0f}",
        f"{observe_ms:.1f}",
        f"{export_ms:.0f}",
        f"{mb:.1f}",
    ]


def whole_graph(data) -> ClientGraph:
    return build_client_graph(data, np.zeros(int(data.num_nodes), dtype=np.int64), 0, 1)


def centralised(gspec: GraphSpec, scheme, seed: int, iterations: int) -> tuple[float, float]:
    data = load_global_graph(gspec)
    view = build_view(whole_graph(data))
    torch.manual_seed(seed)
    model = build_model(data.num_features, data.num_classes, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(seed)
    best_val, test_at_best = -1.0, 0.0
    one = TrainConfig(local_steps=1, optimizer="adam", lr=0.01, weight_decay=5e-4)
    for it in range(1, iterations + 1):
        train_round(model, view, scheme, "nonshare", None, one, gen, optimizer=opt)
        if it % 5 == 0:
            ev = evaluate(model, view, "nonshare")
            if ev["val_accuracy"] > best_val:
                best_val, test_at_best = ev["val_accuracy"], ev["test_accuracy"]
    return test_at_best, evaluate(model, view, "nonshare")["test_accuracy"]


def federated(gspec: GraphSpec, data_scheme: str, k: int, sharing: str, rounds: int, seed: int = 0) -> list:
    data = load_global_graph(gspec)
    graphs = client_graphs(gspec, data_scheme, k, seed=seed, var=0.1)
    views = _views(graphs)
    cross = sum(g.cross_edges.size(1) for g in graphs)
    cross_fraction = cross / (cross + sum(g.edge_index.size(1) for g in graphs))
    torch.manual_seed(seed)
    glob = build_model(data.num_features, data.num_classes, seed=seed)
    local = build_model(data.num_features, data.num_classes, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    curve = []
    t0 = time.perf_counter()
    for r in range(1, rounds + 1):
        tables = exchange_in_process([glob] * k, views, sharing)  # every owner holds W_bar at the round's start
        updates = []
        for view, received in zip(views, tables):
            load_module_arrays(local, module_arrays(glob))
            res = train_round(local, view, FullBatch(), sharing, received, TRAIN, gen)
            updates.append((module_arrays(local), res.num_samples))
        load_module_arrays(glob, aggregate(updates))
        if r % 10 == 0 or r == rounds:
            tables = exchange_in_process([glob] * k, views, sharing)
            correct = total = 0
            for view, received in zip(views, tables):
                ev = evaluate(glob, view, sharing, received, {"test": view.graph.test_mask})
                if ev["num_test"]:
                    correct += ev["test_accuracy"] * ev["num_test"]
                    total += ev["num_test"]
            curve.append(correct / total)
    return [curve[-1], max(curve), time.perf_counter() - t0, cross_fraction]


def section_rounds(random_split, rounds: int) -> str:
    """A. One local round on a Cora client, per data scheme and number of clients."""
    parts = []
    head = [
        "scheme",
        "kappa used",
        "round ms (median)",
        "round ms (min)",
        "of which sampling ms (median)",
        "nodes / iteration",
        "edges / iteration",
    ]
    for data_scheme in ("synthesis", "metis"):
        for k in (10, 20):
            rows, info = round_times(random_split, data_scheme, k, rounds)
            sizes = info["sizes"]
            parts.append(
                f"**{data_scheme}, {k} clients** (client sizes {min(sizes)}..{max(sizes)} nodes; timed client "
                f"{info['client']}: {info['nodes']} nodes, {info['train']} training nodes, {info['remote']} remote "
                f"neighbours, {info['boundary']} boundary nodes). Owner side per round: computing and splitting its "
                f"rows {info['owner_ms']:.1f} ms, {info['sent_kb']:.1f} kB sent; one-time view build "
                f"{info['view_ms']:.1f} ms per client.\n\n" + table(head, rows)
            )
    return "\n\n".join(parts)


def section_centralised(public, random_split, seeds: list[int], iterations: int) -> str:
    """C. The 2-convolution GCN on all of Cora with each sampling scheme."""
    cen_rows = []
    for split_name, gspec in (("public (140 train)", public), ("random 60/20/20", random_split)):
        for name, scheme in [SCHEMES[0], SCHEMES[2], SCHEMES[3], SCHEMES[5], SCHEMES[6]]:
            res = [centralised(gspec, scheme, s, iterations) for s in seeds]
            best = [100 * a for a, _ in res]
            final = [100 * b for _, b in res]
            cen_rows.append(
                [
                    split_name,
                    name,
                    f"{statistics.mean(best):.1f} ({' / '.join(f'{b:.1f}' for b in best)})",
                    f"{statistics.mean(final):.1f}",
                ]
            )
    return table(["split", "scheme", "test acc % at best val (per seed)", "final test acc %"], cen_rows)


def section_federated(public, random_split, fed_rounds: int) -> str:
    """D. In-process federated runs of 10 clients per data scheme, split and sharing."""
    fed_rows = []
    for data_scheme, split_name, gspec in (
        ("metis", "public", public),
        ("metis", "random 60/20/20", random_split),
        ("random", "random 60/20/20", random_split),
        ("synthesis", "random 60/20/20", random_split),
    ):
        for sharing in ("fedgraph", "allshare", "nonshare"):
            final, best, secs, cross_fraction = federated(gspec, data_scheme, 10, sharing, fed_rounds)
            fed_rows.append(
                [
                    data_scheme,
                    f"{100 * cross_fraction:.0f}",
                    split_name,
                    sharing,
                    f"{100 * final:.1f}",
                    f"{100 * best:.1f}",
                    f"{secs:.0f}",
                ]
            )
    columns = ["data", "cross-client edges %", "split", "sharing", f"test acc % after {fed_rounds} rounds"]
    return table(columns + ["best (every 10 rounds)", "wall s"], fed_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args()
    configure_torch(1)
    rounds = 3 if args.quick else 15
    seeds = [0] if args.quick else [0, 1, 2]
    iterations = 50 if args.quick else 200
    fed_rounds = 20 if args.quick else 100
    ddir = data_dir()
    started = time.perf_counter()
    load = os.getloadavg()
    random_split = GraphSpec(dataset="Cora", data_dir=ddir, split="random:0.6/0.2/0.2")
    public = GraphSpec(dataset="Cora", data_dir=ddir)
    section_a = section_rounds(random_split, rounds)
    data = load_global_graph(public)
    weights = module_arrays(build_model(data.num_features, data.num_classes, seed=0))
    ddpg_rows = [ddpg_times(weights, k, 5 if args.quick else 20) for k in (10, 20)]
    columns = ["clients", "state dim", "action dim", "update ms (median)", "first observe (PCA fit) ms"]
    section_b = table(columns + ["observe ms", "export ms", "exported MB"], ddpg_rows)
    section_c = section_centralised(public, random_split, seeds, iterations)
    section_d = section_federated(public, random_split, fed_rounds)
    sizes = [256, 1024, 8192]
    fast = [centralised(random_split, LayerWise(256, t), 0, iterations)[0] for t in sizes]
    section_e = table(
        ["FastGCN layer size", "test acc % at best val (seed 0)"], [[t, f"{100 * a:.1f}"] for t, a in zip(sizes, fast)]
    )
    body = (
        f"1 torch thread; load average at start {load[0]:.1f} on {os.cpu_count()} cores (the machine is shared: "
        f"timings are indicative). Total run {time.perf_counter() - started:.0f} s.\n\n"
        "## A. One local round (3 iterations) on a Cora client\n\n"
        "Split random 60/20/20, the GCN at its initial weights, sharing `fedgraph` with same-round rows; "
        "round time excludes the exchange (owner side listed separately).\n\n"
        + section_a
        + "\n\n## B. DDPG agent\n\nActor/critic 512-256, mini-batch 64, PCA 20 per model, Cora's GCN "
        f"({sum(a.size for a in weights.values())} parameters per model).\n\n"
        + section_b
        + f"\n\n## C. Centralised sanity: 2-convolution GCN on all of Cora, {iterations} iterations, Adam lr "
        "0.01, weight decay 5e-4, evaluation every 5 iterations\n\n"
        + section_c
        + f"\n\n## D. In-process federated sanity: Cora, 10 clients, {fed_rounds} rounds, full batch, 3 local "
        "iterations, eq. 8 averaging, same-round exchange with the global model\n\n"
        "Test accuracy over all clients' test nodes (synthesis: every copy counts). Cross-client edges: the "
        "share of the clients' directed edges that cross clients.\n\n"
        + section_d
        + "\n\n## E. FastGCN's layer size (centralised, random 60/20/20, batch 256, "
        f"{iterations} iterations)\n\n" + section_e + "\n\n" + NOTES
    )
    write_result(
        "fedgraph_core_check", "FedGraph core: round times, DDPG update, centralised and federated sanity", body
    )


if __name__ == "__main__":
    main()
