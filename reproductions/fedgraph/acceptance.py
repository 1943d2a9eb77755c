"""FedGraph's acceptance grid of issue 72: the sharing question, the exchange cadence and the speed question on the
parallel clock, with 5 clients holding dealt METIS blocks (conf/fedgraph-*-metis5.toml), plain METIS-5 and the
paper's synthesis, Cora and CiteSeer, seeds 0-4.

Cells (``reproductions/fedgraph/cells/fedgraph-acceptance.jsonl.xz``, ``cell_store.CellStore``; a finished cell is
skipped, a stopped one resumes from its last checkpoint under ``--work``): ``dataset-data-variant-exchange-sSEED``, one
FedGraph run (``method=fedgraph``) through flowergraph's real ServerApp and ClientApp code in one process. Variants:

* ``fixed`` (kappa 256, p 1), ``k32`` (kappa 32, p 0.1), ``full`` (full batch), ``graphsage`` (25, 10), ``nonshare``
  and ``allshare`` (the fixed policy without / with shared first-layer rows): 40 rounds;
* ``agent``: the DDPG agent rewarded by the parallel clock on the LAN (``fedgraph.round-time=parallel``), trained
  100 episodes (Cora: 20 rounds each, since full batch reaches 85% near round 10; CiteSeer: 10, it reaches 72% in
  round 2); the acceptance reads its last 10 episodes (each restarts training, Algorithm 4).

``exchange``: ``round`` (owners send all boundary rows once per round) or ``iteration`` (the paper's cadence).
Every round record holds the parallel clock's parts, so each cell gives its LAN and WAN times (one run; only the
agent's reward uses one of them, the LAN's). A cell keeps per round [round, accuracy, episode, LAN s, WAN s,
training bytes], the run's totals (training and evaluation bytes, rows relayed) and the mean of the clock's parts;
no per-client or per-policy traces (the agent's last policies are averaged over its last 10 episodes).

    .venv/bin/python reproductions/fedgraph/acceptance.py --parts sharing cadence speed   # every part, in this order
    .venv/bin/python reproductions/fedgraph/acceptance.py --tables-only   # docs/results/fedgraph_acceptance.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.cells import CellStore, cell_cpu, prepare_run_dir  # noqa: E402
from reproductions._runner.common import REPO, add_jobs, data_dir, run_cells, write_result  # noqa: E402
from reproductions.fedgraph.grid import SETTINGS, SOURCES, SPLITS, cross_fraction  # noqa: E402

STORE = "fedgraph-acceptance"
DATASETS = ("Cora", "CiteSeer")
DATA = ("metis", "metis5", "synthesis")  # dealt METIS blocks (the presets), plain METIS-5, the paper's synthesis
PARTS_PER_CLIENT = {"Cora": 16, "CiteSeer": 64}  # conf/fedgraph-*-metis5.toml: >= 30% cross-client edges
ROUNDS = 40
EPISODE = {"Cora": 20, "CiteSeer": 10}
EPISODES = 100
VARIANT_KEYS = {
    "fixed": {"fedgraph.agent": "fixed"},
    "k32": {"fedgraph.agent": "fixed", "fedgraph.batch-size": 32, "fedgraph.prob": 0.1},
    "full": {"fedgraph.agent": "fixed", "fedgraph.sampling": "full"},
    "graphsage": {"fedgraph.agent": "fixed", "fedgraph.sampling": "graphsage"},
    "nonshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "nonshare"},
    "allshare": {"fedgraph.agent": "fixed", "fedgraph.sharing": "allshare"},
    "agent": {"fedgraph.round-time": "parallel", "fedgraph.network": "lan"},
}
VARIANTS = tuple(VARIANT_KEYS)
# the parts, most informative first: (variants, exchanges, data)
PARTS = {
    "sharing": (("fixed", "nonshare", "allshare"), ("round",), ("metis",)),
    "cadence": (("fixed", "k32", "full"), ("round", "iteration"), ("metis",)),
    "speed": (("full", "graphsage", "agent"), ("round",), ("metis",)),
    "sharing-metis5": (("fixed", "nonshare", "allshare"), ("round",), ("metis5",)),
    "speed-iteration": (("agent",), ("iteration",), ("metis",)),
    "synthesis": (("fixed", "full", "graphsage", "nonshare", "allshare"), ("round",), ("synthesis",)),
}


def cell_name(dataset: str, data: str, variant: str, exchange: str, seed: int) -> str:
    return f"{dataset}-{data}-{variant}-{exchange}-s{seed}"


def run_config(dataset: str, data: str, variant: str, exchange: str, seed: int) -> dict:
    config = {
        **SETTINGS,
        "dataset": dataset,
        "num-clients": 5,
        "seed": seed,
        "node.split": SPLITS["full-supervised"][dataset],
        "fedgraph.exchange": exchange,
        "fedgraph.episode-rounds": EPISODE[dataset],
        "rounds": EPISODE[dataset] * EPISODES if variant == "agent" else ROUNDS,
        **VARIANT_KEYS[variant],
    }
    if data == "synthesis":
        config.update({"fedgraph.data": "synthesis", "fedgraph.var": 0.1})
    else:
        config.update(
            {"fedgraph.data": "metis", "fedgraph.parts-per-client": PARTS_PER_CLIENT[dataset] if data == "metis" else 1}
        )
    return config


def summarise(rounds: list[dict], variant: str, episode_rounds: int) -> dict:
    """A cell's lean row from its round records (module docstring)."""
    curve, parts, train_bytes, rows_moved = [], [], 0, 0
    for r in rounds:
        fg = r.get("fedgraph") or {}
        clock = fg["clock"]
        moved = sum(clock["bytes"])
        train_bytes += moved
        phases = r.get("phases") or {}
        rows_moved += sum(phases.get("fedgraph-iterations", {}).get("rows_per_iteration", []))
        exchange = phases.get("fedgraph-exchange", {})
        rows_moved += len(exchange.get("convs", [])) * sum((exchange.get("remote_rows") or {}).values())
        acc = r.get("accuracy")
        curve.append(
            [
                r["round"],
                None if acc is None else round(acc, 5),
                fg.get("episode", 1),
                round(clock["lan_s"], 6),
                round(clock["wan_s"], 6),
                moved,
            ]
        )
        parts.append(clock)
    total = sum(int(r.get("bytes_down", 0)) + int(r.get("bytes_up", 0)) for r in rounds)

    def mean_max(key: str, scale: float = 1.0) -> float:
        return statistics.mean(max(p[key]) * scale for p in parts)

    from flowergraph.methods.fedgraph.maths import NETWORKS

    lan = NETWORKS["lan"]
    clock = {
        "compute_s": statistics.mean(
            max(
                p["seconds_per_mac"] * w + p["seconds_per_step"] * n + p["seconds_per_rows"] * m
                for w, n, m in zip(p["work"], p["steps"], p["rows"])
            )
            for p in parts
        ),
        "lan_transfer_s": mean_max("bytes", 8 / lan.bandwidth_bps),
        "messages": statistics.mean(p["messages"] for p in parts),
        "server_s": statistics.mean(p["server_s"] for p in parts),
        "max_client_mb": mean_max("bytes", 1e-6),
    }
    out = {"curve": curve, "train_bytes": train_bytes, "total_bytes": total, "rows_moved": rows_moved, "clock": clock}
    if variant == "agent":
        out["returns"] = [fg["episode_return"] for r in rounds if "episode_return" in (fg := r.get("fedgraph") or {})]
        last = [r["fedgraph"]["policies"] for r in rounds[-10 * episode_rounds :]]
        out["last_policies"] = [
            [
                round(statistics.mean(p[c][0] for p in last), 1),
                *[round(statistics.mean(p[c][1][k] for p in last), 3) for k in range(2)],
            ]
            for c in range(len(last[0]))
        ]
    return out


