"""What secure aggregation of the training rounds costs (issue 10): fedavg and FedGCN 2-hop on Cora, 10 clients,
100 rounds (the presets conf/fedavg-cora.toml and conf/fedgcn-cora.toml), with ``secure-agg`` none / secagg+ /
ckks, in Flower's Ray simulation (SecAgg+ needs Flower's transport).

Per run: final test accuracy (whole graph), the median per-round time over rounds 2..R (round 1 carries the
actors' start-up; FedGCN's one-off exchange is round 0 and not counted), its ratio to ``none`` of the same method
and seed measured in this script (the runs of one (method, seed) follow each other), bytes each way over all
rounds (SecAgg+: counted on the server's grid, every stage included), and the peak of the summed PSS over the
launcher's whole process tree (server, Ray, every client actor). Targets: accuracy within 0.5 points of none,
secagg+ <= 2x none per round, ckks <= 4x.

Two more rows put the ratios in context. ``noop`` (fedavg's preset with clients that return what they receive)
is each protocol's own floor: SecAgg+ runs four message stages per round (key advertisement, key shares, masked
update, unmasking), each paying Flower's per-stage cost, so its overhead is an additive number of seconds per
round, and the ratio to ``none`` depends on how long local training takes. ``fedstar`` (FedStar on CHEM, 7
clients, the paper's 1 local epoch of mini-batch Adam) is a setting whose rounds do real work; accuracy there is
the paper's mean client accuracy.

The deployment part (``--parts deployment``) runs fedavg on Cora over a loopback deployment with TLS and
SuperNode authentication (:class:`flowergraph.deployment.loopback.LoopbackDeployment`, 3 SuperNodes, a few
rounds) with each ``secure-agg``: the real cost, where every message (and each SecAgg+ stage) starts a ClientApp
process. A fourth run repeats SecAgg+ with ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.05`` (Flower's SuperExec polls for
pending ClientApp tasks every 1 s by default), to measure that lever on the per-stage cost.

Resumable: each finished run is kept in ``results/bench-privacy-cost/<cell>.json`` and skipped next time.

    .venv/bin/python benchmarks/privacy_cost.py [--rounds 100] [--seeds 0] [--methods fedavg,fedgcn,noop,fedstar]
        [--parts simulation,ckks-protocol,deployment] [--deploy-rounds 4]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, TreeMemorySampler, data_dir, table, write_result  # noqa: E402
import noop_methods  # noqa: E402

from flowergraph.storage.results import read_run  # noqa: E402
from flowergraph.app.runtime import kill_tree  # noqa: E402

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


def cell_dir(method: str, mode: str, seed: int, rounds: int) -> Path:
    return CELLS / f"{method}-{mode.replace('+', 'plus')}-s{seed}-r{rounds}"


def late_accuracy(method: str, mode: str, seed: int, rounds: int, last: int = 20) -> float | None:
    """The accuracy averaged over the last ``last`` rounds (the paper's metric for FedStar): steadier than the
    final round's when per-client test sets are small."""
    run = read_run(cell_dir(method, mode, seed, rounds) / "run")
    key = "mean_client_accuracy" if method == "fedstar" else "accuracy"
    values = [r[key] for r in run["rounds"] if r.get("round", 0) > rounds - last and r.get(key) is not None]
    return statistics.mean(values) if values else None


def run_cell(method: str, mode: str, seed: int, rounds: int) -> dict:
    cell = cell_dir(method, mode, seed, rounds)
    done = cell.with_suffix(".json")
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(cell, ignore_errors=True)
    cell.mkdir(parents=True)
    preset, extra, _ = PRESETS[method]
    cmd = [
        sys.executable,
        "-m",
        "flowergraph.simulation",
        "--config",
        str(REPO / "conf" / preset),
        "--rounds",
        str(rounds),
        "--data-dir",
        data_dir(),
        "--out",
        str(cell / "run"),
        "--set",
        f"seed={seed}",
        "--set",
        f'secure-agg="{mode}"',
        "--timeout",
        "7200",
    ]
    for value in extra:
        cmd += ["--set", value]
    log = cell / "launcher.log"
    print(f"[{time.strftime('%H:%M:%S')}] {method} secure-agg={mode} seed {seed}: running ...", flush=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), start_new_session=True)
        with TreeMemorySampler(proc.pid) as mem:
            try:
                rc = proc.wait(timeout=7500)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                rc = proc.wait()
    wall = time.monotonic() - t0
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
        "peak_mb": mem.peak_mb,
        "wall_s": wall,
        "distinct": sorted({(r.get("secure_agg") or {}).get("distinct_payloads", -1) for r in training}),
        # SecAgg+: each stage's time (s), median over rounds 2..R (recorded by the server's grid)
        "stages_s": [
            statistics.median(stage)
            for stage in zip(
                *[[st["time_s"] for st in r["fit_stages"]] for r in training if r["round"] >= 2 and r.get("fit_stages")]
            )
        ],
    }
    done.write_text(json.dumps(result, indent=2))
    print(
        f"    acc {result['accuracy'] or 0:.4f}, round {result['round_s']:.3f} s, peak {result['peak_mb']:.0f} MB, "
        f"wall {wall:.0f} s",
        flush=True,
    )
    return result


