"""FL-AGCNS core costs on Cora (3-client METIS split, 20 training nodes per class / 500 / 1000), in one process with
one torch thread, to choose the search's defaults: one SuperNet step (20 sampled codes, one client), one evaluation
of a population, whole epochs of Algorithm 2 in process (:class:`InProcessSearch`, no Flower), and the fixed
baselines retrained the reference way (50 epochs of federated gradient steps).

    .venv/bin/python reproductions/flagcns/core_check.py [--epochs 3] [--seeds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from flowergraph.tasks import configure_torch  # noqa: E402
from flowergraph.data import GraphSpec, PartitionSpec, client_graph  # noqa: E402
from flowergraph.methods.flagcns.maths import (
    ACTIVATIONS,
    BASELINES,
    InProcessSearch,
    SearchSchedule,
    SearchSpace,
    SuperNet,
    SuperNetOptimizer,
    baseline_code,
    client_loss_and_gradients,
    combine_gradients,
    evaluate_codes,
    federated_train_architecture,
    new_rng,
    sample_members,
)


def megabytes(arrays) -> float:
    return sum(a.nbytes for a in arrays.values()) / 2**20


def step_costs(clients, layers: int, depth: str, repeats: int = 6) -> dict:
    """One SuperNet step on client 0 (20 of a 60-member population) and one population evaluation."""
    space = SearchSpace(num_layers=layers, min_layers=layers if depth == "full" else 0)
    net = SuperNet(space, clients[0].num_features, 7, seed=0)
    optimizer = SuperNetOptimizer(net)
    rng = new_rng(0)
    population = space.random_population(60, rng)
    client_loss_and_gradients(net, clients[0], population[:20])  # warm-up (lazy initialisation, caches)
    grad_s, adam_s, sizes = [], [], []
    for _ in range(repeats):
        codes = sample_members(population, 20, rng)
        start = time.perf_counter()
        _, grads = client_loss_and_gradients(net, clients[0], codes)
        grad_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        optimizer.step(combine_gradients([grads] * 3, [1, 1, 1]))
        adam_s.append(time.perf_counter() - start)
        sizes.append((megabytes(net.arrays(codes)), megabytes(grads)))
    start = time.perf_counter()
    evaluate_codes(net, clients[0], population)
    eval_shared = time.perf_counter() - start
    start = time.perf_counter()
    evaluate_codes(net, clients[0], population, share=False)
    eval_separate = time.perf_counter() - start
    return {
        "layers": layers,
        "depth": depth,
        "mean_layers": float(np.mean([len(space.layers(c)) for c in population])),
        "grad_s": statistics.median(grad_s),
        "adam_s": statistics.median(adam_s),
        "sub_mb": statistics.median(s[0] for s in sizes),
        "grad_mb": statistics.median(s[1] for s in sizes),
        "supernet_mb": megabytes(net.arrays()),
        "eval_s": eval_shared,
        "eval_separate_s": eval_separate,
    }


def epoch_costs(clients, layers: int, population: int, sample: int, epochs: int, depth: str) -> dict:
    """Whole epochs of Algorithm 2 in process: 1 warm-up epoch, then ``epochs`` FEO epochs."""
    schedule = SearchSchedule(population_size=population, sample_size=sample, epochs=1 + epochs, warmup_epochs=1)
    space = SearchSpace(num_layers=layers, min_layers=layers if depth == "full" else 0)
    search = InProcessSearch(space, clients, schedule, seed=0)
    history = search.run()
    warm = history[0]["train_seconds"]
    feo = history[1:]
    train = statistics.median(r["train_seconds"] for r in feo)
    evo = statistics.median(r["feo_seconds"] for r in feo)
    return {
        "layers": layers,
        "depth": depth,
        "population": population,
        "sample": sample,
        "warm_s": warm,
        "train_s": train,
        "feo_s": evo,
        "evaluations": statistics.median(r["evaluations"] for r in feo),
        "best_fll": feo[-1]["best_fll"],
        "best_acc": feo[-1]["best_val_accuracy"],
    }


def step_section(clients) -> str:
    """One SuperNet step and one population evaluation on client 0, per L and depth."""
    steps = [step_costs(clients, L, depth) for L in (6, 4, 3) for depth in ("uniform", "full")]
    step_rows = [
        [
            r["layers"],
            r["depth"],
            f"{r['mean_layers']:.2f}",
            f"{r['grad_s']:.3f}",
            f"{r['adam_s']:.3f}",
            f"{r['eval_s']:.3f}",
            f"{r['eval_separate_s']:.3f}",
            f"{r['sub_mb']:.2f}",
            f"{r['grad_mb']:.2f}",
            f"{r['supernet_mb']:.1f}",
        ]
        for r in steps
    ]
    return (
        "## One SuperNet step and one population evaluation (client 0)\n\n"
        "20 codes drawn from a 60-member random population; `depth` = how the population was drawn: `uniform` "
        "(every gene uniform, the default: half the codes have no graph layer) or `full` (all L layers used, the "
        "worst case). Client gradient = forward of the 20 codes with shared intermediates, one backward; Adam = "
        "the server's combination of 3 clients' gradients and one step; eval = validation loss/accuracy of all "
        "60 codes (shared intermediates, and one forward per code). Payloads: the 20 codes' sub-network weights "
        "(what a server sends a client), their gradients (what it sends back), the whole SuperNet.\n\n"
        + table(
            [
                "L",
                "depth",
                "layers/code",
                "client grad (s)",
                "Adam (s)",
                "eval 60 (s)",
                "eval 60 separate (s)",
                "sub-net (MB)",
                "grads (MB)",
                "SuperNet (MB)",
            ],
            step_rows,
        )
    )


def epoch_section(clients, args) -> str:
    """Whole epochs of Algorithm 2 in one process, per search setting."""
    epochs = [
        epoch_costs(clients, L, P, S, args.epochs, d)
        for L, P, S, d in (
            (6, 60, 20, "uniform"),
            (6, 60, 20, "full"),
            (3, 60, 20, "uniform"),
            (3, 60, 20, "full"),
            (6, 20, 10, "uniform"),
        )
    ]
    epoch_rows = []
    for r in epochs:
        feo_epoch = r["train_s"] + r["feo_s"]
        paper = 50 * r["warm_s"] + 200 * feo_epoch
        epoch_rows.append(
            [
                r["layers"],
                r["depth"],
                r["population"],
                r["sample"],
                f"{r['warm_s']:.2f}",
                f"{r['train_s']:.2f}",
                f"{r['feo_s']:.2f}",
                int(r["evaluations"]),
                f"{paper / 60:.0f}",
            ]
        )
    return (
        "## Whole epochs of Algorithm 2 in one process (3 clients, no Flower)\n\n"
        f"Median over {args.epochs} FEO epochs after one warm-up epoch; 5 SuperNet steps per epoch; random codes "
        "drawn with `uniform` or `full` depth as above (mutation draws genes the same way, so `full` stays full). "
        "An FEO epoch = SuperNet steps + FEO (controller pool evaluated on every client, each client's pool "
        "on itself, cached per network within the FEO). `paper budget` = 50 warm-up + 200 FEO epochs at these "
        "rates, in minutes, one process; a federated run adds message overhead and runs the 3 clients in "
        "parallel (2 cores here).\n\n"
        + table(
            [
                "L",
                "depth",
                "population",
                "sample",
                "warm-up epoch (s)",
                "FEO epoch: steps (s)",
                "FEO epoch: FEO (s)",
                "evaluations / FEO",
                "paper budget (min)",
            ],
            epoch_rows,
        )
    )


def baseline_section(clients, args) -> str:
    """The fixed baselines as codes, retrained the reference way, with both fusions."""
    base_rows = []
    for fusion in ("all", "leaves"):
        space = SearchSpace(num_layers=6, fusion=fusion)
        for name in BASELINES:
            runs = [
                federated_train_architecture(space, baseline_code(name, space), clients, epochs=50, seed=s)
                for s in range(args.seeds)
            ]
            accs = [100 * r.test_accuracy for r in runs]
            base_rows.append(
                [
                    fusion,
                    name,
                    space.short(baseline_code(name, space)).replace("|", "/"),
                    runs[0].parameters,
                    f"{statistics.mean(accs):.1f} ± {statistics.pstdev(accs):.1f}",
                ]
            )
    return (
        "## Fixed baselines as codes, retrained the reference way\n\n"
        f"50 epochs of federated gradient steps (each epoch: every client's full-batch gradient, train-size "
        f"weighted, one Adam step lr 0.02, wd 5e-6), test accuracy (test-size weighted, FLACC) at the first epoch "
        f"with the best federated validation accuracy, mean ± std over {args.seeds} seeds. Clients hold only their "
        "own nodes and internal edges (the reference code's clients also hold copies of their 1-hop neighbours). "
        "The paper's federated baselines on Cora: GCN 81.3, GAT 79.0, SAGE 78.8, SGC 78.1, APPNP 82.2.\n\n"
        + table(["fusion", "baseline", "code", "parameters", "FLACC (%)"], base_rows)
    )


def search_section(clients, args) -> str:
    """A short search in one process, its curve, and the found architecture retrained with each output structure."""
    space = SearchSpace(num_layers=6)
    schedule = SearchSchedule(epochs=args.search_epochs, warmup_epochs=args.search_warmup)
    start = time.perf_counter()
    search = InProcessSearch(space, clients, schedule, seed=0)
    history = search.run()
    code, fll, acc = search.final()
    wall = time.perf_counter() - start
    feo = [r for r in history if r["evolved"]]
    curve = [
        [
            r["epoch"],
            f"{r['gamma']:.3f}",
            f"{r['train_loss']:.3f}",
            f"{r['best_fll']:.3f}",
            f"{100 * r['best_val_accuracy']:.1f}",
            f"{r['from_controller']} / {r['from_clients']}",
            f"{r['train_seconds'] + r['feo_seconds']:.1f}",
        ]
        for r in feo
        if r["epoch"] % 5 == 0
    ]
    variants = []
    for os_ in range(len(ACTIVATIONS)):
        variant = code[:-1] + (os_,)
        runs = [federated_train_architecture(space, variant, clients, epochs=50, seed=s) for s in range(args.seeds)]
        accs = [100 * r.test_accuracy for r in runs]
        variants.append(
            [
                ACTIVATIONS[os_] + (" (found)" if os_ == code[-1] else ""),
                " ".join(f"{a:.1f}" for a in accs),
                f"{statistics.mean(accs):.1f}",
            ]
        )
    return (
        f"## A short search ({args.search_epochs} epochs, {args.search_warmup} warm-up, L = 6, population 60, "
        "seed 0, in one process)\n\n"
        f"Wall time {wall / 60:.1f} min. Found (lowest FLL in the final population): "
        f"`{space.short(code)}` = `{list(code)}`, FLL {fll:.3f}, federated validation accuracy with the "
        f"SuperNet's weights {100 * acc:.1f}%. Mean number of layers in the final population: "
        f"{statistics.mean(len(space.layers(c)) for c in search.population):.2f}.\n\n"
        + table(
            [
                "epoch",
                "gamma",
                "train loss",
                "best FLL (P_FL)",
                "its val acc (%)",
                "P from controller / clients",
                "epoch (s)",
            ],
            curve,
        )
        + f"\n\nThe found architecture retrained from scratch the reference way (50 epochs, {args.seeds} seeds, "
        "FLACC %), and the same architecture with each output structure:\n\n"
        + table(["output structure", "FLACC per seed", "mean"], variants)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="FEO epochs timed per search setting")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per baseline retraining")
    parser.add_argument("--search-epochs", type=int, default=40, help="epochs of the short search (0: none)")
    parser.add_argument("--search-warmup", type=int, default=10)
    args = parser.parse_args()
    configure_torch(1)
    spec = GraphSpec(dataset="Cora", data_dir=data_dir(), split="per-class:20/500/1000")
    clients = [client_graph(spec, PartitionSpec(partitioner="metis", num_clients=3), i) for i in range(3)]
    sizes = [(c.num_nodes, c.edge_index.size(1), c.num_train, c.num_val, c.num_test) for c in clients]
    steps, epochs, baselines = step_section(clients), epoch_section(clients, args), baseline_section(clients, args)
    sections = [search_section(clients, args)] if args.search_epochs else []
    body = "\n\n".join(
        [
            "Clients (nodes, directed edges, train, val, test): " + ", ".join(str(s) for s in sizes) + ".",
            steps,
            epochs,
            baselines,
            *sections,
        ]
    )
    write_result("flagcns_core_check", "FL-AGCNS core: costs on Cora", body)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
