"""FedGraph (Chen et al., IEEE TPDS) against its baselines and ablations, in the shapes of the paper's figures:
accuracy against wall time (Fig. 7: FedGraph's DDPG policies, full batch, GraphSAGE and FastGCN sampling, all with
the same cross-client exchange), cross-client sharing (Fig. 10: FedGraph, nonShare, allShare), the DDPG learning
curve (return per episode), heterogeneity (Fig. 9: time to a target accuracy at variance 0.1, 0.5, 1), the agent
against a fixed policy, and the effect of one-round-stale rows against the same-round exchange.

Cells (each kept in ``reproductions/fedgraph/cells/fedgraph.jsonl.xz`` (``cell_store.CellStore``) with its settings and
code state; a finished cell is skipped, a stopped run resumes from its last checkpoint under ``--work``): ``run``
(dataset, variant, var, budget, seed) is one FedGraph run (``method=fedgraph``) through flowergraph's real ServerApp and
ClientApp code in one process (:mod:`flowergraph.app.inprocess`, equal to a Flower simulation, which
``tests/test_fedgraph.py`` checks). Variants:

* ``fedgraph``: the DDPG agent's policies (episodes restart training: Algorithm 4), eq. 9's delta the server's
  clock (the paper's);
* ``fedgraph-work``: the same agent with delta = the largest forward multiply-adds of a client in the round
  (``fedgraph.round-time=work``: deterministic, no machine noise in the reward);
* ``fedgraph-client``: the same agent with delta = the slowest client's local training time
  (``fedgraph.round-time=slowest-client``: clients running in parallel);
* ``fedgraph-work-lambda``: ``fedgraph-work`` with the paper's target accuracy Lambda (Fig. 6: Cora 90.16%,
  CiteSeer 87.9%) instead of the presets' 0.8: the accuracy term is then 128^-0.1 = 0.62 (Cora) times as large
  at the same accuracy, a tilt of eq. 9's trade towards less work;
* ``fixed``: FedGraph sampling with a fixed policy (kappa = batch 256, p = 1 for every convolution);
* ``full``, ``graphsage``, ``fastgcn``: the baselines (fixed, the same exchange);
* ``nonshare``, ``allshare``: the sharing ablations (fixed policy);
* ``one-round``: FedGraph with one-round-stale rows (no exchange phase).

Work (the "Work instead of wall time" table): every round record holds the largest forward multiply-adds of any
client (``max_gmacs``) and the slowest client's local training time; the table sums work along the curves and
checks, over the fixed policies' rounds, how well work predicts the measured time.

Wall time is the run's own clock (``elapsed_s`` of every round record: exchange, local training, aggregation,
agent, evaluation; data loading and start-up excluded). Accuracy is the federated test accuracy (test-set-weighted
over clients, each with one exact forward on its rows). For ``fedgraph`` the curve and the time to the target are
taken in the last episode (from its first round), since every episode restarts training.

    .venv/bin/python reproductions/fedgraph/run.py --quick            # smoke check: 3 clients, 6 rounds, minutes
    .venv/bin/python reproductions/fedgraph/run.py --budget default   # conf/fedgraph-cora.toml's budget (5 clients)
    .venv/bin/python reproductions/fedgraph/run.py                    # the paper's (20 clients, 300 rounds): hours
    .venv/bin/python reproductions/fedgraph/run.py --tables-only      # rewrite docs/results/fedgraph*.md from cells
    # 8 cells at once (a bigger machine; the wall-time columns are then measured side by side):
    .venv/bin/python reproductions/fedgraph/run.py --jobs 8
    # the paper's budget, one seed (~25 min):
    .venv/bin/python reproductions/fedgraph/run.py --budget paper --datasets Cora --seeds 0 --variants fedgraph \
        fixed full --vars 0.1 --parts main

Split (``--split``): the paper draws "a training set, a validation set and a test set" at random without sizes and
takes batch 256 from FastGCN (its ref. [20]); the default ``full-supervised`` is FastGCN's split: 500 validation
and 1000 test nodes at random, every other node for training (Cora 1208/500/1000, CiteSeer 1827/500/1000), so a
client of the synthesis holds 158-1208 labelled Cora nodes (variance 0.1) and batch 256 is a real mini-batch.
``public`` (Planetoid's 140 training nodes: a client holds ~110, so batch 256 *is* full batch) keeps the first
cells' names.

FastGCN control (``--parts layers``): is FastGCN's failure at the paper's layer size (256) the method or our code?
Client 0 of the seed's synthesis alone (no sharing, 40 rounds of the same local iterations, Flower-free core) with
full batch and with FastGCN at layer sizes 256 ... 16384: an unbiased sampler approaches full batch as the layer
grows.

Sharing control (``--parts sharing``): FedGraph (fixed policy), nonShare and allShare on a disjoint random
partition (``fedgraph.data=random``), where 80% of the clients' edge ends cross clients, against the synthesis, where
each client holds ~80% of the nodes and a third of its edge ends cross; the tables give each setting's fraction of
cross-client edge ends, which is what sharing can recover.

The parts: this file is the command; ``grid.py`` the cells (which exist, their names and run
configurations, how one is computed); ``curves.py`` what a cell's curve says (episodes, times to a target,
accuracy at a budget); ``report.py`` and ``learning.py`` the tables, their prose filled into the
templates of ``reproductions/fedgraph/templates/``; ``figures.py`` the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.cells import CellStore, cell_cpu  # noqa: E402
from reproductions._runner.common import REPO, add_jobs, run_cells, write_result  # noqa: E402
from reproductions.fedgraph.curves import TARGET, time_to  # noqa: E402
from reproductions.fedgraph.figures import plot  # noqa: E402
from reproductions.fedgraph.grid import (
    BUDGETS,
    DATASETS,
    EARLIER_COMMANDS,
    LAYER_SIZES,
    PARTS,
    SOURCES,
    SPLITS,  # noqa: E402
    STORE,
    VARIANTS,
    VARS,
    cell_name,
    cells,
    compute_cell,
    layers_cell,
    layers_name,
    run_config,
)
from reproductions.fedgraph.report import tables  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke check: 3 clients, 6 rounds, 1 seed")
    parser.add_argument("--budget", choices=tuple(BUDGETS), default="paper")
    parser.add_argument(
        "--split",
        choices=tuple(SPLITS),
        default="full-supervised",
        help="node split (module docstring); every split's stored cells go into the tables",
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--vars",
        nargs="+",
        type=float,
        default=list(VARS),
        help="heterogeneity levels (variance of xi); only fedgraph and full run at every level",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedgraph"), help="run folders (not in git)")
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    add_jobs(parser, "their wall-time columns are then measured side by side")
    args = parser.parse_args()
    if args.quick:
        args.budget, args.seeds, args.datasets, args.vars = "quick", args.seeds[:1], ["Cora"], [0.1]
    return args


def compute_layers(args, store: CellStore) -> None:
    """FastGCN against its layer size: the cells asked for that are not stored (or are stale with --rerun-stale)."""
    for dataset in args.datasets:
        for seed in args.seeds:
            name = layers_name(dataset, seed, args.split)
            record = store.load(name)
            if record is not None and not (args.rerun_stale and not store.current(record)):
                continue
            started = time.perf_counter()
            row = layers_cell(dataset, seed, args.split)
            row["cell_s"] = time.perf_counter() - started
            print(f"cell {name}: {json.dumps(row['results'])}, {row['cell_s']:.1f} s", flush=True)
            store.save(
                name, {"dataset": dataset, "seed": seed, "split": args.split, "layer_sizes": list(LAYER_SIZES)}, row
            )


def compute_runs(args, store: CellStore) -> list[str]:
    """The run cells asked for that are not stored, ``--jobs`` at a time, each stored as it finishes; the names
    of those that failed."""
    work, b = Path(args.work), args.budget
    pending = []
    if not args.tables_only:
        for dataset, variant, var, seed, data in cells(args):
            record = store.load(cell_name(dataset, variant, var, b, seed, args.split, data))
            if record is None or (args.rerun_stale and not store.current(record)):
                pending.append((work, dataset, variant, var, b, seed, args.split, data))
    if pending:
        print(f"{len(pending)} cells to compute, {min(args.jobs, len(pending))} at a time", flush=True)
    failed = []
    for (_, *key), row, error in run_cells(compute_cell, pending, args.jobs):
        name = cell_name(*key)
        if error is not None:
            print(f"cell {name} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        print(
            f"cell {name}: final accuracy {row['final_accuracy']}, time to {TARGET:.0%} "
            f"{time_to(row)}, {row['cell_s']:.1f} s",
            flush=True,
        )
        store.save(name, run_config(*key), row)
    return failed


def main() -> None:
    args = parse_args()
    from flowergraph.tasks import configure_torch

    configure_torch(1)
    store = CellStore(STORE, SOURCES)
    b = args.budget
    if not args.tables_only and "layers" in args.parts:
        compute_layers(args, store)
    failed = compute_runs(args, store)
    rows = []
    for record in store.records():
        rows.append(
            {
                **record["row"],
                "cell": record["cell"],
                "stale": store.flag(record),
                "command": record.get("command"),
                "cpu": cell_cpu(record),
            }
        )
    body = []
    for split in SPLITS:
        part = tables(rows, b, split)
        if not part:
            continue
        figure = plot(rows, b, split)
        body.append(part + (f"\n\n![accuracy vs wall time, DDPG returns]({figure})\n" if figure else ""))
    name = "fedgraph" if b == "paper" else f"fedgraph_{b}"
    recorded = store.commands(lambda row: row.get("budget") == b)
    unrecorded = any(r.get("budget") == b and not r.get("command") for r in rows)
    write_result(
        name,
        f"FedGraph: sampling baselines, sharing ablations, DDPG, heterogeneity (budget {b})",
        "\n\n".join(body),
        cell_commands=recorded + (EARLIER_COMMANDS.get(b, []) if unrecorded else []),
        sources=SOURCES,
    )
    if failed:  # the tables above hold every cell that finished; the failed ones resume from their checkpoints
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


if __name__ == "__main__":
    main()
