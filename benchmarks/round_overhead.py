"""Per-round wall time of weighted averaging against Flower's own floor (clients that do no work).

Both federations run in Flower's Ray simulation, one after the other in this script, with the same number of
clients, rounds, model (so the same bytes on the wire) and client evaluation every round. The floor is the
`noop` method (``benchmarks/noop_methods.py``): its clients return what they receive. Two protocol settings are
measured, interleaved:

* ``stock``: Flower's own reply polling (``poll-interval=0``: a fixed 0.1 s tick in simulation) and a separate
  evaluate message per client per round (``fused-eval=false``) - what a plain Flower strategy does;
* ``default``: flowergraph's defaults - adaptive polling (``poll-interval=0.05``) and fused evaluation (the
  evaluation travels in the next round's fit message).

Round 1 includes each actor's one-time data loading and is reported separately; the per-round figure is the
median over rounds 2..R-1 (round R has the separate final evaluation under ``default``).

    .venv/bin/python benchmarks/round_overhead.py [--clients 10] [--rounds 30] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402
import noop_methods  # noqa: E402

from flowergraph.storage import read_run  # noqa: E402
from flowergraph.simulation import run_simulation  # noqa: E402

SETTINGS = {"stock": {"poll-interval": 0.0, "fused-eval": False}, "default": {}}


def one(method: str, setting: str, clients: int, rounds: int, out: Path) -> dict:
    result = run_simulation(
        method,
        num_clients=clients,
        rounds=rounds,
        dataset="Cora",
        out=out,
        overrides={
            "data-dir": data_dir(),
            "node.local-steps": 3,
            "node.lr": 0.5,
            "node.split": "public",
            **SETTINGS[setting],
        },
    )
    if not result.ok:
        sys.exit(f"{method} ({setting}) run failed; see {result.log_file}")
    rows = read_run(out)["rounds"]
    later = [r["time_s"] for r in rows if 2 <= r["round"] < rounds]
    return {
        "method": method,
        "setting": setting,
        "first": rows[0]["time_s"],
        "median": statistics.median(later),
        "mean": statistics.mean(later),
        "wall": result.wall_time_s,
        "acc": result.summary.get("final_accuracy"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2, help="alternating noop/fedavg pairs per setting")
    args = parser.parse_args()
    noop_methods.enable()  # method=noop, in this process and the simulation's
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for setting in SETTINGS:
                for method in ("noop", "fedavg"):
                    r = one(method, setting, args.clients, args.rounds, Path(tmp) / f"{method}-{setting}-{rep}")
                    r["rep"] = rep
                    print(r, flush=True)
                    runs.append(r)

    def med(method, setting):
        return statistics.median(r["median"] for r in runs if (r["method"], r["setting"]) == (method, setting))

    rows = [
        [r["rep"], r["setting"], r["method"], r["first"], r["median"], r["mean"], r["wall"]]
        + ["" if r["acc"] is None else f"{r['acc']:.4f}"]
        for r in runs
    ]
    summary = []
    for setting in SETTINGS:
        pairs = [
            (a, b)
            for a in runs
            for b in runs
            if a["setting"] == b["setting"] == setting
            and a["rep"] == b["rep"]
            and (a["method"], b["method"]) == ("noop", "fedavg")
        ]
        noop, fedavg = med("noop", setting), med("fedavg", setting)
        per_pair = ", ".join(f"{b['median'] / a['median']:.2f}" for a, b in pairs)
        summary.append([setting, noop, fedavg, f"{fedavg / noop:.2f}", per_pair])
    speedup = med("fedavg", "stock") / med("fedavg", "default")
    header = ["pair", "setting", "method", "round 1 s", "median round s (2..R-1)", "mean round s (2..R-1)"]
    header += ["run wall s", "final acc"]
    body = "\n\n".join(
        [
            render("round_overhead/setting", clients=args.clients, rounds=args.rounds),
            table(["setting", "noop median round s", "fedavg median round s", "fedavg / noop", "per pair"], summary),
            render("round_overhead/target", speedup=f"{speedup:.2f}"),
            table(header, rows),
            render("round_overhead/round1"),
        ]
    )
    write_result("round_overhead", "Per-round overhead of weighted averaging vs Flower's floor", body)


if __name__ == "__main__":
    main()
