"""Issue 91: flowergraph's rounds by client count beside Flower's own floor, measured in the same invocation, on both
engines (``inline``, ``ray``) and both stacks (``flower-api=legacy``, ``message``).

The workloads (``fedavg`` on the arxiv-size synthetic graph across ``--clients`` clients, ``fedstar`` on one TU
dataset, ``--fedstar-dataset``, across ``--fedstar-clients``), the rows and the acceptance are described in the page's
own words, benchmarks/templates/scale/. Each row is its own child process, run by the shared runner
(``reproductions/_runner/processes.py``: its tree's and its tagged processes' summed RSS sampled every ``--sample`` s;
stopped by PID past ``--timeout`` or ``--max-memory-gb`` and reported as such, the other rows going on):

* flowergraph: the launcher, ``python -m flowergraph.simulation --method M --num-clients N --rounds R --out DIR
  --set simulation-engine=E --set flower-api=F ...`` (its own preflight, data check and start-up included); round
  times are ``time_s`` of ``rounds.jsonl``; start-up is from the child's launch to the start of round 1 (round 1's
  ``ended_at`` minus its ``time_s``);
* Flower's floor: ``benchmarks/flower_floor.py run`` on the workload's initial model arrays; round k is the interval
  between Flower's centralised-evaluation callbacks k-1 and k; start-up is from the launch to the first.

Acceptance (issue 91), per engine and face: fedavg at 1,000 clients (ratio, last/first, start-up, peak memory) and
FedStar at 100 (ratio), see beside_floor.md; from 10 to 1,000 clients flowergraph's median round grows no faster
than Flower's floor (``--growth``); fedavg at 10,000 clients, inline, completes (``--rounds-for 10000=3``).

    .venv/bin/python benchmarks/scale.py [--clients 10 100 1000 10000] [--engines inline ray]
        [--faces legacy message] [--rounds 5] [--rounds-for 10000=3] [--fedstar-clients 10 100]
        [--only-floor | --skip-floor] [--timeout 1800] [--work DIR] [--resume] [--report-only] [--note TEXT]

writes docs/results/scale.md (``--name``). Rows are stored as JSON under ``--work`` as they finish: ``--report-only``
rewrites the results file from them, ``--resume`` reruns only the rows today's code has not measured there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.cells import _cpu_model, code_state  # noqa: E402
from reproductions._runner.common import REPO, column_table, command_line, data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402
from reproductions._runner.processes import run_measured  # noqa: E402
from flower_floor import ENGINES, FACES, round_times  # noqa: E402

OWN = 10  # the acceptance's "flowergraph's own round": this many clients, same workload, engine and face
RATIO_MAX = 1.5
DRIFT_MAX = 1.2
STARTUP_MAX = 30.0
MEMORY_MAX_GB = {"inline": 2.0, "ray": 4.0}
GB = 1e9
ACCEPTANCE_COMMAND = ".venv/bin/python benchmarks/scale.py --timeout 1800"
SOURCES = ("flowergraph/**/*.py", "benchmarks/scale.py", "benchmarks/flower_floor.py")

# min-partition-size 1: 10,000 clients hold ~10 nodes each (10-1,000 clients: the same partition as the default 10)
ARXIV = {"node.synthetic-nodes": "100000", "node.synthetic-p-in": "0.0005", "node.synthetic-p-out": "0.00005",
         "node.min-partition-size": "1"}  # fmt: skip
# workload -> the launcher's method, dataset and keys; the client count its acceptance row is at
WORKLOADS: dict[str, dict[str, Any]] = {
    "fedavg": {"method": "fedavg", "dataset": None, "sets": ARXIV, "accept": 1000, "reported": 10000},
    "fedstar": {"method": "fedstar", "dataset": "NCI1", "sets": {}, "accept": 100, "reported": None},
}


def run_child(cmd: list[str], log: Path, a, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a row's child process (the repository on its path) under the shared runner's sampler: the summed RSS of
    its tree and of every process carrying its process-group tag (Ray's daemons leave the tree), every ``--sample``
    s; stopped by PID and tag past ``timeout`` s or ``--max-memory-gb``. Its launch time, wall s, exit status, how it
    ended, its peak (GB)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    res = run_measured(
        cmd,
        log,
        timeout=timeout,
        cwd=log.parent,
        env=env,
        max_memory=a.max_memory_gb * GB,
        interval=a.sample,
        rss=True,
        group=True,
    )
    res["peak_gb"] = res.pop("peak") / GB
    return res


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


def make_row(row: tuple, res: dict[str, Any], times: list[float], started: float | None) -> dict[str, Any]:
    """A stored row: what ``plan`` names it by (``row``), its child's measurement, its round times and when its
    first round started (wall clock; start-up is from the launch to then)."""
    kind, workload, clients, engine, face, rounds = row
    return {
        **res,
        "key": row_key(kind, workload, clients, engine, face),
        "kind": kind,
        "workload": workload,
        "clients": clients,
        "engine": engine,
        "face": face,
        "rounds": rounds,
        "round_times": times,
        "startup_s": None if started is None else started - res["launched_at"],
        "finished": res["ended"] == "exited" and res["rc"] == 0 and len(times) == rounds,
        **summarise(times),
    }


def flowergraph_row(a, row: tuple) -> dict[str, Any]:
    _, workload, clients, engine, face, rounds = row
    folder = Path(a.work) / row_key(*row[:5])
    out = next(folder / f"run{i or ''}" for i in range(1000) if not (folder / f"run{i or ''}").exists())  # a rerun
    cmd = launcher_command(workload, clients, engine, face, rounds, out, a.timeout)
    res = run_child(cmd, folder / "launcher.log", a, a.timeout + 60)
    lines = (out / "rounds.jsonl").read_text().splitlines() if (out / "rounds.jsonl").exists() else []
    recs = sorted((json.loads(line) for line in lines if line.strip()), key=lambda r: r["round"])
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    started = recs[0]["ended_at"] - recs[0]["time_s"] if recs else None
    extra = {"final_accuracy": summary.get("final_accuracy"), "status": summary.get("status"), "command": " ".join(cmd)}
    return {**make_row(row, res, [r["time_s"] for r in recs], started), **extra}


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


def floor_row(a, row: tuple) -> dict[str, Any]:
    _, workload, clients, engine, face, rounds = row
    folder = Path(a.work) / row_key(*row[:5])
    out = folder / "floor.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(REPO / "benchmarks" / "flower_floor.py"), "run", "--engine", engine, "--face", face]
    cmd += ["--clients", str(clients), "--rounds", str(rounds), "--arrays", str(ensure_arrays(a, workload))]
    cmd += ["--out", str(out)]
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "FLWR_TELEMETRY_ENABLED": "0"}
    res = run_child(cmd, folder / "floor.log", a, a.timeout, env)
    stamps = json.loads(out.read_text())["stamps"] if out.exists() else []
    return {**make_row(row, res, round_times(stamps), stamps[0] if stamps else None), "command": " ".join(cmd)}


def one_process_config(workload: str, clients: int, rounds: int) -> dict[str, Any]:
    """The run config of ``workload`` at ``clients`` for the one-process rows (the control, the bare work)."""
    w = WORKLOADS[workload]
    config = {"method": w["method"], "num-clients": clients, "rounds": rounds, **w["sets"], "seed": 0}
    return {**config, "dataset": w["dataset"], "data-dir": data_dir()} if w["dataset"] else config


def inprocess_row(a, row: tuple) -> dict[str, Any]:
    """The control: flowergraph's same run in one process, without Flower's transport (``run_inprocess``: the
    server's and every client's own work at this client count), in a child process of ``scale.py inprocess``."""
    _, workload, clients, engine, face, rounds = row
    folder = Path(a.work) / row_key(*row[:5])
    out = next(folder / f"run{i or ''}" for i in range(1000) if not (folder / f"run{i or ''}").exists())
    config = {**one_process_config(workload, clients, rounds), "out-dir": str(out)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "inprocess", json.dumps(config)]
    res = run_child(cmd, folder / "launcher.log", a, a.timeout)
    lines = (out / "rounds.jsonl").read_text().splitlines() if (out / "rounds.jsonl").exists() else []
    recs = sorted((json.loads(line) for line in lines if line.strip()), key=lambda r: r["round"])
    started = recs[0]["ended_at"] - recs[0]["time_s"] if recs else None
    return {**make_row(row, res, [r["time_s"] for r in recs], started), "command": " ".join(cmd)}


def bare_rounds(config: dict[str, Any]) -> list[float]:
    """The bare per-client work of the fedavg workload: for every client, one after another, load the global
    weights, take the local steps (flowergraph's ``train_steps``: PyG's GCN, SGD) and evaluate on the test, val
    and train masks; no Flower, no flowergraph client, server, records or serialisation. Seconds per round."""
    import torch

    from flowergraph.data import graph_spec, partition_spec
    from flowergraph.methods.node import model_kwargs, train_config
    from flowergraph.settings import parse_run_config
    from flowergraph.tasks.federated_graph import graph_cut
    from flowergraph.tasks.models import build_node_model, get_weights, set_weights
    from flowergraph.tasks.training import evaluate_masks, train_steps

    torch.set_num_threads(1)
    s = parse_run_config(config)
    cfg, kwargs = train_config(s), model_kwargs(s)
    graphs = graph_cut(graph_spec(s), partition_spec(s)).clients()
    models = [
        build_node_model(in_dim=g.num_features, num_classes=g.num_classes, seed=s.seed, cached=True, **kwargs)
        for g in graphs
    ]
    datas = [g.to_pyg() for g in graphs]
    weights = get_weights(models[0])
    times = []
    for _ in range(int(config["rounds"])):
        started = time.perf_counter()
        for model, d in zip(models, datas):
            set_weights(model, weights)
            train_steps(model, lambda m=model, d=d: m(d.x, d.edge_index), d.y, d.train_mask, cfg)
            get_weights(model)  # the update a client sends
            set_weights(model, weights)  # the evaluate message's model
            masks = {"test": d.test_mask, "val": d.val_mask, "train": d.train_mask}
            evaluate_masks(model, lambda m=model, d=d: m(d.x, d.edge_index), d.y, masks)
        times.append(time.perf_counter() - started)
    return times


def bare_row(a, row: tuple) -> dict[str, Any]:
    """The bare work (:func:`bare_rounds`) at the row's client count, in a child process of ``scale.py bare``."""
    _, workload, clients, engine, face, rounds = row
    folder = Path(a.work) / row_key(*row[:5])
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "bare.json"
    out.unlink(missing_ok=True)
    config = one_process_config(workload, clients, rounds)
    cmd = [sys.executable, str(Path(__file__).resolve()), "bare", json.dumps(config), str(out)]
    res = run_child(cmd, folder / "launcher.log", a, a.timeout)
    times = json.loads(out.read_text()) if out.exists() else []
    return {**make_row(row, res, times, None), "command": " ".join(cmd)}