STAGE_NAMES = ["setup (key advertisement)", "share keys", "collect masked vectors (local training)", "unmask"]
POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"


def run_deployment_cell(mode: str, rounds: int, poll: float | None = None, nodes: int = 3) -> dict:
    """fedavg on Cora over a loopback deployment (TLS, SuperNode authentication) with ``secure-agg=mode``."""
    import os

    from flowergraph.deployment.loopback import run_deployment

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
        "stages_s": [
            statistics.median(stage)
            for stage in zip(*[[st["time_s"] for st in r["fit_stages"]] for r in later if r.get("fit_stages")])
        ],
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


def _run_label(c: dict) -> str:
    return c["mode"] + (f", SuperExec poll {c['poll']:g} s" if c["poll"] else "")


def deployment_section(rounds: int) -> str:
    import os

    cells = [run_deployment_cell(mode, rounds) for mode in MODES]
    cells.append(run_deployment_cell("secagg+", rounds, poll=0.05))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" (1, 5, 15 min) on {os.cpu_count()} cores"
    imp_app = import_cpu("flwr.supernode.runtime.run_clientapp, flwr.client.mod, flowergraph.app.client_app")
    imp_torch = import_cpu("flwr.supernode.runtime.run_clientapp, flowergraph.app.client_app, torch, torch_geometric")
    base = cells[0]["round_s"]
    rows = [
        [
            _run_label(c),
            f"{100 * c['accuracy']:.2f}" if c.get("accuracy") is not None else "-",
            f"{c['round_s']:.1f}",
            f"{c['round_s'] / base:.2f}",
            f"{c['bytes_up'] / 1e6:.2f}",
            f"{c['bytes_down'] / 1e6:.2f}",
            f"{c['wall_s']:.0f}",
        ]
        for c in cells
    ]
    stage_rows = [
        [_run_label(c)] + [f"{t:.1f}" for t in c["stages_s"]] + [f"{sum(c['stages_s']):.1f}", f"{c['round_s']:.1f}"]
        for c in cells
        if c.get("stages_s")
    ]
    return (
        "\n\n## Over a real deployment (loopback, TLS + SuperNode authentication)\n\n"
        f"fedavg on Cora (public split), 3 SuperNodes on this machine, {rounds} rounds, seed 0, "
        "`flowergraph.deployment.loopback.LoopbackDeployment` (`python -m flowergraph.deployment loopback`); "
        f"round time: median over rounds 2..{rounds} of the server's round clock. Every message to a node "
        "starts a fresh ClientApp process (`flwr-clientapp` handles one message and exits).\n\n"
        + table(
            [
                "secure-agg",
                "final test acc %",
                "round s",
                "round time / none",
                "MB up",
                "MB down",
                "wall s (start-up included)",
            ],
            rows,
        )
        + "\n\n**SecAgg+ per stage in the deployment** (seconds, median over rounds 2..R):\n\n"
        + table(["run"] + STAGE_NAMES + ["sum of stages", "whole round"], stage_rows)
        + f"\n\nLoad average when this section was written: {load}"
        + (
            "; 1-minute load at the end of each run: "
            + ", ".join(f"{_run_label(c)} {c['load_1min_after']:.0f}" for c in cells if "load_1min_after" in c)
            if any("load_1min_after" in c for c in cells)
            else " (the runs' own loads were not recorded; 19 to 29 was read during them): the machine was "
            "shared with other work, which inflates every wall time here several-fold"
        )
        + "."
        + "\n\n**Can SecAgg+'s per-stage cost be cut?** What one stage costs on a node, from Flower 1.41's "
        "source and measured here: (1) the SuperNode pulls messages in a loop that sleeps 3 s whenever it "
        "finds none (`time.sleep(3)` in `flwr/supernode/start_client_internal.py`, not configurable): up to "
        "3 s, 1.5 s on average, before a stage's message is even seen; (2) its SuperExec polls for pending "
        "ClientApp tasks every `FLWR_SUPEREXEC_TASK_POLL_INTERVAL` s (default 1, settable 0.01-60): 0.5 s "
        "on average; (3) a new `flwr-clientapp` process per message (in 1.41 it pulls the one task of its "
        "token, runs the ClientApp once and exits, in `subprocess` and `process` isolation alike, so the "
        "SuperNode cannot keep the app warm), which installs the FAB and imports Flower and the app: "
        f"{imp_app:.2f} CPU s for `flowergraph.app.client_app` (its imports are lazy: no torch, no data), "
        f"{imp_torch:.2f} CPU s when the stage trains and needs torch and PyG (only the masked-vector stage "
        "does: `secaggplus_mod` answers the other three itself, without calling the client); (4) the "
        "SuperNode checks for the reply every 0.5 s. On an idle machine that is ~3-4 s per non-training "
        "stage, about 2.5 s of it Flower's fixed polling; three processes per stage on two shared cores "
        "stretch it to the table's 12-16 s. The one setting we have, the SuperExec poll at 0.05 s, can save "
        "~0.5 s per stage (2 s per round); in the runs above it is lost in the load (the load rose during "
        "the second run). Pipelining is not available either: each SecAgg+ stage needs the previous "
        "stage's replies, and `SecAggPlusWorkflow` runs one round's four stages in sequence; overlapping the "
        "next round's key advertisement and key sharing with this round's unmasking would mean forking "
        "Flower's protocol. What does cut the cost: fewer stages' worth of process starts (CKKS needs one "
        "extra message per round, not three: 1.4x here against SecAgg+'s 2.3x), and a faster node machine."
    )


