"""What a deployment round costs: fedavg, FedGCN and FedStar against Flower's own floor in the same deployment.

Flower 1.41 runs every message a SuperNode receives in a fresh ``flwr-clientapp`` process. This measures, on one
loopback deployment (SuperLink with TLS and SuperNode authentication, one SuperNode per client, all on this
machine), the per-round wall time of

* **floor**: Flower's own cost: flowergraph's ServerApp and strategy (``method=noop``: the same messages as
  fedavg) with a ClientApp that returns what it receives and imports nothing but Flower (no torch);
* **fedavg** (synthetic graph, GCN), **fedgcn** (synthetic graph, 2 hops) and **fedstar** (one TU dataset per
  client: MUTAG, BZR, COX2),

each in several node modes, each mode in its own deployment with its own floor:

* ``cold``: ``FLOWERGRAPH_NODE_WORKER=off`` and ``FLOWERGRAPH_FAST_CLIENTAPP=off``: every message runs in Flower's
  own ``flwr-clientapp`` process (imports torch, PyG and flowergraph and loads the node's data each time: what
  every message cost before the node worker);
* ``warm-flower-entry``: each node's messages run in its warm worker process (``flowergraph.app.worker``), each
  message still starting Flower's own ``flwr-clientapp`` (``FLOWERGRAPH_FAST_CLIENTAPP=off``);
* ``warm-process``: the warm worker and flowergraph's ``flwr-clientapp`` entry starting Flower's command in a
  fresh interpreter per message (``FLOWERGRAPH_FAST_CLIENTAPP=process``);
* ``warm``: the default: the warm worker, each message's ``flwr-clientapp`` a child forked from the SuperNode's
  warm fork server (``FLOWERGRAPH_FAST_CLIENTAPP=fork``, :mod:`flowergraph.app.forkserver`);
* ``warm-flower-polling``: as ``warm`` with Flower's own SuperNode polling (``FLOWERGRAPH_SUPERNODE_POLLING=flower``:
  a SuperNode with no message waits up to 3 s before asking again, its SuperExec polls every second).

The floor of every mode runs through that mode's entry too, so compare round times across modes, not only the
ratios.

Every ClientApp process records where its time went (``FLOWERGRAPH_MESSAGE_TIMES``, ``flowergraph.app.timing``):
Flower's process start (process creation to the ClientApp's import: interpreter, Flower's imports, pulling the
message), imports during the message (torch, PyG, flowergraph), the node's data load (building the client minus
its imports) and the work (the rest of the message). The per-round figure is the median over rounds 2..R-1
(round 1 starts each node's data and, warm, its worker; round R adds the separate final evaluation).

    .venv/bin/python benchmarks/deployment_overhead.py [--rounds 5] [--modes warm,warm-process,...]

Finished cells (one per mode) are kept in ``benchmarks/cells/deployment_overhead/`` with the code state that
produced them; ``--fresh`` recomputes them.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the shared runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reproductions._runner.cells import CellStore  # noqa: E402
from reproductions._runner.common import data_dir, table, write_result  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402
import noop_methods  # noqa: E402

from flowergraph.app.runtime import stop_on_signals, write_app  # noqa: E402
from flowergraph.deployment import submit_run  # noqa: E402
from flowergraph.deployment import LoopbackDeployment  # noqa: E402
from flowergraph.storage import read_run  # noqa: E402

FLOOR_CLIENT = '''"""Flower's floor: a ClientApp that answers flowergraph's strategy (identity, initial model, fit,
evaluate)
with what it received, importing nothing but Flower and numpy (no torch, no PyG, no flowergraph client)."""
import time

_MODULE_T0 = time.time()

import os  # noqa: E402

import numpy as np  # noqa: E402
from flwr.client import NumPyClient  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from flowergraph import wire  # noqa: E402  (message keys only: numpy and Flower)


class Floor(NumPyClient):
    def __init__(self, pid):
        self.pid = pid

    def get_properties(self, config):
        return {wire.PARTITION_ID: self.pid}

    def get_parameters(self, config):
        return [np.zeros(613, dtype=np.float32)]

    def fit(self, parameters, config):
        metrics = {wire.PARTITION_ID: self.pid}
        if config.get(wire.EVALUATE_GLOBAL):
            metrics.update({f"{wire.EVAL_PREFIX}loss": 0.0, f"{wire.EVAL_PREFIX}num_test": 1})
        return parameters, 1, metrics

    def evaluate(self, parameters, config):
        return 0.0, 1, {wire.PARTITION_ID: self.pid, "loss": 0.0, "num_test": 1}


def client_fn(context):
    return Floor(int(context.node_config["partition-id"])).to_client()


def timing_mod(msg, context, call_next):
    if not os.environ.get("FLOWERGRAPH_MESSAGE_TIMES"):
        return call_next(msg, context)
    from flowergraph.app import timing

    with timing.message() as times:
        reply = call_next(msg, context)
    timing.write(dict(times.values, created=timing.process_created(), module=_MODULE_T0, pid=os.getpid(),
                      run_id=int(context.run_id), node_id=int(context.node_id),
                      partition=str(context.node_config.get("partition-id", "")),
                      type=str(msg.metadata.message_type), group=str(msg.metadata.group_id), app="floor",
                      entry=timing.entry()))
    return reply


app = ClientApp(client_fn=client_fn, mods=[timing_mod])
'''

METHODS = {
    "floor": {"method": "noop"},
    "fedavg": {"method": "fedavg"},
    "fedgcn": {"method": "fedgcn", "fedgcn.hops": 2},
    "fedstar": {"method": "fedstar", "dataset": "MUTAG,BZR,COX2"},
}
# mode -> (FLOWERGRAPH_NODE_WORKER, FLOWERGRAPH_FAST_CLIENTAPP, FLOWERGRAPH_SUPERNODE_POLLING)
MODES = {
    "cold": ("off", "off", "fast"),
    "warm-flower-entry": ("auto", "off", "fast"),
    "warm-process": ("auto", "process", "fast"),
    "warm": ("auto", "fork", "fast"),
    "warm-flower-polling": ("auto", "fork", "flower"),
}
ENV_KEYS = ("FLOWERGRAPH_NODE_WORKER", "FLOWERGRAPH_FAST_CLIENTAPP", "FLOWERGRAPH_SUPERNODE_POLLING")
# what every message of a mode must record (flowergraph.app.timing): which flwr-clientapp ran it, and whether forked
EXPECTED = {"off": ("flower", False), "process": ("flowergraph", False), "fork": (None, True)}


def floor_app(root: Path) -> Path:
    app = root / "app"
    write_app(app)
    (app / "floor_client.py").write_text(FLOOR_CLIENT)
    pyproject = app / "pyproject.toml"
    text = pyproject.read_text().replace(
        'clientapp = "flowergraph.app.client_app:app"', 'clientapp = "floor_client:app"'
    )
    text = text.replace(
        'fab-include = ["flowergraph/**/*.py"]', 'fab-include = ["flowergraph/**/*.py", "floor_client.py"]'
    )
    pyproject.write_text(text)
    return app


def split(records: list[dict], rounds: set[int]) -> dict:
    """Mean per-message seconds of the training messages of ``rounds``: Flower's start, imports, data, work."""
    msgs = [r for r in records if r["type"] == "train" and r["group"].isdigit() and int(r["group"]) in rounds]
    if not msgs:
        return {}

    def mean(f):
        return statistics.mean(f(r) for r in msgs)

    data = mean(lambda r: r["build_s"] - r["build_imports_s"])
    imports = mean(lambda r: r["imports_s"])
    handled = mean(lambda r: r["end"] - r["start"])
    return {
        "messages": len(msgs),
        "flower_start": mean(lambda r: r["module"] - r["created"]),
        "app_import": mean(lambda r: r["start"] - r["module"]),
        "imports": imports,
        "data": data,
        "work": handled - imports - data,
        "span": mean(lambda r: r["end"] - r["created"]),
    }


