"""FedGCN side by side with the fedgraph library (PyPI fedgraph 0.2.5, by the FedGCN authors) on this machine.

Same setting for both: Cora, 10 clients, Dirichlet beta=10000, 100 rounds, 3 local steps, SGD lr 0.5, GCN hidden
16, evaluation every round. For every seed the runs are interleaved (fedgraph 1-hop, ours 1-hop, ours 2-hop), each
a separate process started by this script, so start-up, data loading and shutdown count for both and machine noise
hits both alike. Measured per run: final test accuracy, wall time of the whole process, bytes, and the peak of the
summed PSS over the process and all its descendants (Ray workers, Flower's SuperLink and actors), sampled every
second.

fedgraph runs through ../shared/anchors/fedgraph/fg_run_one.py (offline wrapper around its unmodified
``run_fedgraph``) in the venv that ../shared/anchors/fedgraph/setup.sh builds (default /tmp/fg_venv; build it
first). Its 2-hop mode runs the same code path as 1-hop in 0.2.5 (RESULTS.md there), so only 1-hop is run.
Its byte counts are its own theoretical accounting (MiB, converted to MB here); ours are the payload bytes that
went to and from clients.

    bash ../shared/anchors/fedgraph/setup.sh        # once: /tmp/fg_venv
    .venv/bin/python reproductions/fedgcn/vs_fedgraph.py [--seeds 0 1 2] [--rounds 100] [--dataset Cora]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.cells import remove_run_folder  # noqa: E402
from reproductions._runner.common import REPO, data_dir, mean_std, table, write_result  # noqa: E402
from reproductions._runner.processes import run_measured  # noqa: E402

from flowergraph.app.runtime import stop_processes  # noqa: E402

ANCHOR = REPO.parent / "shared" / "anchors" / "fedgraph"
MIB = 2**20


def _kill_marked(marker: str) -> list[int]:
    """Stop (by PID) any process whose command line names this run's private Ray folder: Ray daemonises its GCS
    and raylet out of the run's process tree, so the tree alone does not find them."""
    import psutil

    victims = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.info["pid"] != os.getpid() and marker in " ".join(p.info["cmdline"] or []):
                victims.append(p)
        except psutil.Error:
            pass
    stop_processes(victims)
    return [p.pid for p in victims]


def _measured(cmd: list[str], log: Path, env: dict | None = None, timeout: float = 1800) -> tuple[int, float, float]:
    """Run ``cmd`` as its own process group; (exit code, wall s, peak summed PSS MB over its tree)."""
    r = run_measured(cmd, log, timeout=timeout, cwd=REPO, env=env)  # past the timeout: the whole tree is stopped
    return r["rc"], r["wall_s"], r["peak"] / MIB


def run_fedgraph(venv_python: str, dataset: str, seed: int, rounds: int, work: Path) -> dict:
    ray_tmp = f"/tmp/fgb_ray_{os.getpid()}_{seed}"
    env = dict(
        os.environ, FG_WORKDIR=str(work / "fg_work"), FG_RAY_TMP=ray_tmp, PYTHONUNBUFFERED="1", FG_DATA_DIR=data_dir()
    )
    log = work / f"fedgraph-{dataset}-s{seed}.log"
    cmd = [
        venv_python,
        str(ANCHOR / "fg_run_one.py"),
        "--dataset",
        dataset.lower(),
        "--method",
        "FedGCN",
        "--hops",
        "1",
        "--rounds",
        str(rounds),
        "--trainers",
        "10",
        "--seed",
        str(seed),
    ]
    rc, wall, peak = _measured(cmd, log, env)
    leftovers = _kill_marked(ray_tmp)
    shutil.rmtree(ray_tmp, ignore_errors=True)
    res = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("FG_RESULT "):
            res = json.loads(line[len("FG_RESULT ") :])
    if rc != 0 or res.get("status") != "ok":
        sys.exit(f"fedgraph run failed (exit {rc}); see {log}")
    pre = (res.get("lib_theor_pretrain_comm_mb") or 0.0) * MIB
    train = (res.get("lib_theor_train_comm_mb") or 0.0) * MIB
    return {
        "who": "fedgraph 0.2.5 FedGCN 1-hop",
        "seed": seed,
        "acc": res["final_test_acc"],
        "wall": wall,
        "peak_mb": peak,
        "pre_bytes": pre,
        "total_bytes": pre + train,
        "leftovers": leftovers,
        "pre_s": (res.get("lib_pretrain_ms") or 0.0) / 1000,
    }


