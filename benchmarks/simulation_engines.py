"""The two simulation engines side by side: the same federation through Ray (``simulation-engine=ray``, the
default) and through the inline engine (``simulation-engine=inline``), launched the same way
(``flowergraph.simulation.run_simulation``), interleaved, ``--repeats`` times each.

Per run: the launcher's wall time (validation and data check, then Flower's start-up, the rounds, the stop), the
time from the launch to the end of round 1 (start-up: Ray and its actor, or one child process; imports; each
client's data), the median time of rounds 2..R, the final accuracy (both engines must give the same), and the
peak resident memory and the CPU time of the processes the run started (sampled every 0.2 s: every process
under this one and every process carrying the launcher's process-group tag, which Ray's daemons keep after they
leave the tree).

    .venv/bin/python benchmarks/simulation_engines.py [--clients 3] [--rounds 5] [--repeats 1]

writes docs/results/simulation_engines.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402
from reproductions._runner.processes import TreeMemorySampler  # noqa: E402

from flowergraph.simulation import run_simulation  # noqa: E402
from flowergraph.storage import read_run  # noqa: E402


def one(engine: str, clients: int, rounds: int, out: Path) -> dict:
    # the processes the run starts: this one's descendants and every process of its process groups (Ray's daemons)
    sampler = TreeMemorySampler(interval=0.2, rss=True, root=False, groups=True).start()
    try:
        result = run_simulation(
            "fedavg",
            num_clients=clients,
            rounds=rounds,
            out=out,
            stream=open(os.devnull, "w"),
            overrides={"simulation-engine": engine},
            ray_cpus=None,
            timeout=900,
        )
    finally:
        sampler.stop()
    if not result.ok:
        sys.exit(f"{engine} run failed; see {result.log_file}")
    run = read_run(out)
    started = run["summary"]["launcher_started"]
    later = [r["time_s"] for r in run["rounds"][1:]]
    return {
        "engine": engine,
        "wall_s": result.wall_time_s,
        "first_round_s": run["rounds"][0]["ended_at"] - started,
        "round_s": statistics.median(later) if later else float("nan"),
        "accuracy": run["summary"]["final_accuracy"],
        "peak_rss_mb": sampler.peak_mb,
        "cpu_s": sampler.cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fg-engines-") as work:
        for rep in range(args.repeats):
            for engine in ("ray", "inline"):
                row = one(engine, args.clients, args.rounds, Path(work) / f"{engine}-{rep}")
                print(row, flush=True)
                rows.append(row)
    accuracies = {round(r["accuracy"], 12) for r in rows}
    header = ["engine", "run", "wall (s)", "launch to end of round 1 (s)", "median round 2..R (s)", "final accuracy"]
    header += ["peak RSS of its processes (MB)", "CPU of its processes (s)"]
    keys = ("wall_s", "first_round_s", "round_s", "accuracy")
    lines = [
        [r["engine"], i // 2 + 1, *(r[k] for k in keys), round(r["peak_rss_mb"]), r["cpu_s"]]
        for i, r in enumerate(rows)
    ]
    body = (
        render("simulation_engines/setting", clients=args.clients, rounds=args.rounds, repeats=args.repeats)
        + "\n\n"
        + table(header, lines)
        + "\n\n"
        + render("simulation_engines/notes", equal="equal" if len(accuracies) == 1 else "NOT equal")
        + "\n"
    )
    write_result("simulation_engines", "Simulation engines: Ray and inline, side by side", body)


if __name__ == "__main__":
    main()