def run_mode(mode: str, args, tmp: Path) -> list[dict]:
    times_file = tmp / f"times-{mode}.jsonl"
    os.environ["FLOWERGRAPH_MESSAGE_TIMES"] = str(times_file)
    os.environ.update(zip(ENV_KEYS, MODES[mode]))
    results: list[dict] = []
    with LoopbackDeployment(tmp / f"logs-{mode}", stream=sys.stdout) as dep:
        dep.start_superlink()
        dep.add_nodes([dict(partition_id=k, num_partitions=args.nodes, data_dir=data_dir()) for k in range(args.nodes)])
        dep.wait_for_nodes(args.nodes)
        for i, name in enumerate(args.methods):
            out = tmp / f"{mode}-{i}-{name}"
            config = {"num-clients": args.nodes, "rounds": args.rounds, "out-dir": str(out), **METHODS[name]}
            if name == "floor":
                app, log = floor_app(tmp / f"floor-{i}"), dep.log_dir / "flower.log"
                outcome = submit_run(
                    app, dep.connection, config, env=dep.env, log_file=log, stream=sys.stdout, timeout=args.timeout
                )
            else:
                outcome = dep.run(config, timeout=args.timeout)
            if outcome.status != "completed":
                sys.exit(f"{mode} {name}: run {outcome.run_id} {outcome.flwr_status}; logs in {dep.log_dir}")
            rows = [r for r in read_run(out)["rounds"] if r.get("round", 0) >= 1]
            later = [r["time_s"] for r in rows if 2 <= r["round"] < args.rounds]
            records = [json.loads(line) for line in times_file.read_text().splitlines()]
            mine = [r for r in records if r["run_id"] == outcome.run_id]
            results.append(
                {
                    "run": name,
                    "round_s": statistics.median(later),
                    "first_s": rows[0]["time_s"],
                    "rounds": [r["time_s"] for r in rows],
                    "messages": len(mine),
                    "split": split(mine, set(range(2, args.rounds))),
                    "worker": any(r.get("worker") for r in mine),
                    "entries": sorted({str(r.get("entry")) for r in mine}),
                    "forked": sorted({bool(r.get("forked")) for r in mine}),
                }
            )
            entry, forked = EXPECTED[MODES[mode][1]]
            got = results[-1]  # the mode is what it says
            if (entry is not None and got["entries"] != [entry]) or got["forked"] != [forked]:
                sys.exit(
                    f"{mode} {name}: flwr-clientapp entries {got['entries']}, forked {got['forked']}; "
                    f"expected entry {entry!r}, forked {forked}"
                )
            print(f"== {mode} {name}: median round {results[-1]['round_s']:.2f} s", results[-1]["split"], flush=True)
    return results


