"""A flowergraph simulation on an existing multi-node Ray cluster, tried on loopback (docs/ray_cluster.md).

Starts a two-node Ray cluster on this machine exactly as the page says (``ray start --head`` and one
``ray start --address``, one CPU each), runs the launcher with ``RAY_ADDRESS`` pointing at the head, and records
which Ray node each client actor ran on (every second, each live ``ray::ClientAppActor`` process and the raylet it
is a child of). Then it stops every process the cluster started, by PID (they all carry this script's process-group
tag in their environment), and writes docs/results/ray_cluster.md.

    .venv/bin/python benchmarks/ray_cluster.py [--clients 4] [--rounds 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.common import table, write_result  # noqa: E402

from flowergraph.app.runtime import ProcessGroup, free_port, stop_processes  # noqa: E402
from flowergraph.storage import read_run  # noqa: E402

BIN = Path(sys.executable).parent


def _children(proc) -> list:
    try:
        return proc.children(recursive=True)
    except Exception:  # noqa: BLE001 (gone)
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    import psutil

    work = Path(tempfile.mkdtemp(prefix="fg-ray-cluster-"))
    port = free_port()
    ray = str(BIN / "ray")
    head_cmd = [ray, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard=false"]
    head_cmd += ["--disable-usage-stats", "--temp-dir", str(work / "ray")]
    node_cmd = [ray, "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--disable-usage-stats"]
    run_cmd = [sys.executable, "-m", "flowergraph.simulation", "--method", "fedavg", "--num-clients", str(args.clients)]
    run_cmd += ["--rounds", str(args.rounds), "--out", str(work / "run")]
    seen: dict[int, tuple[int, float]] = {}  # actor pid -> (its raylet pid, first seen)
    with ProcessGroup() as group:
        env = group.env(os.environ)
        try:
            for cmd in (head_cmd, node_cmd):
                subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=180)
            status = subprocess.run(
                [str(BIN / "ray"), "status", "--address", f"127.0.0.1:{port}"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
            nodes = sum(1 for line in status.splitlines() if line.strip().startswith("1 node_"))
            raylets = sorted(p.pid for p in group.members() if p.name() == "raylet")
            head_raylet = min(raylets) if raylets else None  # the head starts first
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.5):
                    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
                        cmd = " ".join(proc.info["cmdline"] or [])
                        if "ClientAppActor" in cmd and proc.info["ppid"] in raylets:
                            seen.setdefault(proc.info["pid"], (proc.info["ppid"], time.time()))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            proc = subprocess.run(
                run_cmd, env={**env, "RAY_ADDRESS": f"127.0.0.1:{port}"}, capture_output=True, text=True, timeout=900
            )
            wall = time.monotonic() - started
            done.set()
            sampler.join()
            run = read_run(work / "run") if (work / "run" / "summary.json").exists() else {"summary": {}}
        finally:
            # Ray's agents rename themselves (setproctitle), which can clobber the environment that carries the
            # group's tag: stop every descendant of the tagged processes too, each by PID
            descendants = {c.pid: c for m in group.members() for c in _children(m)}
            alive = [p for p in descendants.values() if p.is_running()]
            stop_processes(alive)
            stopped = group.stop() + [p.pid for p in alive]
            shutil.rmtree(work, ignore_errors=True)  # this run's own mkdtemp folder
    per_node = {r: sorted(a for a, (parent, _) in seen.items() if parent == r) for r in raylets}
    rows = [
        ["head" if r == head_raylet else "worker node", r, len(per_node[r]), ", ".join(map(str, per_node[r]))]
        for r in raylets
    ]
    summary = run["summary"]
    ok = (
        proc.returncode == 0
        and summary.get("status") == "completed"
        and nodes == 2
        and all(per_node[r] for r in raylets)
    )
    body = (
        f"Ray nodes in the cluster (`ray status`): **{nodes}**, one CPU each. The launcher ran with "
        f"`RAY_ADDRESS=127.0.0.1:<port>`; its exit status was {proc.returncode}, the run "
        f"{summary.get('status')!r}, {summary.get('rounds_completed')} rounds, final accuracy "
        f"{summary.get('final_accuracy')}, in {wall:.1f} s.\n\n"
        "Client actors seen (every 0.5 s, each live `ray::ClientAppActor` process and its parent raylet):\n\n"
        + table(["Ray node", "raylet PID", "client actors", "actor PIDs"], rows)
        + "\n\n"
        + ("**Actors ran on both Ray nodes.**" if ok else "**Not every node ran an actor, or the run failed.**")
        + f" Every process of the cluster was stopped by PID afterwards ({len(stopped)} processes).\n\n"
        "Commands, in the order the script runs them (the port is a free one):\n\n```bash\n"
        + "\n".join(
            " ".join(c)
            .replace(str(work), "$WORK")
            .replace(str(BIN) + "/", ".venv/bin/")
            .replace(sys.executable, ".venv/bin/python")
            for c in (head_cmd, node_cmd, ["RAY_ADDRESS=127.0.0.1:" + str(port), *run_cmd])
        )
        + "\n```\n"
    )
    write_result("ray_cluster", "A simulation on a two-node Ray cluster (loopback)", body)
    if not ok:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