def compute_cell(work: Path, dataset: str, data: str, variant: str, exchange: str, seed: int) -> dict:
    from flowergraph.simulation import run_in_process
    from flowergraph.methods.fedgraph import client_graph_of
    from flowergraph.settings import parse_run_config
    from flowergraph.storage import read_run

    started = time.perf_counter()
    config = run_config(dataset, data, variant, exchange, seed)
    out = work / cell_name(dataset, data, variant, exchange, seed)
    full = {
        **config,
        "data-dir": data_dir(),
        "out-dir": str(out),
        "state-dir": str(out / "client-state"),
        "checkpoint-every": 100,
        "checkpoint-keep": 1,
    }
    state = prepare_run_dir(out, SOURCES)
    if state != "completed":
        if state == "resume":
            full["resume-from"] = str(out)
        run_in_process(full)
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    s = parse_run_config({**config, "data-dir": data_dir()})
    graphs = [client_graph_of(s, k) for k in range(s.num_clients)]
    return {
        "kind": "acceptance",
        "dataset": dataset,
        "data": data,
        "variant": variant,
        "exchange": exchange,
        "seed": seed,
        "episode_rounds": EPISODE[dataset],
        "cross_fraction": cross_fraction(graphs),
        "client_nodes": [int(g.num_nodes) for g in graphs],
        "labelled": [int(g.train_mask.sum()) for g in graphs],
        **summarise(rounds, variant, EPISODE[dataset]),
        "final_accuracy": rounds[-1].get("accuracy"),
        "cell_s": time.perf_counter() - started,
    }


def cells(args) -> list[tuple[str, str, str, str, int]]:
    """(dataset, data, variant, exchange, seed) in the order asked: part by part, dataset by dataset, seed by seed."""
    out = []
    for part in args.parts:
        variants, exchanges, datas = PARTS[part]
        for dataset in args.datasets:
            for seed in args.seeds:
                for data in datas:
                    for exchange in exchanges:
                        out += [(dataset, data, v, exchange, seed) for v in variants]
    return list(dict.fromkeys(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", choices=tuple(PARTS), default=["sharing", "cadence", "speed"])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedgraph-acceptance"))
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    add_jobs(parser, "the clock of these cells is a model, so running side by side changes none of their numbers")
    args = parser.parse_args()
    from reproductions.fedgraph.acceptance_report import report
    from flowergraph.tasks import configure_torch

    configure_torch(1)
    store = CellStore(STORE, SOURCES)
    pending = []
    if not args.tables_only:
        for key in cells(args):
            record = store.load(cell_name(*key))
            if record is None or (args.rerun_stale and not store.current(record)):
                pending.append((Path(args.work), *key))
    if pending:
        print(f"{len(pending)} cells to compute, {min(args.jobs, len(pending))} at a time", flush=True)
    failed = []
    for (_, *key), row, error in run_cells(compute_cell, pending, args.jobs):
        if error is not None:
            print(f"cell {cell_name(*key)} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(cell_name(*key))
            continue
        print(f"cell {cell_name(*key)}: final accuracy {row['final_accuracy']}, {row['cell_s']:.0f} s", flush=True)
        store.save(cell_name(*key), run_config(*key), row)
    rows = [{**r["row"], "stale": store.flag(r), "cpu": cell_cpu(r)} for r in store.records()]
    write_result(
        "fedgraph_acceptance",
        "FedGraph: issue 72's acceptance (sharing, cadence, parallel clock)",
        report(rows),
        cell_commands=store.commands(),
        sources=SOURCES,
    )
    if failed:
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


if __name__ == "__main__":
    main()