def cell_key(settings: dict) -> dict:
    """What a stored cell must match to be reused: its run's settings, not which other modes an invocation lists
    (``--modes``) or whether it asked for fresh cells (``--fresh``)."""
    return {k: v for k, v in settings.items() if k not in ("modes", "fresh")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per run (the median is over 2..R-1)")
    parser.add_argument("--nodes", type=int, default=3, help="SuperNodes (= clients; fedstar needs 3)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, among: {', '.join(MODES)}")
    parser.add_argument(
        "--methods",
        default="floor,fedavg,fedgcn,fedstar,floor",
        help="runs in this order, comma-separated (the floor first and last: the ratio is against their mean)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--fresh", action="store_true", help="recompute the stored cells")
    args = parser.parse_args()
    stop_on_signals()  # SIGTERM unwinds like Ctrl-C: the deployment and the temp folder go (the finally below)
    noop_methods.enable()  # the floor's ServerApp runs method=noop: every deployment process gets the plugin
    args.methods = args.methods.split(",")
    if bad := [m for m in args.modes.split(",") if m not in MODES]:
        parser.error(f"--modes {','.join(bad)}: valid choices: {', '.join(MODES)}")
    store = CellStore("deployment_overhead")
    cells = {}
    tmp = Path(tempfile.mkdtemp(prefix="fg-deploy-overhead-"))
    try:
        for mode in args.modes.split(","):
            record = None if args.fresh else store.load(mode)
            if record is None or not store.current(record) or cell_key(record["settings"]) != cell_key(vars(args)):
                record = store.save(mode, vars(args), run_mode(mode, args, tmp))
            cells[mode] = record
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for key in ("FLOWERGRAPH_MESSAGE_TIMES", *ENV_KEYS):
            os.environ.pop(key, None)

    write_result(
        "deployment_overhead", "What a deployment round costs, against Flower's own floor", report(cells, args, store)
    )


def report(cells: dict[str, dict], args, store: CellStore) -> str:
    """The page: every run of every mode against the mean of that mode's floor runs, where its messages' time went,
    the verdicts, each mode against the default (``warm``) and every round's time."""
    rows, ratios = [], []
    keys = ("flower_start", "app_import", "imports", "data", "work", "span")
    for mode, record in cells.items():
        floors = [r["round_s"] for r in record["row"] if r["run"] == "floor"]
        floor = statistics.mean(floors) if floors else None
        for r in record["row"]:
            s = r["split"]
            if r["run"] != "floor" and floor:
                ratios.append((mode, r["run"], r["round_s"] / floor))
            per_round = s.get("messages", 0) // max(1, args.rounds - 2)
            rows.append(
                [
                    mode + store.flag(record),
                    r["run"],
                    f"{r['round_s']:.2f}",
                    f"{r['round_s'] / floor:.2f}" if floor else "",
                ]
                + [f"{r['first_s']:.2f}", per_round, *(f"{s[k]:.2f}" if k in s else "" for k in keys)]
            )
    verdict = ""
    for mode in cells:
        mine = [(n, r) for m, n, r in ratios if m == mode]
        if mine:
            met = "met" if max(r for _, r in mine) <= 1.5 else "not met"
            listed = ", ".join(f"{n} {r:.2f}x" for n, r in mine)
            verdict += f"**{mode}**: {listed} the floor (the mean of its two floor runs); target <= 1.5x: {met}.\n\n"
    for mode in (m for m in cells if m != "warm" and "warm" in cells):  # each mode against the default
        pairs = []
        for name in dict.fromkeys(r["run"] for r in cells["warm"]["row"]):
            fast, other = ([r for r in cells[m]["row"] if r["run"] == name] for m in ("warm", mode))
            if fast and other:
                a, b = (statistics.mean(r["round_s"] for r in runs) for runs in (fast, other))
                fa, fb = (
                    statistics.mean(r["split"].get("flower_start", float("nan")) for r in runs)
                    for runs in (fast, other)
                )
                pairs.append(
                    f"{name} {a:.2f} s against {b:.2f} s ({a / b:.2f}x; Flower start {fa:.2f} against {fb:.2f} s)"
                )
        verdict += (
            f"**`warm` against `{mode}`** (median round time, the mean where a run is there twice): "
            + "; ".join(pairs)
            + ".\n\n"
        )
    header = ["mode", "run", "round s (median 2..R-1)", "x floor", "round 1 s", "train msgs / round", "Flower start s"]
    header += ["app import s", "imports s", "data s", "work s", "message s"]
    return (
        render("deployment_overhead/setting", nodes=args.nodes, rounds=args.rounds)
        + "\n\n"
        + table(header, rows)
        + "\n\n"
        + render("deployment_overhead/columns")
        + "\n\n"
        + verdict
        + "Round times of every run (s):\n\n"
        + "\n".join(
            f"* {mode} {r['run']}: " + ", ".join(f"{t:.2f}" for t in r["rounds"])
            for mode, record in cells.items()
            for r in record["row"]
        )
    )


if __name__ == "__main__":
    main()
