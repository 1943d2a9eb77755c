"""The cells of ``benchmarks/privacy_cost.py``: a simulation run per (method, secure-agg, seed) (:func:`run_cell`), a
loopback deployment per secure-agg (:func:`run_deployment`), each kept in ``results/bench-privacy-cost/`` and
skipped next time; and CKKS's cryptography per round timed in this process (:func:`ckks_protocol_times`). The
tables are ``privacy_cost_report.py``."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import REPO, data_dir  # noqa: E402
from reproductions._runner.processes import run_measured  # noqa: E402

from flowergraph.storage import read_run  # noqa: E402

MODES = ("none", "secagg+", "ckks")
# method -> (preset, extra --set values, label)
PRESETS = {
    "fedavg": ("fedavg-cora.toml", [], "fedavg"),
    "fedgcn": ("fedgcn-cora.toml", ["fedgcn.hops=2"], "FedGCN 2-hop"),
    "noop": ("fedavg-cora.toml", ['method="noop"'], "no-op clients (floor)"),
    "fedstar": ("fedstar-chem.toml", [], "FedStar, CHEM"),
}
CELLS = REPO / "results" / "bench-privacy-cost"
TARGET = {"secagg+": 2.0, "ckks": 4.0}
POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"


def cell_dir(method: str, mode: str, seed: int, rounds: int) -> Path:
    return CELLS / f"{method}-{mode.replace('+', 'plus')}-s{seed}-r{rounds}"


def late_accuracy(method: str, mode: str, seed: int, rounds: int, last: int = 20) -> float | None:
    """The accuracy averaged over the last ``last`` rounds (the paper's metric for FedStar): steadier than the
    final round's when per-client test sets are small."""
    run = read_run(cell_dir(method, mode, seed, rounds) / "run")
    key = "mean_client_accuracy" if method == "fedstar" else "accuracy"
    values = [r[key] for r in run["rounds"] if r.get("round", 0) > rounds - last and r.get(key) is not None]
    return statistics.mean(values) if values else None


def stage_medians(rounds: list[dict]) -> list[float]:
    """SecAgg+: each stage's time (s), its median over ``rounds`` (the server's grid records them)."""
    return [
        statistics.median(stage)
        for stage in zip(*[[st["time_s"] for st in r["fit_stages"]] for r in rounds if r.get("fit_stages")])
    ]


def run_cell(method: str, mode: str, seed: int, rounds: int) -> dict:
    cell = cell_dir(method, mode, seed, rounds)
    done = cell.with_suffix(".json")
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    preset, extra, _ = PRESETS[method]
    cmd = [sys.executable, "-m", "flowergraph.simulation", "--config", str(REPO / "conf" / preset)]
    cmd += ["--rounds", str(rounds), "--data-dir", data_dir(), "--out", str(cell / "run"), "--set", f"seed={seed}"]
    cmd += ["--set", f'secure-agg="{mode}"', "--timeout", "7200"]
    for value in extra:
        cmd += ["--set", value]
    log = cell / "launcher.log"
    print(f"[{time.strftime('%H:%M:%S')}] {method} secure-agg={mode} seed {seed}: running ...", flush=True)
    measured = run_measured(cmd, log, timeout=7500, cwd=REPO)
    rc, wall = measured["rc"], measured["wall_s"]
    if rc != 0:
        sys.exit(f"{method} secure-agg={mode} seed {seed} failed (exit {rc}); see {log}")
    run = read_run(cell / "run")
    training = [r for r in run["rounds"] if r.get("round", 0) >= 1 and not r.get("phase")]
    later = [r["time_s"] for r in training if r["round"] >= 2]
    summary = run["summary"]
    accuracy = summary.get("final_mean_client_accuracy") if method == "fedstar" else summary.get("final_accuracy")
    result = {
        "method": method,
        "mode": mode,
        "seed": seed,
        "rounds": rounds,
        "accuracy": accuracy,
        "round_s": statistics.median(later),
        "bytes_up": sum(r.get("bytes_up", 0) for r in training),
        "bytes_down": sum(r.get("bytes_down", 0) for r in training),
        "peak_mb": measured["peak"] / 2**20,
        "wall_s": wall,
        "distinct": sorted({(r.get("secure_agg") or {}).get("distinct_payloads", -1) for r in training}),
        "stages_s": stage_medians([r for r in training if r["round"] >= 2]),
    }
    done.write_text(json.dumps(result, indent=2))
    print(
        f"    acc {result['accuracy'] or 0:.4f}, round {result['round_s']:.3f} s, peak {result['peak_mb']:.0f} MB, "
        f"wall {wall:.0f} s",
        flush=True,
    )
    return result


def run_deployment_cell(mode: str, rounds: int, poll: float | None = None, nodes: int = 3) -> dict:
    """fedavg on Cora over a loopback deployment (TLS, SuperNode authentication) with ``secure-agg=mode``."""
    from flowergraph.deployment import run_deployment

    name = f"deploy-fedavg-{mode.replace('+', 'plus')}-n{nodes}-r{rounds}" + (f"-poll{poll:g}" if poll else "")
    cell = CELLS / name
    done = CELLS / f"{name}.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    print(
        f"[{time.strftime('%H:%M:%S')}] deployment fedavg secure-agg={mode}{f' poll {poll:g} s' if poll else ''}: "
        f"running ...",
        flush=True,
    )
    saved = os.environ.get(POLL_ENV)
    if poll:
        os.environ[POLL_ENV] = str(poll)  # inherited by every SuperNode, hence by its flower-superexec
    try:
        with open(cell / "launcher.log", "w") as log:
            result = run_deployment(
                "fedavg",
                nodes,
                rounds,
                {"seed": 0, "secure-agg": mode},
                cell / "run",
                data_dir(),
                dataset="Cora",
                timeout=3000,
                stream=log,
            )
    finally:
        if saved is None:
            os.environ.pop(POLL_ENV, None)
        else:
            os.environ[POLL_ENV] = saved
    if not result.ok:
        sys.exit(f"deployment {mode} failed ({result.status}); see {cell}")
    run = read_run(result.out_dir)
    training = [r for r in run["rounds"] if r.get("round", 0) >= 1 and not r.get("phase")]
    later = [r for r in training if r["round"] >= 2]
    out = {
        "mode": mode,
        "poll": poll,
        "rounds": rounds,
        "nodes": nodes,
        "wall_s": result.wall_time_s,
        "load_1min_after": os.getloadavg()[0],
        "round_s": statistics.median(r["time_s"] for r in later),
        "accuracy": run["summary"].get("final_accuracy"),
        "bytes_up": sum(r.get("bytes_up", 0) for r in training),
        "bytes_down": sum(r.get("bytes_down", 0) for r in training),
        "stages_s": stage_medians(later),
    }
    done.write_text(json.dumps(out, indent=2))
    print(f"    round {out['round_s']:.1f} s, wall {out['wall_s']:.0f} s", flush=True)
    return out