def run_ours(dataset: str, hops: int, seed: int, rounds: int, work: Path) -> dict:
    out = work / f"ours-{dataset}-h{hops}-s{seed}"
    remove_run_folder(out)
    preset = REPO / "conf" / f"fedgcn-{dataset.lower()}.toml"
    cmd = [
        sys.executable,
        "-m",
        "flowergraph.simulation",
        "--config",
        str(preset),
        "--rounds",
        str(rounds),
        "--set",
        f"fedgcn.hops={hops}",
        "--set",
        f"seed={seed}",
        "--data-dir",
        data_dir(),
        "--out",
        str(out),
    ]
    rc, wall, peak = _measured(cmd, work / f"ours-{dataset}-h{hops}-s{seed}.log")
    if rc != 0:
        sys.exit(f"our run failed (exit {rc}); see {work / f'ours-{dataset}-h{hops}-s{seed}.log'}")
    from flowergraph.storage import read_run

    run = read_run(out)
    phase = (
        next(r for r in run["rounds"] if r["round"] == 0) if hops else {"bytes_up": 0, "bytes_down": 0, "time_s": 0.0}
    )
    s = run["summary"]
    return {
        "who": f"flowergraph FedGCN {hops}-hop",
        "seed": seed,
        "acc": s["final_accuracy"],
        "wall": wall,
        "peak_mb": peak,
        "pre_bytes": phase["bytes_up"] + phase["bytes_down"],
        "total_bytes": s["bytes_up"] + s["bytes_down"],
        "pre_s": phase["time_s"],
        "leftovers": [],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--dataset", default="Cora", choices=["Cora", "CiteSeer"])
    parser.add_argument("--fg-venv", default=os.environ.get("FG_VENV", "/tmp/fg_venv"))
    args = parser.parse_args()
    venv_python = str(Path(args.fg_venv) / "bin" / "python")
    if not Path(venv_python).exists():
        sys.exit(f"{venv_python} not found: build the fedgraph venv first (bash {ANCHOR / 'setup.sh'})")
    work = Path(tempfile.mkdtemp(prefix="fedgcn-vs-fedgraph-"))
    runs = []
    try:
        for seed in args.seeds:
            for job in ("fedgraph", 1, 2):
                r = (
                    run_fedgraph(venv_python, args.dataset, seed, args.rounds, work)
                    if job == "fedgraph"
                    else run_ours(args.dataset, job, seed, args.rounds, work)
                )
                print(
                    f"{r['who']} seed {seed}: acc {r['acc']:.4f} wall {r['wall']:.1f} s peak {r['peak_mb']:.0f} MB "
                    f"pre-training {r['pre_bytes'] / 1e6:.2f} MB",
                    flush=True,
                )
                runs.append(r)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    body = (
        f"{args.dataset}, 10 clients, Dirichlet beta=10000, {args.rounds} rounds, 3 local steps, SGD lr 0.5, GCN "
        f"hidden 16, public split; seeds {args.seeds}, runs interleaved per seed (fedgraph, ours 1-hop, ours "
        f"2-hop), each a whole process from interpreter start to exit. Ours: conf/fedgcn-{args.dataset.lower()}.toml "
        f"through Flower's Ray simulation (`python -m flowergraph.simulation`), 2 actors (1 CPU each); fedgraph: "
        f"its own Ray runtime with 10 trainer actors on 2 CPUs (0.2 CPU each), as in its RESULTS.md.\n\n"
        + comparison(runs)
        + "\n\nBytes: ours are payload bytes to and from clients (arrays and metrics as they travel); fedgraph's are "
        "its own theoretical figures (dense N x d uploads; MiB converted to MB). Memory: peak of the summed PSS "
        "(shared pages split between processes) over the launched process and all descendants, sampled every "
        "second. fedgraph's 2-hop runs the 1-hop code path in 0.2.5 (../shared/anchors/fedgraph/RESULTS.md), "
        "so it is not repeated here; its reference numbers there: Cora 1-hop 0.787 ± 0.009, 86 s, 378.7 MiB, "
        "~4.8 GB.\n"
    )
    write_result(
        f"fedgcn_vs_fedgraph{'' if args.dataset == 'Cora' else '_' + args.dataset.lower()}",
        f"FedGCN vs the fedgraph library, {args.dataset}",
        body,
    )


def comparison(runs: list[dict]) -> str:
    """Each run kind's accuracy, wall time, bytes and memory, against fedgraph's of the same seed."""
    whos = list(dict.fromkeys(r["who"] for r in runs))
    base = {r["seed"]: r for r in runs if r["who"].startswith("fedgraph")}
    rows = []
    for who in whos:
        g = [r for r in runs if r["who"] == who]
        ratios = [r["wall"] / base[r["seed"]]["wall"] for r in g]
        mem_ratio = [r["peak_mb"] / base[r["seed"]]["peak_mb"] for r in g]
        pre = statistics.mean(r["pre_bytes"] for r in g)
        rows.append(
            [
                who,
                mean_std([r["acc"] for r in g]),
                " / ".join(f"{r['acc']:.3f}" for r in g),
                mean_std([r["wall"] for r in g]),
                f"{statistics.median(ratios):.2f}",
                f"{pre / 1e6:.2f}",
                f"{statistics.mean(base[r['seed']]['pre_bytes'] for r in g) / pre:.1f}x" if pre else "-",
                f"{statistics.mean(r['total_bytes'] for r in g) / 1e6:.1f}",
                f"{statistics.mean(r['peak_mb'] for r in g):.0f}",
                f"{statistics.median(mem_ratio):.2f}",
            ]
        )
    columns = ["run", "final test acc", "per seed", "wall s", "wall / fedgraph (median)", "pre-training MB"]
    columns += ["fedgraph pre-training / ours", "total MB", "peak memory MB (all processes)"]
    return table(columns + ["memory / fedgraph (median)"], rows)


if __name__ == "__main__":
    main()
