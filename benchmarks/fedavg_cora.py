"""Accuracy of weighted averaging (FedGCN's 0-hop) and of the centralized reference on Cora.

Cora, GCN hidden 16, public split, SGD lr 0.5, weight decay 5e-4, 3 local steps, 100 rounds; weighted averaging
with 10 clients at Dirichlet beta = 10000, 100, 1; centralized = one client with the whole graph, same model,
same 300 steps. Every run goes through Flower's Ray simulation (flowergraph.simulation).

    .venv/bin/python benchmarks/fedavg_cora.py [--seeds 0 1 2] [--rounds 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import REPO, data_dir, mean_std, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

from flowergraph.plot import plot_runs  # noqa: E402
from flowergraph.simulation import run_simulation  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedavg-cora"))
    args = parser.parse_args()
    work = Path(args.work)
    settings = [("centralized", None), ("fedavg", 10000.0), ("fedavg", 100.0), ("fedavg", 1.0)]
    results: dict = {}
    for method, beta in settings:
        for seed in args.seeds:
            name = f"{method}-beta{beta:g}-s{seed}" if beta else f"{method}-s{seed}"
            out = work / name
            overrides = {
                "data-dir": data_dir(),
                "seed": seed,
                "node.local-steps": 3,
                "node.lr": 0.5,
                "node.split": "public",
            }
            if beta:
                overrides["node.beta"] = beta
            if (out / "summary.json").exists() and '"completed"' in (out / "summary.json").read_text():
                import json

                summary, wall = json.loads((out / "summary.json").read_text()), None
            else:
                r = run_simulation(
                    method, num_clients=10, rounds=args.rounds, dataset="Cora", out=out, overrides=overrides
                )
                if not r.ok:
                    sys.exit(f"{name} failed; see {r.log_file}")
                summary, wall = r.summary, r.wall_time_s
            results.setdefault((method, beta), []).append((summary, wall, out))
            print(name, summary["final_accuracy"], flush=True)
    rows = []
    for (method, beta), runs in results.items():
        rows.append(
            [
                method,
                "-" if beta is None else f"{beta:g}",
                1 if method == "centralized" else 10,
                mean_std([s["final_accuracy"] for s, _, _ in runs]),
                mean_std([s["best_accuracy"] for s, _, _ in runs]),
                " / ".join(f"{s['final_accuracy']:.3f}" for s, _, _ in runs),
                mean_std([s["mean_round_time_s"] for s, _, _ in runs]),
            ]
        )
    plots = plot_runs(
        [str(runs[0][2]) for runs in results.values()],
        str(REPO / "docs" / "results"),
        labels=[m if b is None else f"{m} beta={b:g}" for m, b in results],
        metric="accuracy",
    )
    for p in plots:
        p.rename(p.with_name(f"fedavg_cora_{p.name}"))
    header = ["method", "beta", "clients", "final test acc", "best-round test acc", "per seed", "mean round s"]
    body = (
        render("fedavg_cora/setting", rounds=args.rounds, steps=args.rounds * 3, seeds=args.seeds)
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + render("fedavg_cora/notes", seed=args.seeds[0])
    )
    write_result("fedavg_cora", "Weighted averaging (0-hop) and centralized GCN on Cora", body)


if __name__ == "__main__":
    main()