def ckks_protocol_section(values: int = 23063, clients: int = 10, repeats: int = 3) -> str:
    """The CPU cost of one CKKS round's cryptography in one process, before and after issue 19's checks, for
    fedavg's Cora model (23,063 parameters) and 10 clients: every client encrypts, the server parses and adds,
    one client decrypts (after: also verifies every check ciphertext and floods)."""
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
    names = ["encrypt (all clients)", "parse and add (server)", "decrypt (one client)"]
    rows = []
    for label, results in runs.items():
        med = {n: statistics.median(r[0][n] for r in results) for n in names}
        rows.append(
            [label] + [f"{med[n]:.3f}" for n in names] + [f"{sum(med.values()):.3f}", f"{results[0][1] / 1e3:.0f}"]
        )
    return (
        "\n\n**CKKS's cryptography per round, before and after issue 19's checks** (one process, "
        f"CPU seconds (process time: the machine is shared), median of {repeats}; fedavg's Cora model, {values:,} "
        f"parameters, {clients} "
        "clients; the simulation table above was measured before the change):\n\n"
        + table(["protocol"] + [f"{n} s" for n in names] + ["total s", "KB per upload"], rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seeds", default="0", help="comma-separated")
    parser.add_argument(
        "--methods", default="fedavg,fedgcn,noop,fedstar", help=f"comma-separated: {', '.join(PRESETS)}"
    )
    parser.add_argument(
        "--parts",
        default="simulation,ckks-protocol,deployment",
        help="comma-separated: simulation (the tables of the Ray simulation), ckks-protocol (CKKS's "
        "cryptography per round before and after issue 19), deployment (the loopback rows); "
        "without simulation the other parts are printed and kept in "
        "results/bench-privacy-cost/extra.md",
    )
    parser.add_argument("--deploy-rounds", type=int, default=4)
    args = parser.parse_args()
    noop_methods.enable()  # --methods noop: the launcher subprocess and its simulation get the plugin
    parts = [p.strip() for p in args.parts.split(",")]
    CELLS.mkdir(parents=True, exist_ok=True)
    deploy = ckks_protocol_section() if "ckks-protocol" in parts else ""
    deploy += deployment_section(args.deploy_rounds) if "deployment" in parts else ""
    if "simulation" not in parts:
        (CELLS / "extra.md").write_text(deploy.strip() + "\n")
        print(deploy)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    unknown = [m for m in methods if m not in PRESETS]
    if unknown:
        parser.error(f"unknown method {unknown[0]!r}; valid choices: {', '.join(PRESETS)}")
    CELLS.mkdir(parents=True, exist_ok=True)
    results = {(m, mode, s): run_cell(m, mode, s, args.rounds) for m in methods for s in seeds for mode in MODES}
    rows, verdicts = [], []
    for m in methods:
        for mode in MODES:
            cells = [results[(m, mode, s)] for s in seeds]
            base = [results[(m, "none", s)] for s in seeds]
            ratio = statistics.median(c["round_s"] / b["round_s"] for c, b in zip(cells, base))
            has_acc = m != "noop"
            dacc = (
                statistics.mean(100 * (c["accuracy"] - b["accuracy"]) for c, b in zip(cells, base)) if has_acc else 0.0
            )
            extra_s = statistics.median(c["round_s"] - b["round_s"] for c, b in zip(cells, base))
            label = PRESETS[m][2]
            late = [late_accuracy(m, mode, s, args.rounds) for s in seeds] if has_acc else []
            late_base = [late_accuracy(m, "none", s, args.rounds) for s in seeds] if has_acc else []
            late_text = (
                "-"
                if not has_acc
                else f"{100 * statistics.mean(late):.2f}"
                + ("" if mode == "none" else f" ({100 * statistics.mean(a - b for a, b in zip(late, late_base)):+.2f})")
            )
            rows.append(
                [
                    label,
                    mode,
                    f"{100 * statistics.mean(c['accuracy'] for c in cells):.2f}" if has_acc else "-",
                    "-" if mode == "none" or not has_acc else f"{dacc:+.2f}",
                    late_text,
                    f"{statistics.mean(c['round_s'] for c in cells):.3f}",
                    "1.00" if mode == "none" else f"{ratio:.2f}",
                    "-" if mode == "none" else f"{extra_s:+.3f}",
                    f"{statistics.mean(c['bytes_up'] for c in cells) / 1e6:.1f}",
                    f"{statistics.mean(c['bytes_down'] for c in cells) / 1e6:.1f}",
                    f"{max(c['peak_mb'] for c in cells):.0f}",
                ]
            )
            if mode != "none" and has_acc:  # every method with an accuracy (FedStar too: issue 19)
                ok_acc = abs(dacc) <= 0.5
                ok_time = ratio <= TARGET[mode]
                dlate = statistics.mean(a - b for a, b in zip(late, late_base)) * 100
                verdicts.append(
                    f"{label} {mode}: accuracy {dacc:+.2f} points final, {dlate:+.2f} over the last 20 "
                    f"rounds ({'met' if ok_acc else 'MISSED'}: final within 0.5), round time {ratio:.2f}x "
                    f"({'met' if ok_time else 'MISSED'}: <= {TARGET[mode]:.0f}x)"
                )
    staged = [
        (PRESETS[m][2], results[(m, "secagg+", seeds[0])])
        for m in methods
        if results[(m, "secagg+", seeds[0])].get("stages_s")
    ]
    stage_table = ""
    if staged:
        names = STAGE_NAMES
        stage_table = (
            "\n\n**Where a SecAgg+ round goes** (seconds per stage, median over rounds 2..R, seed "
            f"{seeds[0]}; each stage is one message to every client and the replies, timed by the server's "
            "grid; the rest of the round is evaluation and the server's own work):\n\n"
            + table(
                ["method"] + names + ["sum of stages", "whole round"],
                [
                    [label] + [f"{t:.3f}" for t in c["stages_s"]] + [f"{sum(c['stages_s']):.3f}", f"{c['round_s']:.3f}"]
                    for label, c in staged
                ],
            )
        )
    body = (
        f"fedavg, FedGCN and the no-op floor: Cora (public split), 10 clients (Dirichlet beta 10000); FedStar: "
        f"CHEM, 7 clients (one dataset each), accuracy = mean client test accuracy. {args.rounds} rounds, the "
        f"presets' training settings, seed(s) {', '.join(map(str, seeds))}; Flower's Ray simulation, 1 CPU per "
        "client on 2 cores; the runs of one method follow each other. "
        "Round time: median over rounds 2..R of the server's round clock (training and evaluation); bytes: "
        "training rounds only (FedGCN's one-off exchange is identical in all three and excluded); memory: peak "
        "summed PSS over the launcher's process tree.\n\n"
        + table(
            [
                "method",
                "secure-agg",
                "final test acc %",
                "vs none (points)",
                "acc % over the last 20 rounds (vs none)",
                "round s",
                "round time / none",
                "extra s per round",
                "MB up",
                "MB down",
                "peak MB (all processes)",
            ],
            rows,
        )
        + "\n\n"
        + "\n".join(f"- {v}" for v in verdicts)
        + stage_table
        + "\n\nWhy SecAgg+ misses 2x here: each of its four stages is one message to every client, and Flower's "
        "simulation engine hands queued messages to the client actors on a fixed 0.1 s tick (`f_stop.wait(0.1)` "
        "in `flwr/server/superlink/fleet/vce/vce_api.py`), so a stage takes a multiple of 0.1 s however little "
        "it computes (the stage table: 0.10 / 0.20 / 0.20 / 0.10 s with no-op clients). That is ~0.5 s per "
        "round whatever the model, 2.4-2.5x the whole of a 0.21 s Cora round, and 0.27x of FedStar's 1.8 s "
        "round (1.27x). Nothing in flowergraph's or SecAgg+'s own code is on that path; in a deployment the "
        "stages cost network round trips and one ClientApp process start each instead."
        "\n\nFedStar's accuracy column: its per-client test sets are small (MUTAG 19 graphs, PTC_MR 34, BZR "
        "41: one graph moves the mean over 7 clients by 0.4-0.75 points), and runs that differ by CKKS's 1e-7 "
        "or SecAgg+'s 1e-6 quantisation diverge from round 2 on, so the last-20-rounds column is the steadier "
        "comparison; the seed-to-seed spread of FedStar on CHEM is in docs/results/fedstar.md."
        "\n\nSecAgg+ sends four messages per client per round (key advertisement, encrypted key shares, the "
        "masked update as the fit reply, unmasking shares) and the masked vector as integers; CKKS sends "
        "each update as ciphertexts (~32 B per value: 2048 slots per ciphertext of degree N = 4096, ~65.7 KB; "
        "about 8x the float32 update; since issue 19 one slot per ciphertext is a check value and each "
        "upload carries one more, check, ciphertext) and one client decrypts the sum in an extra message." + deploy
    )
    write_result("privacy_cost", "Secure aggregation of the training rounds: accuracy, time, bytes, memory", body)


if __name__ == "__main__":
    main()