def import_cpu(modules: str, repeats: int = 3) -> float:
    """CPU seconds (user + system, median of ``repeats``) a fresh Python process spends importing ``modules``:
    what every ClientApp process pays before it handles its one message."""
    import resource

    samples = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", f"import {modules}"], check=True, cwd=str(REPO))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(samples)


def run_deployment(rounds: int) -> dict:
    """The deployment part: fedavg under each secure-agg, and SecAgg+ again with the SuperExec polling every 0.05 s
    (``cells``); the load average after them (``load``) and what a fresh ClientApp process spends importing, without
    and with torch and PyG (``import_app``, ``import_torch``, CPU s)."""
    cells = [run_deployment_cell(mode, rounds) for mode in MODES]
    cells.append(run_deployment_cell("secagg+", rounds, poll=0.05))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" (1, 5, 15 min) on {os.cpu_count()} cores"
    imp_app = import_cpu("flwr.supernode.runtime.run_clientapp, flwr.client.mod, flowergraph.app.client_app")
    imp_torch = import_cpu("flwr.supernode.runtime.run_clientapp, flowergraph.app.client_app, torch, torch_geometric")
    return {"cells": cells, "load": load, "import_app": imp_app, "import_torch": imp_torch}


def ckks_protocol_times(values: int = 23063, clients: int = 10, repeats: int = 3) -> dict:
    """The CPU cost of one CKKS round's cryptography in one process, before and after issue 19's checks, for
    fedavg's Cora model (23,063 parameters) and 10 clients: every client encrypts, the server parses and adds,
    one client decrypts (after: also verifies every check ciphertext and floods). ``runs``: per protocol,
    ``repeats`` times the CPU seconds of each step and the bytes of one upload."""
    import numpy as np

    from flowergraph.privacy import ckks
    from flowergraph.privacy.packing import pack_blobs

    ctx = ckks.create_secret_context()
    server = ckks.load_server_context(ckks.server_context_bytes(ctx))
    key = ckks.check_key(ctx)
    rng = np.random.default_rng(0)
    payloads = [rng.normal(size=values + 1) for _ in range(clients)]

    def before():
        t = {"encrypt (all clients)": 0.0, "parse and add (server)": 0.0, "decrypt (one client)": 0.0}
        t0 = time.process_time()
        uploads = [ckks.encrypt_vector(ctx, p) for p in payloads]
        t["encrypt (all clients)"] = time.process_time() - t0
        t0 = time.process_time()
        acc = ckks.CiphertextSum(server)
        for blobs in uploads:
            acc.add(np.arange(len(blobs)), blobs)
        sums = acc.serialized(np.arange(len(uploads[0])))
        t["parse and add (server)"] = time.process_time() - t0
        t0 = time.process_time()
        ckks.decrypt_vector(ctx, sums, values + 1)
        t["decrypt (one client)"] = time.process_time() - t0
        return t, pack_blobs(uploads[0])[1].size

    def after():
        t = {}
        t0 = time.process_time()
        uploads = [ckks.encrypt_checked(ctx, p, key, 1, k) for k, p in enumerate(payloads)]
        t["encrypt (all clients)"] = time.process_time() - t0
        t0 = time.process_time()
        acc = ckks.CiphertextSum(server)
        for blobs in uploads:
            vectors = acc.parse(blobs[:-1], size=ckks.num_slots(server))
            acc.parse(blobs[-1:], size=ckks.num_slots(server))
            acc.add_parsed(np.arange(len(vectors)), vectors)
        sums = acc.serialized(np.arange(len(uploads[0]) - 1))
        t["parse and add (server)"] = time.process_time() - t0
        t0 = time.process_time()
        assert all(ckks.check_ciphertext_ok(ctx, u[-1], ckks.check_key(ctx), 1, k) for k, u in enumerate(uploads))
        ckks.decrypt_checked(ctx, sums, values + 1, ckks.check_key(ctx), 1, list(range(clients)))
        t["decrypt (one client)"] = time.process_time() - t0
        return t, pack_blobs(uploads[0])[1].size

    runs = {
        "before issue 19": [before() for _ in range(repeats)],
        "after (checks, flooding)": [after() for _ in range(repeats)],
    }
    return {"values": values, "clients": clients, "repeats": repeats, "runs": runs}