def plan(a) -> list[tuple[str, str, int, str, str, int]]:
    """The rows in the order they run: per workload, client count and engine, each face's floor beside
    flowergraph's run on that face (the Message-API floor always: the acceptance is against it)."""
    rows = []
    counts = {"fedavg": a.clients, "fedstar": a.fedstar_clients}
    for workload, clients in counts.items():
        for n in clients:
            rounds = a.rounds_for.get(n, a.rounds)
            if a.inprocess and not a.only_floor and n != OWN:
                rows.append(("inprocess", workload, n, "one-process", "-", rounds))
            if a.bare and not a.only_floor and workload == "fedavg":
                rows.append(("bare", workload, n, "one-process", "-", rounds))
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
    def median(kind, workload, n, engine, face):
        r = rows.get(row_key(kind, workload, n, engine, face))
        return r["median_s"] if r and r["finished"] else None

    def beside(r, kind="floor", clients=None, face=None):
        """The median of the ``kind`` row beside ``r`` (its client count and face unless given)."""
        return median(kind, r["workload"], clients or r["clients"], r["engine"], face or r["face"])

    def ratio(r, own=None):
        floor_msg = beside(r, face="message")
        own = beside(r, "flowergraph", clients=OWN) if own is None else own
        return (
            r["median_s"] / (floor_msg + own) if r["finished"] and None not in (r["median_s"], floor_msg, own) else None
        )

    def alone(r):  # the control: the same run at this client count in one process (no Flower transport)
        return median("inprocess", r["workload"], r["clients"], "one-process", "-") if r["clients"] != OWN else None

    def bare(r):  # the bare per-client work at this client count (no library)
        return median("bare", r["workload"], r["clients"], "one-process", "-")

    code = sorted({r.get("code", "?") for r in rows.values()})
    loads = sorted(float(r["load"]) for r in rows.values() if r.get("load"))
    parts = [
        f"**{a.note}**" if a.note else "",
        f"Code: {', '.join(code)} (`git rev-parse HEAD`, +dirty when the working tree differed). CPU: "
        f"{_cpu_model()}; memory {_total_memory_gb():.1f} GB. Load average (1 min) when the rows started: "
        + (f"{loads[0]:.1f} to {loads[-1]:.1f}." if loads else "not recorded."),
        render("scale/workloads", dataset=WORKLOADS["fedstar"]["dataset"], sample=a.sample),
    ]
    where = [
        ("clients", lambda r: f"{r['clients']:,}"),
        ("engine", lambda r: r["engine"]),
        ("face", lambda r: r["face"]),
    ]
    fg = [r for r in rows.values() if r["kind"] == "flowergraph"]
    if fg:
        targets = {"ratio_max": RATIO_MAX, "drift_max": DRIFT_MAX, "startup_max": f"{STARTUP_MAX:.0f}"}
        accept = {f"{w}_accept": f"{WORKLOADS[w]['accept']:,}" for w in WORKLOADS}
        columns = [
            ("workload", lambda r: r["workload"]),
            *where,
            ("finished", ended_text),
            ("start-up s", lambda r: fmt(r["startup_s"], 1)),
            ("wall s", lambda r: fmt(r["wall_s"], 1)),
            ("rounds 2..R s", lambda r: " / ".join(f"{t:.2f}" for t in r["round_times"][1:]) or "-"),
            ("median s", lambda r: fmt(r["median_s"])),
            ("last/first", lambda r: fmt(r["last_first"])),
            ("peak GB", lambda r: f"{r['peak_gb']:.2f}"),
            ("floor, same face s", lambda r: fmt(beside(r))),
            ("floor, Message API s", lambda r: fmt(beside(r, face="message"))),
            (f"own {OWN} s", lambda r: fmt(beside(r, "flowergraph", clients=OWN))),
            ("ratio", lambda r: fmt(ratio(r))),
            ("verdict", lambda r: verdict(r, ratio(r))),
            ("control: own N, one process s", lambda r: fmt(alone(r))),
            ("control ratio", lambda r: fmt(ratio(r, alone(r)) if alone(r) is not None else None)),
            ("bare work s", lambda r: fmt(bare(r))),
            ("floor + bare work s", lambda r: fmt(_sum(beside(r, face="message"), bare(r)))),
        ]
        parts.append(render("scale/beside_floor", own=OWN, **accept, **targets) + "\n\n" + column_table(columns, fg))
    floors = [r for r in rows.values() if r["kind"] == "floor"]
    floors_columns: list = []
    if floors:
        columns = floors_columns = [
            ("workload arrays", lambda r: r["workload"]),
            *where,
            ("finished", ended_text),
            ("start-up s", lambda r: fmt(r["startup_s"], 1)),
            ("rounds 2..R s", lambda r: " / ".join(f"{t:.3f}" for t in r["round_times"][1:]) or "-"),
            ("median s", lambda r: fmt(r["median_s"], 3)),
            ("last/first", lambda r: fmt(r["last_first"])),
            ("peak GB", lambda r: f"{r['peak_gb']:.2f}"),
        ]
        parts.append("### Flower's floor\n\n" + column_table(columns, floors))
    alone_rows = [r for r in rows.values() if r["kind"] == "inprocess"]
    if alone_rows:
        columns = [c for c in floors_columns if c[0] not in ("engine", "face")] if floors else []
        parts.append(render("scale/inprocess") + "\n\n" + column_table(columns, alone_rows))
    bare_rows = [r for r in rows.values() if r["kind"] == "bare"]
    if bare_rows:
        columns = [c for c in floors_columns if c[0] not in ("engine", "face", "start-up s")] if floors else []
        parts.append(render("scale/bare", ratio_max=RATIO_MAX, own=OWN) + "\n\n" + column_table(columns, bare_rows))
    parts.append(growth_section(a, rows, median))
    failed = [r for r in rows.values() if not r["finished"]]
    if failed:
        parts.append(
            "### Rows that did not finish\n\n"
            + "\n".join(f"* `{r['key']}`: {ended_text(r)}; log `{r['log']}` under the work folder" for r in failed)
        )
    launcher = [
        " ".join(["python", *launcher_command(w, "N", "E", "F", "R", Path("DIR"), a.timeout)[1:]])
        for w in sorted({r["workload"] for r in fg})
    ]
    code_blocks = ["```bash\n" + "\n".join(lines) + "\n```" for lines in (launcher, [ACCEPTANCE_COMMAND])]
    parts.append(
        render("scale/commands", launcher=code_blocks[0].replace(str(REPO.parent), ".."), acceptance=code_blocks[1])
    )
    return "\n\n".join(p for p in parts if p)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def growth_section(a, rows, median) -> str:
    lo, hi = a.growth
    lines = []
    for workload in WORKLOADS:
        counts = sorted({r["clients"] for r in rows.values() if r["workload"] == workload})
        if len(counts) < 2:
            continue
        pair = (lo, hi) if lo in counts and hi in counts else (counts[0], counts[-1])
        for engine, face in ((e, f) for e in ENGINES for f in FACES):
            fg, fl, msg = (
                [median(kind, workload, n, engine, on) for n in pair]
                for kind, on in (("flowergraph", face), ("floor", face), ("floor", "message"))
            )
            if None in fg and None in fl:
                continue
            g, gf, gm = (None if None in v or not v[0] else v[1] / v[0] for v in (fg, fl, msg))
            added = [fmt(None if None in v else (v[1] - v[0]) / (pair[1] - pair[0]) * 1000) for v in (fg, fl)]
            met = "-" if g is None or gf is None else ("met" if g <= gf else "not met")
            growths = [fmt(x) + ("x" if x else "") for x in (g, gf, gm)]
            lines.append(
                [workload, f"{pair[0]:,} -> {pair[1]:,}", engine, face, fmt(fg[0]), fmt(fg[1]), growths[0]]
                + [fmt(fl[0], 3), fmt(fl[1], 3), *growths[1:], " / ".join(added), met]
            )
    if not lines:
        return ""
    header = ["workload", "clients", "engine", "face", "flowergraph s", "", "growth", "floor s", "", "floor growth"]
    header += ["Message-API floor growth", "ms per added client", "verdict"]
    return render("scale/growth", lo=f"{lo:,}", hi=f"{hi:,}") + "\n\n" + table(header, lines)


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
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["inprocess"]:  # an in-process control row's child: run_inprocess(JSON config)
        from flowergraph.app.inprocess import run_inprocess

        summary, _ = run_inprocess(json.loads(argv[1]))
        return 0 if summary.get("status") == "completed" else 1
    if argv[:1] == ["bare"]:  # a bare-work row's child: bare_rounds(JSON config) -> JSON file
        Path(argv[2]).write_text(json.dumps(bare_rounds(json.loads(argv[1]))))
        return 0
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
    parser.add_argument(
        "--inprocess", action=argparse.BooleanOptionalAction, default=True, help="the one-process control rows"
    )
    parser.add_argument(
        "--bare", action=argparse.BooleanOptionalAction, default=True, help="the bare-work rows (fedavg workload)"
    )
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
    for i, row_id in enumerate(todo, 1):
        kind, rounds, key = row_id[0], row_id[5], row_key(*row_id[:5])
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
        try:
            kinds = {"flowergraph": flowergraph_row, "floor": floor_row, "inprocess": inprocess_row, "bare": bare_row}
            row = kinds[kind](a, row_id)
        except Exception as exc:  # noqa: BLE001 (a row that could not even start is reported, the rest go on)
            failed = {"ended": f"error: {type(exc).__name__}: {exc}", "rc": None, "peak_gb": 0.0, "wall_s": None}
            row = make_row(row_id, failed, [], None)
        row.update(code=code, load=load, by=this_command, log=f"{key}/{'launcher' if kind != 'floor' else 'floor'}.log")
        stored.write_text(json.dumps(row, indent=1) + "\n")
        rows[key] = row
        print(
            f"    {ended_text(row)}; start-up {fmt(row['startup_s'], 1)} s; rounds "
            + ", ".join(f"{t:.2f}" for t in row["round_times"])
            + f"; median {fmt(row['median_s'], 3)} s; peak {row['peak_gb']:.2f} GB",
            flush=True,
        )
    title = "Scale: flowergraph's rounds by client count, beside Flower's floor"
    cells = sorted({r.get("by", "") for r in rows.values()})
    write_result(a.name, title, report(a, rows), drop=("--work",), cell_commands=cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
