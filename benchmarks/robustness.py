"""Byzantine-robust aggregation against poisoned updates (issue 10): Cora, fedavg (conf/fedavg-cora.toml: 10
clients, Dirichlet beta 10000), with 0, 1 and 3 of the 10 clients sending a poisoned update every round
(``inject-faults`` ``scale``: the global model + 100 x its update; ``flip``: the global model - 10 x its update),
for each ``aggregator``. Final test accuracy against the attack-free weighted mean. Target: with 1 attacker, the
best robust aggregator within 2 points of attack-free.

The defender's settings are fixed for all rows: ``aggregator-malicious=3`` (Krum's assumed attackers),
``aggregator-trim=0.3`` (3 of 10 values dropped at each end), ``multi-krum`` keeps n - f = 7.

In one process (flowergraph.inprocess: the real ServerApp/ClientApp code without Flower's transport, numbers equal
to the simulation's); resumable: each finished run is kept in ``results/bench-robustness/<cell>.json``.

    .venv/bin/python benchmarks/robustness.py [--rounds 100] [--seeds 0]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, data_dir, table, write_result  # noqa: E402

from flowergraph.inprocess import run_inprocess  # noqa: E402
from flowergraph.simulation import load_preset  # noqa: E402

AGGREGATORS = ("mean", "median", "trimmed-mean", "krum", "multi-krum")
ATTACKS = ("scale", "flip")
CELLS = REPO / "results" / "bench-robustness"
DEFENCE = {"aggregator-malicious": 3, "aggregator-trim": 0.3}


def run_cell(aggregator: str, attack: str, attackers: int, seed: int, rounds: int) -> dict:
    name = f"{aggregator}-{attack if attackers else 'clean'}-{attackers}-s{seed}-r{rounds}"
    done = CELLS / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    out = CELLS / name
    shutil.rmtree(out, ignore_errors=True)
    plan = ",".join(f"{attack}:{p}@*" for p in range(attackers))
    config = {**load_preset(REPO / "conf" / "fedavg-cora.toml"), "rounds": rounds, "seed": seed,
              "data-dir": data_dir(), "out-dir": str(out), "aggregator": aggregator, "inject-faults": plan,
              **DEFENCE}
    t0 = time.monotonic()
    summary, _ = run_inprocess(config)
    result = {"aggregator": aggregator, "attack": attack if attackers else "none", "attackers": attackers,
              "seed": seed, "accuracy": summary["final_accuracy"], "best": summary["best_accuracy"],
              "wall_s": time.monotonic() - t0}
    done.write_text(json.dumps(result, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: acc {result['accuracy']:.4f} ({result['wall_s']:.0f} s)",
          flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", default="0", help="comma-separated")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    CELLS.mkdir(parents=True, exist_ok=True)
    import logging

    logging.getLogger("flwr").setLevel(logging.WARNING)  # 50 runs x 100 rounds of round lines otherwise

    def acc(agg, attack, n):
        return statistics.mean(run_cell(agg, attack, n, s, args.rounds)["accuracy"] for s in seeds)

    clean_mean = acc("mean", "none", 0)
    rows, best_one = [], {}
    for agg in AGGREGATORS:
        row = [agg, f"{100 * acc(agg, 'none', 0):.2f}"]
        for attack in ATTACKS:
            for n in (1, 3):
                a = acc(agg, attack, n)
                row.append(f"{100 * a:.2f} ({100 * (a - clean_mean):+.1f})")
                if n == 1 and agg != "mean":
                    best_one[attack] = max(best_one.get(attack, (-1, "")), (a, agg))
        rows.append(row)
    verdicts = [f"{attack}, 1 attacker: best robust aggregator {agg} at {100 * a:.2f}% = "
                f"{100 * (a - clean_mean):+.2f} points vs attack-free mean "
                f"({'met' if a >= clean_mean - 0.02 else 'MISSED'}: within 2 points)"
                for attack, (a, agg) in best_one.items()]
    body = (f"Cora (public split), fedavg, 10 clients (Dirichlet beta 10000), {args.rounds} rounds, seed(s) "
            f"{', '.join(map(str, seeds))}; attackers are partitions 0 (1 attacker) and 0-2 (3 attackers) and "
            "poison every round. Defender settings for every row: aggregator-malicious=3, aggregator-trim=0.3, "
            "multi-krum keeps 7. Cells: final test accuracy % (points vs the attack-free `mean`, "
            f"{100 * clean_mean:.2f}%).\n\n"
            + table(["aggregator", "no attack", "scale x100, 1 of 10", "scale x100, 3 of 10",
                     "flip x-10, 1 of 10", "flip x-10, 3 of 10"], rows)
            + "\n\n" + "\n".join(f"- {v}" for v in verdicts)
            + "\n\nThe robust rules are Flower's (`flwr.server.strategy.aggregate`: `aggregate_median`, "
              "`aggregate_trimmed_avg`, `aggregate_krum`), applied to the updates that passed validation. They "
              "ignore the training-set sizes (median, trimmed mean, Krum's choice), which costs little here "
              "because beta 10000 gives every client a similar share of the public training nodes.")
    write_result("robustness", "Robust aggregation against poisoned updates (Cora, fedavg)", body)


if __name__ == "__main__":
    main()
