"""Central differential privacy on Cora (issue 10): fedavg (conf/fedavg-cora.toml: 10 clients, Dirichlet beta
10000, 100 rounds) with ``dp=central-client`` (clients clip their update to ``dp-clipping-norm``, the server adds
Gaussian noise ``z C / n`` to the new global model), at several noise multipliers ``z``, against the same run
without DP. Reports final and best test accuracy and the ``(epsilon, delta=1e-5)`` the run spent, from Flower's
RDP accountant (client-level, no amplification by sampling; see docs/privacy.md).

All runs use ``weighting=uniform`` (central DP's noise is calibrated to an unweighted mean). In one process
(flowergraph.simulation.run_in_process); resumable: each finished run is kept in ``results/bench-dp/<cell>.json``.

    .venv/bin/python benchmarks/dp_accuracy.py [--rounds 100] [--seeds 0,1] [--noise 0,0.01,0.03,0.1,0.3,1,3]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.cells import remove_run_folder  # noqa: E402
from reproductions._runner.common import REPO, data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

from flowergraph.simulation import load_preset, run_in_process  # noqa: E402

CELLS = REPO / "results" / "bench-dp"


def run_cell(noise: float | None, clip: float, seed: int, rounds: int) -> dict:
    name = f"{'none' if noise is None else f'z{noise:g}-c{clip:g}'}-s{seed}-r{rounds}"
    done = CELLS / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    out = CELLS / name
    remove_run_folder(out)
    config = {
        **load_preset(REPO / "conf" / "fedavg-cora.toml"),
        "rounds": rounds,
        "seed": seed,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "weighting": "uniform",
    }
    if noise is not None:
        config.update({"dp": "central-client", "dp-noise-multiplier": noise, "dp-clipping-norm": clip})
    t0 = time.monotonic()
    summary = run_in_process(config)
    dp = summary.get("dp") or {}
    eps = dp.get("epsilon")
    result = {
        "noise": noise,
        "clip": clip,
        "seed": seed,
        "accuracy": summary["final_accuracy"],
        "best": summary["best_accuracy"],
        "epsilon": None if eps is None else float(eps),
        "noise_stddev": dp.get("noise_stddev"),
        "wall_s": time.monotonic() - t0,
    }
    done.write_text(json.dumps(result, indent=2))
    remove_run_folder(out)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: acc {result['accuracy']:.4f} eps {result['epsilon']}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", default="0,1", help="comma-separated")
    parser.add_argument("--noise", default="0,0.01,0.03,0.1,0.3,1,3", help="noise multipliers z, comma-separated")
    parser.add_argument("--clip", type=float, default=1.0, help="dp-clipping-norm (updates here have norm ~1)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    levels = [float(z) for z in args.noise.split(",")]
    CELLS.mkdir(parents=True, exist_ok=True)
    import logging

    logging.getLogger("flwr").setLevel(logging.WARNING)
    rows = []
    for noise in [None, *levels]:
        cells = [run_cell(noise, args.clip, s, args.rounds) for s in seeds]
        accs = [100 * c["accuracy"] for c in cells]
        eps = cells[0]["epsilon"]
        rows.append(
            [
                "no DP" if noise is None else f"central-client, z = {noise:g}",
                "-" if noise is None else f"{cells[0]['noise_stddev']:.4g}",
                f"{statistics.mean(accs):.2f}" + (f" ± {statistics.stdev(accs):.2f}" if len(accs) > 1 else ""),
                f"{100 * statistics.mean(c['best'] for c in cells):.2f}",
                "-" if noise is None else ("inf (no noise)" if eps is None or math.isinf(eps) else f"{eps:.3g}"),
            ]
        )
    header = ["setting", "noise std per parameter (z C / 10)", "final test acc %", "best test acc %"]
    header.append(f"epsilon after {args.rounds} rounds")
    body = (
        render("dp_accuracy/setting", rounds=args.rounds, clip=f"{args.clip:g}", seeds=", ".join(map(str, seeds)))
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + render("dp_accuracy/notes")
    )
    write_result("dp_accuracy", "Central differential privacy on Cora: accuracy and budget", body)


if __name__ == "__main__":
    main()
