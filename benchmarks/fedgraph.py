"""FedGraph (Chen et al., IEEE TPDS) against its baselines and ablations, in the shapes of the paper's figures:
accuracy against wall time (Fig. 7: FedGraph's DDPG policies, full batch, GraphSAGE and FastGCN sampling, all with
the same cross-client exchange), cross-client sharing (Fig. 10: FedGraph, nonShare, allShare), the DDPG learning
curve (return per episode), heterogeneity (Fig. 9: time to a target accuracy at variance 0.1, 0.5, 1), the agent
against a fixed policy, and the effect of one-round-stale rows against the same-round exchange.

Cells (each kept in ``benchmarks/cells/fedgraph/<cell>.json`` with its settings and code state,
``common.CellStore``; a finished cell is skipped, a stopped run resumes from its last checkpoint under ``--work``):
``run`` (dataset, variant, var, budget, seed) is one FedGraph run (``method=fedgraph``) through flowergraph's real
ServerApp and ClientApp code in one process (:mod:`flowergraph.app.inprocess`, equal to a Flower simulation, which
``tests/test_fedgraph.py`` checks). Variants:

* ``fedgraph``: the DDPG agent's policies (episodes restart training: Algorithm 4);
* ``fixed``: FedGraph sampling with a fixed policy (kappa = batch 256, p = 1 for every convolution);
* ``full``, ``graphsage``, ``fastgcn``: the baselines (fixed, the same exchange);
* ``nonshare``, ``allshare``: the sharing ablations (fixed policy);
* ``one-round``: FedGraph with one-round-stale rows (no exchange phase).

Wall time is the run's own clock (``elapsed_s`` of every round record: exchange, local training, aggregation,
agent, evaluation; data loading and start-up excluded). Accuracy is the federated test accuracy (test-set-weighted
over clients, each with one exact forward on its rows). For ``fedgraph`` the curve and the time to the target are
taken in the last episode (from its first round), since every episode restarts training.

    .venv/bin/python benchmarks/fedgraph.py --quick              # smoke check: 3 clients, 6 rounds, minutes
    .venv/bin/python benchmarks/fedgraph.py --budget default     # conf/fedgraph-cora.toml's budget (5 clients)
    .venv/bin/python benchmarks/fedgraph.py                      # the paper's (20 clients, 300 rounds): hours
    .venv/bin/python benchmarks/fedgraph.py --tables-only        # rewrite docs/results/fedgraph*.md from cells
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, CellStore, data_dir, table, write_result  # noqa: E402

DATASETS = ("Cora", "CiteSeer")
VARIANTS = ("fedgraph", "fixed", "full", "graphsage", "fastgcn", "nonshare", "allshare", "one-round")
VARS = (0.1, 0.5, 1.0)
TARGET = 0.75
BUDGETS = {
    "paper": {"num-clients": 20, "rounds": 300, "fedgraph.episode-rounds": 30},
    "default": {"num-clients": 5, "rounds": 30, "fedgraph.episode-rounds": 10},
    "quick": {"num-clients": 3, "rounds": 6, "fedgraph.episode-rounds": 3},
}
SETTINGS = {"method": "fedgraph", "node.model": "gcn", "node.hidden": 16, "node.layers": 2, "node.dropout": 0.5,
            "fedgraph.data": "synthesis", "fedgraph.lr": 0.01, "fedgraph.batch-size": 256,
            "fedgraph.omega": 128.0, "fedgraph.pca-components": 20, "fedgraph.target-accuracy": 0.8}
VARIANT_KEYS = {
    "fedgraph": {},
    "fixed": {"fedgraph.agent": "fixed"},
    "full": {"fedgraph.agent": "fixed", "fedgraph.sampling": "full"},
    "graphsage": {"fedgraph.agent": "fixed", "fedgraph.sampling": "graphsage"},
    "fastgcn": {"fedgraph.agent": "fixed", "fedgraph.sampling": "fastgcn"},
    "nonshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "nonshare"},
    "allshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "allshare"},
    "one-round": {"fedgraph.staleness": "one-round"},
}
SOURCES = ("flowergraph/tasks/fedgraph/*.py", "flowergraph/tasks/datasets.py", "flowergraph/tasks/splits.py",
           "flowergraph/tasks/partition.py", "flowergraph/tasks/federated_graph.py", "flowergraph/tasks/models.py",
           "flowergraph/tasks/training.py", "flowergraph/wire/fedgraph.py", "flowergraph/clients/fedgraph.py",
           "flowergraph/strategies/fedgraph.py", "flowergraph/methods/fedgraph.py", "flowergraph/strategies/base.py",
           "flowergraph/strategies/phases.py")
STORE = "fedgraph"


def run_config(dataset: str, variant: str, var: float, budget: str, seed: int) -> dict:
    """The run configuration of a cell (without the machine's paths)."""
    return {**SETTINGS, **BUDGETS[budget], "dataset": dataset, "seed": seed, "fedgraph.var": var,
            **VARIANT_KEYS[variant]}


def run_cell(work: Path, dataset: str, variant: str, var: float, budget: str, seed: int) -> dict:
    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.storage.results import read_run

    config = run_config(dataset, variant, var, budget, seed)
    out = work / f"{dataset}-{variant}-v{var}-{budget}-s{seed}"
    full = {**config, "data-dir": data_dir(), "out-dir": str(out), "state-dir": str(out / "client-state"),
            "checkpoint-every": 10}
    summary = out / "summary.json"
    if not (summary.exists() and json.loads(summary.read_text()).get("status") == "completed"):
        if (out / "checkpoints").is_dir() and list((out / "checkpoints").glob("round-*.npz")):
            full["resume-from"] = str(out)  # a stopped cell continues from its last checkpoint
        elif out.exists():
            shutil.rmtree(out)
        run_inprocess(full)
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    curve = [[r["round"], float(r.get("elapsed_s") or 0.0), r.get("accuracy"),
              (r.get("fedgraph") or {}).get("episode", 1)] for r in rounds]
    returns = [(r.get("fedgraph") or {}).get("episode_return") for r in rounds]
    s = parse_run_config({**config, "data-dir": data_dir()})
    sizes = [int(client_graph_of(s, k).num_nodes) for k in range(s.num_clients)]
    last = rounds[-1].get("fedgraph") or {}
    return {"kind": "run", "dataset": dataset, "variant": variant, "var": var, "budget": budget, "seed": seed,
            "curve": curve, "returns": [r for r in returns if r is not None], "client_nodes": sizes,
            "last_policies": last.get("policies"), "final_accuracy": curve[-1][2],
            "bytes": sum(int(r.get("bytes_down", 0)) + int(r.get("bytes_up", 0)) for r in rounds)}


def last_episode(row: dict) -> list[list]:
    """The curve from the start of the run's last episode (FedGraph restarts training every episode), times from
    that start."""
    curve = row["curve"]
    if row["variant"] not in ("fedgraph", "one-round"):
        return curve
    episode = curve[-1][3]
    part = [c for c in curve if c[3] == episode]
    start = next((c[1] for c in curve if c[0] == part[0][0] - 1), 0.0) if part[0][0] > 1 else 0.0
    return [[c[0], c[1] - start, c[2], c[3]] for c in part]


def time_to(row: dict, target: float = TARGET) -> float | None:
    for _, t, acc, _ in last_episode(row):
        if acc is not None and acc >= target:
            return t
    return None


def tables(rows: list[dict], budget: str) -> str:
    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"

    runs = sorted((r for r in rows if r.get("budget") == budget),
                  key=lambda r: (r["dataset"], r["var"], VARIANTS.index(r["variant"]), r["seed"]))
    out = [f"Target accuracy {TARGET:.0%}. Times in seconds of the run's own clock (for FedGraph's DDPG variants: "
           f"in the last episode, which restarts training; they include the server's own work: the DDPG variants also "
           f"evaluate the global model on the server's test set and update the agent every round). Accuracy: "
           f"federated test accuracy after the last round.\n"]
    body = [[r["dataset"], f"{r['var']:g}", r["variant"], r["seed"],
             fmt(100 * r["final_accuracy"] if r["final_accuracy"] is not None else None), fmt(time_to(r)),
             fmt(last_episode(r)[-1][1]), f"{r['bytes'] / 1e6:.1f}", r["stale"] or ""]
            for r in runs]
    out.append(table(["dataset", "var", "variant", "seed", "final acc %", f"time to {TARGET:.0%} (s)",
                      "time of the curve (s)", "MB moved", "note"], body))
    ddpg = [r for r in runs if r["variant"] == "fedgraph" and r["returns"]]
    if ddpg:
        out.append("\n## DDPG: return per episode\n")
        out.append(table(["dataset", "var", "seed", "returns (episode 1, 2, ...)", "client nodes",
                          "last policies (kappa, p)"],
                         [[r["dataset"], f"{r['var']:g}", r["seed"], ", ".join(f"{x:.2f}" for x in r["returns"]),
                           r["client_nodes"], json.dumps([[k, [round(p, 2) for p in ps]] for k, ps in
                                                          (r["last_policies"] or [])])] for r in ddpg]))
    return "\n".join(out)


def plot(rows: list[dict], budget: str) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in rows if r.get("budget") == budget and r["var"] == 0.1 and r["seed"] == min(
        x["seed"] for x in rows if x.get("budget") == budget)]
    if not runs:
        return None
    datasets = sorted({r["dataset"] for r in runs})
    fig, axes = plt.subplots(1, len(datasets) + 1, figsize=(5 * (len(datasets) + 1), 4))
    for ax, dataset in zip(axes, datasets):
        for i, r in enumerate(sorted((r for r in runs if r["dataset"] == dataset),
                                     key=lambda r: VARIANTS.index(r["variant"]))):
            curve = [c for c in last_episode(r) if c[2] is not None]
            if curve:
                ax.plot([c[1] for c in curve], [c[2] for c in curve], label=r["variant"], color=plt.cm.tab10(i % 10))
        ax.axhline(TARGET, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{dataset}: accuracy vs wall time (budget {budget})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[-1]
    for r in runs:
        if r["variant"] == "fedgraph" and r["returns"]:
            ax.plot(range(1, len(r["returns"]) + 1), r["returns"], marker="o", label=r["dataset"])
    ax.set_xlabel("episode")
    ax.set_ylabel("cumulative reward")
    ax.set_title("DDPG learning curve", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"fedgraph{'' if budget == 'paper' else '_' + budget}.png"
    fig.savefig(REPO / "docs" / "results" / name, dpi=110)
    plt.close(fig)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke check: 3 clients, 6 rounds, 1 seed")
    parser.add_argument("--budget", choices=tuple(BUDGETS), default="paper")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--vars", nargs="+", type=float, default=list(VARS),
                        help="heterogeneity levels (variance of xi); only fedgraph and full run at every level")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedgraph"), help="run folders (not in git)")
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.budget, args.seeds, args.datasets, args.vars = "quick", args.seeds[:1], ["Cora"], [0.1]
    from flowergraph.tasks.compute import configure_torch

    configure_torch(1)
    store = CellStore(STORE, SOURCES)
    work = Path(args.work)
    rows: list[dict] = []
    b = args.budget
    for dataset in args.datasets:
        for var in args.vars:
            for variant in args.variants:
                if var != 0.1 and variant not in ("fedgraph", "full"):
                    continue  # heterogeneity: FedGraph against full batch
                for seed in args.seeds:
                    name = f"{dataset}-{variant}-v{var}-{b}-s{seed}"
                    record = store.load(name)
                    if record is not None and not (args.rerun_stale and not store.current(record)):
                        rows.append({**record["row"], "cell": name, "stale": store.flag(record)})
                        continue
                    if args.tables_only:
                        continue
                    started = time.perf_counter()
                    row = run_cell(work, dataset, variant, var, b, seed)
                    row["cell_s"] = time.perf_counter() - started
                    print(f"cell {name}: final accuracy {row['final_accuracy']}, time to {TARGET:.0%} "
                          f"{time_to(row)}, {row['cell_s']:.1f} s", flush=True)
                    rows.append({**store.save(name, run_config(dataset, variant, var, b, seed), row)["row"],
                                 "cell": name, "stale": ""})
    figure = plot(rows, b)
    body = tables(rows, b)
    if figure:
        body += f"\n\n![accuracy vs wall time, DDPG returns]({figure})\n"
    name = "fedgraph" if b == "paper" else f"fedgraph_{b}"
    write_result(name, f"FedGraph: sampling baselines, sharing ablations, DDPG, heterogeneity (budget {b})", body)


if __name__ == "__main__":
    main()
