"""Byzantine-robust aggregation against poisoned updates (issue 10): Cora, fedavg (conf/fedavg-cora.toml: 10
clients, Dirichlet beta 10000), with 0, 1 and 3 of the 10 clients sending a poisoned update every round
(``inject-faults`` ``scale``: the global model + 100 x its update; ``flip``: the global model - 10 x its update),
for each ``aggregator``. Final test accuracy against the attack-free weighted mean. Target: with 1 attacker, the
best robust aggregator within 2 points of attack-free.

The defender does not know how many clients attack; it assumes at most ``f`` (``aggregator-malicious=f``,
``aggregator-trim=f/10``: f of 10 values dropped at each end, ``multi-krum`` keeps n - f). Each robust rule is run
with f = 1 and f = 3 (``--assumed``) against 0, 1 and 3 actual attackers: an f that is too small lets attackers
through, one that is too large throws honest updates away.

In one process (flowergraph.simulation.run_in_process: the real ServerApp/ClientApp code without Flower's transport,
numbers equal to the simulation's); resumable: each finished run is kept in ``results/bench-robustness/<cell>.json``.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import REPO, data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

from flowergraph.simulation import load_preset, run_in_process  # noqa: E402

AGGREGATORS = ("mean", "median", "trimmed-mean", "krum", "multi-krum")
ATTACKS = ("scale", "flip")
CELLS = REPO / "results" / "bench-robustness"


def defence(f: int) -> dict:
    """The defender's settings for an assumed f; f = 0: the rule takes no such setting (mean, median)."""
    return {"aggregator-malicious": f, "aggregator-trim": f / 10} if f else {}


def run_cell(aggregator: str, attack: str, attackers: int, seed: int, rounds: int, f: int) -> dict:
    assumed = f"-f{f}" if f else ""
    name = f"{aggregator}{assumed}-{attack if attackers else 'clean'}-{attackers}-s{seed}-r{rounds}"
    done = CELLS / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    out = CELLS / name
    shutil.rmtree(out, ignore_errors=True)
    plan = ",".join(f"{attack}:{p}@*" for p in range(attackers))
    config = {
        **load_preset(REPO / "conf" / "fedavg-cora.toml"),
        "rounds": rounds,
        "seed": seed,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "aggregator": aggregator,
        "inject-faults": plan,
        **defence(f),
    }
    t0 = time.monotonic()
    summary = run_in_process(config)
    result = {
        "aggregator": aggregator,
        "assumed": f,
        "attack": attack if attackers else "none",
        "attackers": attackers,
        "seed": seed,
        "accuracy": summary["final_accuracy"],
        "best": summary["best_accuracy"],
        "wall_s": time.monotonic() - t0,
    }
    done.write_text(json.dumps(result, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: acc {result['accuracy']:.4f} ({result['wall_s']:.0f} s)", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated")
    parser.add_argument("--assumed", default="1,3", help="the defender's f (aggregator-malicious), comma-separated")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    assumed = [int(f) for f in args.assumed.split(",")]
    CELLS.mkdir(parents=True, exist_ok=True)
    import logging

    logging.getLogger("flwr").setLevel(logging.WARNING)  # 50 runs x 100 rounds of round lines otherwise

    def accs(agg, attack, n, f):
        return [run_cell(agg, attack, n, s, args.rounds, f)["accuracy"] for s in seeds]

    def cell(values, ref):
        text = f"{100 * statistics.mean(values):.2f}"
        if len(values) > 1:
            text += f" ± {100 * statistics.stdev(values):.2f}"
        return text + ("" if ref is None else f" ({100 * (statistics.mean(values) - ref):+.1f})")

    clean = accs("mean", "none", 0, 0)
    clean_mean = statistics.mean(clean)
    rows, best_one = [], {}
    for agg in AGGREGATORS:
        for f in [0] if agg in ("mean", "median") else assumed:
            row = [agg, str(f) if f else "-", cell(accs(agg, "none", 0, f), None)]
            for attack in ATTACKS:
                for n in (1, 3):
                    a = statistics.mean(accs(agg, attack, n, f))
                    row.append(cell(accs(agg, attack, n, f), clean_mean))
                    if n == 1 and agg != "mean":
                        best_one[attack] = max(best_one.get(attack, (-1, "", 0)), (a, agg, f))
            rows.append(row)
    verdicts = [
        f"{attack}, 1 attacker: best robust aggregator {agg} (f = {f}) at {100 * a:.2f}% = "
        f"{100 * (a - clean_mean):+.2f} points vs attack-free mean "
        f"({'met' if a >= clean_mean - 0.02 else 'MISSED'}: within 2 points)"
        for attack, (a, agg, f) in best_one.items()
    ]
    header = ["aggregator", "f", "no attack", "scale x100, 1 of 10", "scale x100, 3 of 10", "flip x-10, 1 of 10"]
    header.append("flip x-10, 3 of 10")
    seeds_text = ", ".join(map(str, seeds))
    body = (
        render("robustness/setting", rounds=args.rounds, seeds=seeds_text, clean=f"{100 * clean_mean:.2f}")
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + "\n".join(f"- {v}" for v in verdicts)
        + "\n\n"
        + render("robustness/notes")
    )
    write_result("robustness", "Robust aggregation against poisoned updates (Cora, fedavg)", body)


if __name__ == "__main__":
    main()
