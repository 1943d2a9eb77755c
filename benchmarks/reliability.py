"""Reliability: injected faults against the fault-free run (Flower's Ray simulation, inject-faults).

Cora, public split, GCN hidden 16, 5 clients (Dirichlet beta = 10000), 30 rounds x 3 local steps, min-clients = 3,
round-timeout = 20 s; one run per fault plan, every plan with the same seed as the fault-free run, for weighted
averaging (fedavg) and 2-hop FedGCN. Writes docs/results/reliability.md (the table of docs/reliability.md).

    .venv/bin/python benchmarks/reliability.py [--rounds 30] [--clients 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import REPO, data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

from flowergraph.storage import load_checkpoint  # noqa: E402
from flowergraph.settings import OPTION_BY_KEY, parse_run_config  # noqa: E402
from flowergraph.methods.node import node_server_evaluate  # noqa: E402
from flowergraph.storage import read_run  # noqa: E402
from flowergraph.simulation import run_simulation  # noqa: E402


def plans(rounds: int) -> list[tuple[str, str, str]]:
    """(name, inject-faults, what it shows)."""
    every = list(range(5, rounds + 1, 5))
    return [
        ("none", "", "the fault-free reference"),
        ("raise x6", ",".join(f"raise:1@{r}" for r in every), "client 1 raises every 5th round"),
        ("nan x6", ",".join(f"nan:2@{r}" for r in every), "client 2 sends NaN every 5th round"),
        ("shape x6", ",".join(f"shape:3@{r}" for r in every), "client 3 sends a wrongly shaped update every 5th round"),
        ("hang x2", f"hang:4@{every[0]},hang:4@{every[-1]}", "client 4 answers after round-timeout, twice"),
        ("exit", f"exit:0@{every[1]}", f"client 0's process dies in round {every[1]} (a Ray actor is lost for good)"),
        (
            "mixed",
            f"shape:3@2,raise:1@{every[0]},nan:2@{every[1]},hang:4@{every[2]},exit:0@{every[3]}",
            "one of each, in different rounds",
        ),
    ]


def summarise(out: Path) -> dict:
    run = read_run(out)
    training = [r for r in run["rounds"] if r["round"] >= 1]
    final = load_checkpoint(out).arrays
    # The final global model on the global graph's 1000 test nodes, whoever could still evaluate it: comparable
    # across runs even when faults kept clients from the last evaluation.
    settings = parse_run_config({k: v for k, v in run["config"].items() if k in OPTION_BY_KEY})
    _, metrics = node_server_evaluate(settings)(settings.rounds, final)
    return {
        "global": metrics["accuracy"],
        "rounds": len(training),
        "aggregated": sum(bool(r.get("aggregated")) for r in training),
        "rejected": sum(len(r.get("rejected") or []) for r in training),
        "failures": sum(r.get("num_failures", 0) for r in training),
        "final": run["summary"]["final_accuracy"],
        "finite": all(bool((a == a).all()) for a in final),  # no NaN reached the global model
        "slowest": max(r["time_s"] for r in training),
        "time": run["summary"]["train_time_s"],
        "status": run["summary"]["status"],
    }


def run(method: str, name: str, spec: str, out: Path, args) -> None:
    """The run of ``method`` under fault plan ``name`` (``spec``) in ``out``, unless a completed one is there."""
    done = out / "summary.json"
    if done.exists() and json.loads(done.read_text()).get("status") == "completed":
        return
    overrides = {"data-dir": data_dir(), "seed": args.seed, "node.split": "public", "min-clients": 3}
    overrides.update({"round-timeout": 20.0, "checkpoint-every": args.rounds, "inject-faults": spec})
    result = run_simulation(
        method, num_clients=args.clients, rounds=args.rounds, dataset="Cora", out=out, overrides=overrides, timeout=1800
    )
    if not result.ok:
        sys.exit(f"{method} {name} failed; see {result.log_file}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", default=["fedavg", "fedgcn"])
    parser.add_argument("--work", default=str(REPO / "results" / "bench-reliability"))
    args = parser.parse_args()
    rows = []
    for method in args.methods:
        reference = None
        for name, spec, _ in plans(args.rounds):
            out = Path(args.work) / f"{method}-{name.replace(' ', '')}-s{args.seed}"
            run(method, name, spec, out, args)
            s = summarise(out)
            reference = s["global"] if name == "none" else reference
            delta = "" if name == "none" else f"{s['global'] - reference:+.4f}"
            clients = "n/a" if s["final"] is None else f"{s['final']:.4f}"
            rows.append(
                [method, name, f"`{spec}`" if spec else "-", f"{s['rounds']}/{args.rounds}", s["aggregated"]]
                + [s["rejected"], s["failures"], "yes" if s["finite"] else "NO", f"{s['global']:.4f}", delta, clients]
                + [f"{s['slowest']:.1f}", f"{s['time']:.1f}"]
            )
            print(method, name, s, flush=True)
    legend = "\n".join(f"* **{name}**: {what}." for name, _, what in plans(args.rounds))
    header = ["method", "faults", "inject-faults", "rounds completed", "aggregated", "rejected", "failures", "finite"]
    header += ["whole-graph acc", "vs none", "clients' acc", "slowest round s", "train time s"]
    body = (
        render("reliability/setting", clients=args.clients, rounds=args.rounds, seed=args.seed, legend=legend)
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + render("reliability/exit")
    )
    write_result("reliability", "Reliability: injected faults against the fault-free run", body)


if __name__ == "__main__":
    main()
