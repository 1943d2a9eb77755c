"""Issue 91: how flowergraph's rounds scale with the number of clients, beside Flower's own floor measured in the same
invocation, on both simulation engines (``inline``, ``ray``) and both of Flower's stacks (``flower-api=legacy``,
``message``).

Workloads:

* ``fedavg``: flowergraph's fedavg (its GCN) on the arxiv-size synthetic graph: the built-in CSBM with 100,000
  nodes, ``node.synthetic-p-in=0.0005``, ``node.synthetic-p-out=0.00005`` (expected degree 14: ~1.4M directed
  edges, ogbn-arxiv has 169k nodes and 1.2M edges), cut across ``--clients`` clients;
* ``fedstar``: FedStar on one TU dataset (``--fedstar-dataset``, NCI1: 4,110 graphs) split across
  ``--fedstar-clients`` clients (the graph task's Dirichlet split by label, ``graph.beta`` ~IID, at least
  ``graph.min-graphs`` graphs each). FedStar's settings (CHEM, BIO-CHEM, ...) give one dataset to each client; no
  setting is dealt across more clients than it has datasets.

Each row is its own child process:

* flowergraph: the launcher, ``python -m flowergraph.simulation --method M --num-clients N --rounds R --out DIR
  --set simulation-engine=E --set flower-api=F ...`` (its own preflight, data check and start-up included);
  round times are ``time_s`` of ``rounds.jsonl``; start-up is from the child's launch to the start of round 1
  (round 1's ``ended_at`` minus its ``time_s``);
* Flower's floor: ``benchmarks/flower_floor.py run`` (Flower's own ``FedAvg`` with clients that do nothing,
  exchanging the initial model's arrays of that workload, on the same engine, per stack); round k is the
  interval between Flower's centralised-evaluation callbacks k-1 and k; start-up is from the launch to the first.

Peak memory: the summed RSS (resident set size; shared pages counted once per process that maps them) of the
child's whole process tree, plus every process that carries its process-group tag (Ray's GCS server and raylet
leave the tree), sampled every ``--sample`` s with psutil. A row that runs past ``--timeout`` or whose tree
passes ``--max-memory-gb`` is stopped (by PID) and reported as such; the other rows go on.

Acceptance (issue 91), per engine and face:

* fedavg, 1,000 clients: finishes; median of rounds 2..R <= 1.5 x (Flower's Message-API floor for 1,000 clients
  + flowergraph's own median round with 10 clients, same workload, engine and face); last / first of rounds
  2..R <= 1.2; start-up <= 30 s; peak memory <= 2 GB inline, 4 GB on Ray (GB = 10^9 bytes);
* from 10 to 1,000 clients flowergraph's median round grows no faster than Flower's floor (``--growth``);
* fedavg, 10,000 clients, inline: completes (``--rounds-for 10000=3``): time and memory reported;
* fedstar, 100 clients: median <= 1.5 x (Message-API floor for 100 clients + its own round with 10 clients).

    .venv/bin/python benchmarks/scale.py [--clients 10 100 1000 10000] [--engines inline ray]
        [--faces legacy message] [--rounds 5] [--rounds-for 10000=3] [--fedstar-clients 10 100]
        [--only-floor | --skip-floor] [--timeout 1800] [--work DIR] [--resume] [--report-only] [--note TEXT]

writes docs/results/scale.md (``--name``). Every row is stored as JSON under ``--work`` as it finishes, so
``--report-only`` rewrites the results file from the stored rows, and ``--resume`` reruns only the rows that
today's code has not measured there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.cells import _cpu_model, code_state  # noqa: E402
from reproductions._runner.common import REPO, command_line, data_dir, table, write_result  # noqa: E402

ENGINES = ("inline", "ray")
FACES = ("legacy", "message")
OWN = 10  # the acceptance's "flowergraph's own round": this many clients, same workload, engine and face
RATIO_MAX = 1.5
DRIFT_MAX = 1.2
STARTUP_MAX = 30.0
MEMORY_MAX_GB = {"inline": 2.0, "ray": 4.0}
GB = 1e9
ACCEPTANCE_COMMAND = ".venv/bin/python benchmarks/scale.py --timeout 1800"
SOURCES = ("flowergraph/**/*.py", "benchmarks/scale.py", "benchmarks/flower_floor.py")

ARXIV = {"node.synthetic-nodes": "100000", "node.synthetic-p-in": "0.0005", "node.synthetic-p-out": "0.00005"}
# workload -> the launcher's method, dataset and keys; the client count its acceptance row is at
WORKLOADS: dict[str, dict[str, Any]] = {
    "fedavg": {"method": "fedavg", "dataset": None, "sets": ARXIV, "accept": 1000, "reported": 10000},
    "fedstar": {"method": "fedstar", "dataset": "NCI1", "sets": {}, "accept": 100, "reported": None},
}


# ------------------------------------------------------------------------------------------------- process trees
class TreeRss(threading.Thread):
    """Peak summed RSS of a process, its descendants and every process whose ``FLOWERGRAPH_PROCESS_GROUP`` is
    ``tag`` or a group the process itself started (``fg-<pid>-...``: the launcher's, which Ray's daemons carry
    after they leave the tree). A process's tag is read once (its environment is fixed at exec)."""

    def __init__(self, pid: int, tag: str, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.tag, self.interval = pid, tag, interval
        self.peak, self.peak_procs, self.samples = 0, 0, 0
        self._tagged: dict[tuple[int, float], bool] = {}
        self.done = threading.Event()

    def _members(self) -> dict[int, Any]:
        import psutil

        from flowergraph.app.runtime import GROUP_ENV

        found: dict[int, Any] = {}
        try:
            root = psutil.Process(self.pid)
            found = {p.pid: p for p in [root, *root.children(recursive=True)]}
        except psutil.Error:
            pass
        own = f"fg-{self.pid}-"
        for p in psutil.process_iter(["create_time"]):
            if p.pid in found:
                continue
            key = (p.pid, p.info.get("create_time") or 0.0)
            if key not in self._tagged:
                try:
                    group = p.environ().get(GROUP_ENV, "")
                except (psutil.Error, OSError):
                    continue  # not readable now (starting, ending): asked again next time
                self._tagged[key] = group == self.tag or group.startswith(own)
            if self._tagged[key]:
                found[p.pid] = p
        return found

    def sample(self) -> int:
        import psutil

        rss, procs = 0, self._members()
        for p in procs.values():
            try:
                rss += p.memory_info().rss
            except (psutil.Error, OSError):
                continue
        if rss > self.peak:
            self.peak, self.peak_procs = rss, len(procs)
        self.samples += 1
        return rss

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)

    def stop(self) -> None:
        self.done.set()
        self.join()


