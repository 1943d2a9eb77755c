"""Round time over a long run, with and without flushing float32 denormals (issue "Long runs").

Each run goes through Flower's Ray simulation exactly as a user runs the preset (``python -m flowergraph.simulation
--config conf/<preset>.toml``: 1 CPU per client, client evaluation every round, fused into the next fit), for 200
rounds. ``flush=off`` sets ``FLOWERGRAPH_FLUSH_DENORMAL=0`` for every process of the run (the code before the
fix); ``flush=on`` is the default. Reported per run: the median round time over rounds 1-10, 91-100 and 191-200
(the median, so round 1's one-time data load in each actor does not dominate its window), their ratio, the run's
wall time (start-up included) and its final accuracy.

Resumable: finished runs are kept in ``benchmarks/cells/round_drift/`` with the code state that produced them;
the table flags runs made by other code.

    .venv/bin/python benchmarks/round_drift.py                  # all six runs (~35 min on 2 cores)
    .venv/bin/python benchmarks/round_drift.py --runs fedavg-cora --flush on
    .venv/bin/python benchmarks/round_drift.py --tables-only
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
from reproductions._runner.cells import CellStore  # noqa: E402
from reproductions._runner.common import REPO, data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402

RUNS = {
    "fedstar-chem": ("conf/fedstar-chem.toml", {"seed": 1}),
    "fedgcn-cora": ("conf/fedgcn-cora.toml", {}),
    "fedavg-cora": ("conf/fedavg-cora.toml", {}),
}
WINDOWS = ((1, 10), (91, 100), (191, 200))
ROUNDS = 200


def run_one(name: str, flush: str) -> dict:
    from flowergraph.storage import read_run
    from flowergraph.simulation import load_preset, run_simulation
    from flowergraph.tasks import FLUSH_ENV

    preset, extra = RUNS[name]
    config = {**load_preset(REPO / preset), **extra, "data-dir": data_dir(), "rounds": ROUNDS}
    method = config.pop("method")
    old = os.environ.get(FLUSH_ENV)
    os.environ[FLUSH_ENV] = "1" if flush == "on" else "0"  # inherited by the SuperLink and every Flower process
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = run_simulation(method, rounds=ROUNDS, out=Path(tmp) / "run", overrides=config)
            if not result.ok:
                sys.exit(f"{name} flush={flush} failed; see the log above")
            rounds = {r["round"]: r for r in read_run(Path(tmp) / "run")["rounds"] if r.get("round", 0) >= 1}
    finally:
        if old is None:
            os.environ.pop(FLUSH_ENV, None)
        else:
            os.environ[FLUSH_ENV] = old
    last = rounds[ROUNDS]
    row = {
        "windows": [statistics.median(rounds[r]["time_s"] for r in range(a, b + 1)) for a, b in WINDOWS],
        "wall_s": result.wall_time_s,
        "rounds_s": sum(r["time_s"] for r in rounds.values()),
        "accuracy": last.get("mean_client_accuracy") if name.startswith("fedstar") else last.get("accuracy"),
        "times": [round(rounds[r]["time_s"], 4) for r in sorted(rounds)],
    }
    return {"settings": {"preset": preset, **extra, "rounds": ROUNDS, "flush": flush}, "row": row}


def report(store: CellStore) -> str:
    rows = []
    for name in RUNS:
        for flush in ("off", "on"):
            record = store.load(f"{name}-flush-{flush}")
            if record is None:
                rows.append([name, flush] + ["-"] * 7)
                continue
            r = record["row"]
            first, mid, late = r["windows"]
            acc = "-" if r["accuracy"] is None else f"{100 * r['accuracy']:.2f}"
            times = [f"{first:.3f}", f"{mid:.3f}", f"{late:.3f}", f"{late / first:.2f}x"]
            rows.append([name + store.flag(record), flush, *times, f"{r['rounds_s']:.0f}", f"{r['wall_s']:.0f}", acc])
    header = ["run", "flush", "rounds 1-10 s", "rounds 91-100 s", "rounds 191-200 s", "191-200 / 1-10"]
    header += ["training rounds s", "run wall s", "final accuracy %"]
    missing = store.load("fedstar-chem-flush-off") is None
    notes = [render("round_drift/fedstar_off_missing")] if missing else []
    return "\n\n".join([render("round_drift/setting"), table(header, rows), *notes, render("round_drift/denormals")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument("--flush", nargs="+", choices=("off", "on"), default=["off", "on"])
    parser.add_argument("--tables-only", action="store_true", help="rewrite the table from the stored runs")
    parser.add_argument("--rerun", action="store_true", help="run cells again even if stored for this code")
    args = parser.parse_args()
    store = CellStore("round_drift")
    if not args.tables_only:
        for name in args.runs:
            for flush in args.flush:
                cell = f"{name}-flush-{flush}"
                if store.current(store.load(cell)) and not args.rerun:
                    print(f"{cell}: stored for this code, skipped")
                    continue
                print(f"== {cell}", flush=True)
                out = run_one(name, flush)
                store.save(cell, out["settings"], out["row"])
    write_result("round_drift", "Round time over 200 rounds, with and without flushing denormals", report(store))


if __name__ == "__main__":
    main()