def run_child(
    cmd: list[str], log: Path, timeout: float, max_memory: float, interval: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``cmd`` (output to ``log``) under a memory sampler, stopping it (and everything it started, by PID and
    process-group tag) after ``timeout`` s or once its tree passes ``max_memory`` bytes. Returns its launch time
    (wall clock), wall seconds, exit status, how it ended ("exited", "timed out", "exceeded memory") and the peak."""
    from flowergraph.app.runtime import ProcessGroup, kill_tree

    group = ProcessGroup().start()  # the child and what it starts carry the tag; stopped at the end
    env = group.env(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    log.parent.mkdir(parents=True, exist_ok=True)
    ended = "exited"
    with open(log, "w") as out:
        launched, t0 = time.time(), time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=str(log.parent), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        sampler = TreeRss(proc.pid, group.tag, interval)
        sampler.start()
        try:
            while True:
                try:
                    proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - t0 > timeout:
                    ended = "timed out"
                elif sampler.peak > max_memory:
                    ended = "exceeded memory"
                else:
                    continue
                kill_tree(proc.pid)  # SIGTERM (the launcher stops its own processes), SIGKILL after 5 s
                proc.wait()
                break
        finally:
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
            sampler.stop()
            group.stop()
    return {
        "launched_at": launched,
        "wall_s": time.monotonic() - t0,
        "rc": proc.returncode,
        "ended": ended,
        "peak_gb": sampler.peak / GB,
        "peak_processes": sampler.peak_procs,
        "samples": sampler.samples,
    }


# ---------------------------------------------------------------------------------------------------------- rows
def row_key(kind: str, workload: str, clients: int, engine: str, face: str) -> str:
    return f"{workload}-{kind}-{engine}-{face}-{clients}"


def launcher_command(workload: str, clients: int, engine: str, face: str, rounds: int, out: Path, timeout: float):
    w = WORKLOADS[workload]
    cmd = [sys.executable, "-m", "flowergraph.simulation", "--method", w["method"], "--num-clients", str(clients)]
    cmd += ["--rounds", str(rounds), "--out", str(out), "--timeout", str(int(timeout))]
    if w["dataset"]:
        cmd += ["--dataset", w["dataset"], "--data-dir", data_dir()]
    sets = {**w["sets"], "simulation-engine": engine, "flower-api": face, "seed": 0}
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    return cmd


def summarise(times: list[float]) -> dict[str, Any]:
    """Median of rounds 2..R and round R / round 2 (round 1 is start-up's: caches, the first model)."""
    later = times[1:]
    return {
        "median_s": statistics.median(later) if later else None,
        "last_first": later[-1] / later[0] if len(later) >= 2 and later[0] > 0 else None,
    }


def flowergraph_row(a, workload: str, clients: int, engine: str, face: str, rounds: int) -> dict[str, Any]:
    key = row_key("flowergraph", workload, clients, engine, face)
    folder = Path(a.work) / key
    out = folder / "run"
    cmd = launcher_command(workload, clients, engine, face, rounds, out, a.timeout)
    res = run_child(cmd, folder / "launcher.log", a.timeout + 60, a.max_memory_gb * GB, a.sample)
    rounds_file, summary_file = out / "rounds.jsonl", out / "summary.json"
    recs = []
    if rounds_file.exists():
        recs = sorted(
            (json.loads(line) for line in rounds_file.read_text().splitlines() if line.strip()),
            key=lambda r: r["round"],
        )
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    times = [r["time_s"] for r in recs]
    finished = res["ended"] == "exited" and res["rc"] == 0 and len(times) == rounds
    startup = recs[0]["ended_at"] - recs[0]["time_s"] - res["launched_at"] if recs else None
    return {
        **res,
        "key": key,
        "kind": "flowergraph",
        "workload": workload,
        "clients": clients,
        "engine": engine,
        "face": face,
        "rounds": rounds,
        "round_times": times,
        "startup_s": startup,
        "finished": finished,
        "final_accuracy": summary.get("final_accuracy"),
        "status": summary.get("status"),
        "command": " ".join(cmd),
        **summarise(times),
    }


def ensure_arrays(a, workload: str) -> Path:
    """The arrays Flower's floor exchanges for ``workload``: the initial model of flowergraph's clients (shapes
    do not depend on the client count), written once per work folder by a child process."""
    path = Path(a.work) / f"arrays-{workload}.npz"
    if not path.exists():
        w = WORKLOADS[workload]
        config = {"method": w["method"], "num-clients": OWN, **w["sets"]}
        if w["dataset"]:
            config.update({"dataset": w["dataset"], "data-dir": data_dir()})
        cmd = [sys.executable, str(REPO / "benchmarks" / "flower_floor.py"), "arrays", "--config", json.dumps(config)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
        subprocess.run([*cmd, "--out", str(path)], check=True, env=env, cwd=str(REPO))
    return path


def floor_row(a, workload: str, clients: int, engine: str, face: str, rounds: int) -> dict[str, Any]:
    key = row_key("floor", workload, clients, engine, face)
    folder = Path(a.work) / key
    out = folder / "floor.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(REPO / "benchmarks" / "flower_floor.py"), "run", "--engine", engine, "--face", face]
    cmd += ["--clients", str(clients), "--rounds", str(rounds), "--arrays", str(ensure_arrays(a, workload))]
    cmd += ["--out", str(out)]
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "FLWR_TELEMETRY_ENABLED": "0"}
    res = run_child(cmd, folder / "floor.log", a.timeout, a.max_memory_gb * GB, a.sample, env)
    stamps = json.loads(out.read_text())["stamps"] if out.exists() else []
    times = [b - c for c, b in zip(stamps, stamps[1:])]
    return {
        **res,
        "key": key,
        "kind": "floor",
        "workload": workload,
        "clients": clients,
        "engine": engine,
        "face": face,
        "rounds": rounds,
        "round_times": times,
        "startup_s": stamps[0] - res["launched_at"] if stamps else None,
        "finished": res["ended"] == "exited" and res["rc"] == 0 and len(times) == rounds,
        "command": " ".join(cmd),
        **summarise(times),
    }


def plan(a) -> list[tuple[str, str, int, str, str, int]]:
    """The rows in the order they run: per workload, client count and engine, each face's floor beside
    flowergraph's run on that face (the Message-API floor always: the acceptance is against it)."""
    rows = []
    counts = {"fedavg": a.clients, "fedstar": a.fedstar_clients}
    for workload, clients in counts.items():
        for n in clients:
            rounds = a.rounds_for.get(n, a.rounds)
            for engine in a.engines:
                floor_faces = [f for f in FACES if f in a.faces or f == "message"]
                for face in FACES:
                    if face in floor_faces and not a.skip_floor:
                        rows.append(("floor", workload, n, engine, face, rounds))
                    if face in a.faces and not a.only_floor:
                        rows.append(("flowergraph", workload, n, engine, face, rounds))
    return rows


# -------------------------------------------------------------------------------------------------------- report
def fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def ended_text(r: dict) -> str:
    if r["finished"]:
        return "yes"
    if r["ended"] != "exited":
        return f"no ({r['ended']})"
    return f"no (exit {r['rc']}, {len(r['round_times'])}/{r['rounds']} rounds)"


def verdict(r: dict, ratio: float | None) -> str:
    w = WORKLOADS[r["workload"]]
    if r["clients"] == w["accept"]:
        if not r["finished"]:
            return f"not met: did not finish ({ended_text(r)[3:].strip('()')})"
        failed = []
        if ratio is None:
            failed.append(f"ratio n/a (needs the {r['clients']}-client Message-API floor and the {OWN}-client row)")
        elif ratio > RATIO_MAX:
            failed.append(f"ratio {ratio:.2f} > {RATIO_MAX}")
        if r["workload"] == "fedavg":
            if r["last_first"] is None or r["last_first"] > DRIFT_MAX:
                failed.append(f"last/first {fmt(r['last_first'])} > {DRIFT_MAX}")
            if r["startup_s"] is None or r["startup_s"] > STARTUP_MAX:
                failed.append(f"start-up {fmt(r['startup_s'], 1)} s > {STARTUP_MAX:.0f} s")
            if r["peak_gb"] > MEMORY_MAX_GB[r["engine"]]:
                failed.append(f"peak {r['peak_gb']:.2f} GB > {MEMORY_MAX_GB[r['engine']]:.0f} GB")
        return "met" if not failed else "not met: " + "; ".join(failed)
    if r["clients"] == w["reported"] and r["engine"] == "inline":
        return f"reported: {'completed' if r['finished'] else 'did not complete'} {r['rounds']} rounds"
    return "-"


def report(a, rows: dict[str, dict]) -> str:
    def get(kind, workload, n, engine, face):
        return rows.get(row_key(kind, workload, n, engine, face))

    def median(kind, workload, n, engine, face):
        r = get(kind, workload, n, engine, face)
        return r["median_s"] if r and r["finished"] else None

    parts = []
    if a.note:
        parts.append(f"**{a.note}**")
    code = sorted({r.get("code", "?") for r in rows.values()})
    loads = sorted(float(r["load"]) for r in rows.values() if r.get("load"))
    parts.append(
        f"Code: {', '.join(code)} (`git rev-parse HEAD`, +dirty when the working tree differed). CPU: "
        f"{_cpu_model()}; memory {_total_memory_gb():.1f} GB. Load average (1 min) when the rows started: "
        + (f"{loads[0]:.1f} to {loads[-1]:.1f}." if loads else "not recorded.")
    )
    parts.append(
        "Workloads: `fedavg` on the arxiv-size synthetic graph (`node.synthetic-nodes=100000 "
        "node.synthetic-p-in=0.0005 node.synthetic-p-out=0.00005`: 1,397,496 directed edges at seed 0, mean "
        f"degree 14.0); `fedstar` on {WORKLOADS['fedstar']['dataset']} split across its clients (the graph task's "
        "Dirichlet split by label; FedStar's multi-dataset settings give one dataset per client and cannot be "
        "dealt across 100 clients today). Every row is its own child process: flowergraph's launcher (`python -m "
        "flowergraph.simulation ... --set simulation-engine=E --set flower-api=F`) or Flower's floor "
        "(`benchmarks/flower_floor.py run`: Flower's `FedAvg` with clients that do nothing, exchanging the "
        "workload's initial model arrays, same engine and stack). Start-up: from the child's launch to the start "
        "of round 1; wall: the whole child process. Rounds 2..R in seconds; median and last/first of rounds 2..R. "
        "Peak: summed RSS of the "
        "child's process tree and its tagged processes (Ray's daemons), sampled every "
        f"{a.sample} s, GB = 10^9 bytes (RSS counts shared pages once per process)."
    )
    fg = [r for r in rows.values() if r["kind"] == "flowergraph"]
    if fg:
        body = []
        for r in fg:
            floor_same = median("floor", r["workload"], r["clients"], r["engine"], r["face"])
            floor_msg = median("floor", r["workload"], r["clients"], r["engine"], "message")
            own = median("flowergraph", r["workload"], OWN, r["engine"], r["face"])
            ratio = None
            if r["finished"] and None not in (r["median_s"], floor_msg, own):
                ratio = r["median_s"] / (floor_msg + own)
            body.append(
                [
                    r["workload"],
                    f"{r['clients']:,}",
                    r["engine"],
                    r["face"],
                    ended_text(r),
                    fmt(r["startup_s"], 1),
                    fmt(r["wall_s"], 1),
                    " / ".join(f"{t:.2f}" for t in r["round_times"][1:]) or "-",
                    fmt(r["median_s"]),
                    fmt(r["last_first"]),
                    f"{r['peak_gb']:.2f}",
                    fmt(floor_same),
                    fmt(floor_msg),
                    fmt(own),
                    fmt(ratio),
                    verdict(r, ratio),
                ]
            )
        parts.append(
            "### flowergraph, beside Flower's floor\n\n"
            f"ratio = median / (Message-API floor at the row's client count + flowergraph's own median with {OWN} "
            "clients, same workload, engine and face); the acceptance rows are fedavg at "
            f"{WORKLOADS['fedavg']['accept']:,} clients (ratio <= {RATIO_MAX}, last/first <= {DRIFT_MAX}, start-up "
            f"<= {STARTUP_MAX:.0f} s, peak <= 2 GB inline / 4 GB Ray) and fedstar at "
            f"{WORKLOADS['fedstar']['accept']:,} clients (ratio <= {RATIO_MAX}); elsewhere the ratio is shown for "
            "reference.\n\n"
            + table(
                [
                    "workload",
                    "clients",
                    "engine",
                    "face",
                    "finished",
                    "start-up s",
                    "wall s",
                    "rounds 2..R s",
                    "median s",
                    "last/first",
                    "peak GB",
                    "floor, same face s",
                    "floor, Message API s",
                    f"own {OWN} s",
                    "ratio",
                    "verdict",
                ],
                body,
            )
        )
    floors = [r for r in rows.values() if r["kind"] == "floor"]
    if floors:
        parts.append(
            "### Flower's floor\n\n"
            + table(
                [
                    "workload arrays",
                    "clients",
                    "engine",
                    "face",
                    "finished",
                    "start-up s",
                    "rounds 2..R s",
                    "median s",
                    "last/first",
                    "peak GB",
                ],
                [
                    [
                        r["workload"],
                        f"{r['clients']:,}",
                        r["engine"],
                        r["face"],
                        ended_text(r),
                        fmt(r["startup_s"], 1),
                        " / ".join(f"{t:.3f}" for t in r["round_times"][1:]) or "-",
                        fmt(r["median_s"], 3),
                        fmt(r["last_first"]),
                        f"{r['peak_gb']:.2f}",
                    ]
                    for r in floors
                ],
            )
        )
    parts.append(growth_section(a, rows, median))
    failed = [r for r in rows.values() if not r["finished"]]
    if failed:
        parts.append(
            "### Rows that did not finish\n\n"
            + "\n".join(f"* `{r['key']}`: {ended_text(r)}; log `{r['log']}` under the work folder" for r in failed)
        )
    templates = []
    for workload in sorted({r["workload"] for r in fg}):
        cmd = launcher_command(workload, "N", "E", "F", "R", Path("DIR"), a.timeout)
        templates.append(" ".join(["python", *cmd[1:]]).replace(str(REPO.parent), ".."))
    parts.append(
        "### Rows' commands\n\nflowergraph rows run, with N clients, R rounds, engine E, face F (paths from the "
        "repository root):\n\n```bash\n"
        + "\n".join(templates)
        + "\n```\n\nFlower's floor rows run `python benchmarks/flower_floor.py run --engine E --face F --clients N "
        "--rounds R --arrays A.npz --out floor.json`, after `flower_floor.py arrays` wrote the workload's "
        "initial model to A.npz."
    )
    parts.append(
        "### The acceptance run\n\nOn a quiet machine, from the repository root (every default: fedavg at 10, "
        "100, 1,000 and 10,000 clients, FedStar at 10 and 100, both engines, both faces, Flower's floor beside "
        "every row, 5 rounds, 3 at 10,000; rows are kept under `--work` as they finish, and `--resume` after an "
        f"interruption reruns only the missing ones):\n\n```bash\n{ACCEPTANCE_COMMAND}\n```"
    )
    return "\n\n".join(p for p in parts if p)


def growth_section(a, rows, median) -> str:
    lo, hi = a.growth
    lines = []
    for workload in WORKLOADS:
        counts = sorted({r["clients"] for r in rows.values() if r["workload"] == workload})
        if len(counts) < 2:
            continue
        pair = (lo, hi) if lo in counts and hi in counts else (counts[0], counts[-1])
        for engine in ENGINES:
            for face in FACES:
                fg = [median("flowergraph", workload, n, engine, face) for n in pair]
                fl = [median("floor", workload, n, engine, face) for n in pair]
                msg = [median("floor", workload, n, engine, "message") for n in pair]
                if None in fg and None in fl:
                    continue

                def grow(v):
                    return None if None in v or not v[0] else v[1] / v[0]

                g, gf, gm = grow(fg), grow(fl), grow(msg)
                extra = [
                    None if None in v else (v[1] - v[0]) / (pair[1] - pair[0]) * 1000 for v in (fg, fl)
                ]  # ms per added client
                met = "-" if g is None or gf is None else ("met" if g <= gf else "not met")
                lines.append(
                    [
                        workload,
                        f"{pair[0]:,} -> {pair[1]:,}",
                        engine,
                        face,
                        fmt(fg[0]),
                        fmt(fg[1]),
                        fmt(g) + ("x" if g else ""),
                        fmt(fl[0], 3),
                        fmt(fl[1], 3),
                        fmt(gf) + ("x" if gf else ""),
                        fmt(gm) + ("x" if gm else ""),
                        f"{fmt(extra[0])} / {fmt(extra[1])}",
                        met,
                    ]
                )
    if not lines:
        return ""
    return (
        f"### Growth with the client count ({lo:,} -> {hi:,} asked; a pair shown otherwise is the smallest and "
        "largest count measured)\n\nGrowth: median at the larger count / median at the smaller; the issue's target: "
        "flowergraph's round grows no faster than Flower's floor on the same engine and face (growth <= the "
        "floor's). Also the added time per added client (ms), flowergraph / floor.\n\n"
        + table(
            [
                "workload",
                "clients",
                "engine",
                "face",
                "flowergraph s",
                "",
                "growth",
                "floor s",
                "",
                "floor growth",
                "Message-API floor growth",
                "ms per added client",
                "verdict",
            ],
            lines,
        )
    )


def _total_memory_gb() -> float:
    import psutil

    return psutil.virtual_memory().total / GB


# ---------------------------------------------------------------------------------------------------------- main
def parse_rounds_for(text: str) -> tuple[int, int]:
    try:
        n, r = (int(x) for x in text.split("="))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CLIENTS=ROUNDS, e.g. 10000=3") from None
    if n < 1 or r < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: clients >= 1 and rounds >= 2 (round 1 is start-up's)")
    return n, r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000, 10000], help="fedavg's counts")
    parser.add_argument(
        "--fedstar-clients", type=int, nargs="*", default=[10, 100], help="FedStar's counts (none: no FedStar rows)"
    )
    parser.add_argument("--fedstar-dataset", default="NCI1", help="the TU dataset FedStar's clients split")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--faces", nargs="+", choices=FACES, default=list(FACES))
    parser.add_argument("--rounds", type=int, default=5, help="rounds per row (>= 3: rounds 2..R are measured)")
    parser.add_argument(
        "--rounds-for",
        type=parse_rounds_for,
        nargs="*",
        default=[(10000, 3)],
        metavar="N=R",
        help="rounds for a client count (default 10000=3)",
    )
    floor = parser.add_mutually_exclusive_group()
    floor.add_argument("--only-floor", action="store_true", help="Flower's floor rows only")
    floor.add_argument("--skip-floor", action="store_true", help="no floor rows (no ratios)")
    parser.add_argument("--growth", type=int, nargs=2, default=[10, 1000], metavar=("FROM", "TO"))
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per row before it is stopped")
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        default=None,
        help="stop a row whose process tree passes this (default: 80%% of the machine's memory)",
    )
    parser.add_argument("--sample", type=float, default=0.2, help="seconds between memory samples")
    parser.add_argument("--work", default=str(REPO / "results" / "bench-scale"), help="rows' folders and JSON")
    parser.add_argument("--resume", action="store_true", help="keep rows today's code already measured in --work")
    parser.add_argument("--report-only", action="store_true", help="rewrite the results file from --work's rows")
    parser.add_argument("--note", default="", help="a line at the top of the results file (e.g. what run this is)")
    parser.add_argument("--name", default="scale", help="docs/results/<name>.md")
    a = parser.parse_args(argv)
    if a.rounds < 2:
        parser.error("--rounds must be >= 2 (round 1 is start-up's; rounds 2..R are measured)")
    a.rounds_for = dict(a.rounds_for or [])
    a.max_memory_gb = a.max_memory_gb or 0.8 * _total_memory_gb()
    WORKLOADS["fedstar"]["dataset"] = a.fedstar_dataset
    work = Path(a.work)
    (work / "rows").mkdir(parents=True, exist_ok=True)
    state = code_state(SOURCES)
    code = state["commit"] + ("+dirty" if state["dirty"] else "")
    this_command = command_line(drop=("--work",))
    rows: dict[str, dict] = {}
    todo = plan(a)
    for i, (kind, workload, n, engine, face, rounds) in enumerate(todo, 1):
        key = row_key(kind, workload, n, engine, face)
        stored = work / "rows" / f"{key}.json"
        if a.report_only or a.resume:
            if stored.exists():
                row = json.loads(stored.read_text())
                if a.report_only or (row.get("code") == code and not state["dirty"] and row["rounds"] == rounds):
                    rows[key] = row
                    continue
            if a.report_only:
                continue
        print(f"[{i}/{len(todo)}] {key}: {rounds} rounds ...", flush=True)
        load = f"{os.getloadavg()[0]:.1f}"
        run = flowergraph_row if kind == "flowergraph" else floor_row
        try:
            row = run(a, workload, n, engine, face, rounds)
        except Exception as exc:  # noqa: BLE001 (a row that could not even start is reported, the rest go on)
            row = {
                "key": key,
                "kind": kind,
                "workload": workload,
                "clients": n,
                "engine": engine,
                "face": face,
                "rounds": rounds,
                "round_times": [],
                "startup_s": None,
                "finished": False,
                "ended": f"error: {type(exc).__name__}: {exc}",
                "rc": None,
                "peak_gb": 0.0,
                "wall_s": None,
                "median_s": None,
                "last_first": None,
            }
        row.update(code=code, load=load, by=this_command, log=f"{key}/{'launcher' if kind != 'floor' else 'floor'}.log")
        stored.write_text(json.dumps(row, indent=1) + "\n")
        rows[key] = row
        print(
            f"    {ended_text(row)}; start-up {fmt(row['startup_s'], 1)} s; rounds "
            + ", ".join(f"{t:.2f}" for t in row["round_times"])
            + f"; median {fmt(row['median_s'], 3)} s; peak {row['peak_gb']:.2f} GB",
            flush=True,
        )
    body = report(a, rows)
    write_result(
        a.name,
        "Scale: flowergraph's rounds by client count, beside Flower's floor",
        body,
        argv=[
            x
            for i, x in enumerate(sys.argv)
            if not (x == "--work" or x.startswith("--work=") or (i and sys.argv[i - 1] == "--work"))
        ],
        cell_commands=sorted({r.get("by", "") for r in rows.values()}),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
