"""FedStar and its baselines on the paper's settings (Tan et al., AAAI 2023, Tables 1-3), with the paper's
numbers and, where known, the authors' code's side by side.

Every cell (setting x variant x training seed x structure x split seed) is a federated run of 200 rounds, 1 local
epoch, batch 128, Adam lr 1e-3, weight decay 5e-4, hidden 64, on the authors' split (scikit-learn's stratified
train_test_split with split seed 123, ``graph.split=paper``), run through flowergraph's real ServerApp and
ClientApp code in one process (:mod:`flowergraph.app.inprocess`: the strategy, the clients, their persistent state
and the records are those of a Flower run; Flower's transport is left out, which changes no number: tests check
the two agree to 1e-6). The reported accuracy is the paper's: each client's test accuracy after the last round,
averaged over clients; mean +- std over training seeds (the authors' seeds 1-5).

Resumable across sessions and fresh clones: a finished cell is kept in the repository
(``reproductions/fedstar/cells/fedstar-paper-split.jsonl.xz``, a few KB: its settings, its row, its accuracy curve and
the code state that produced it, see ``reproductions/_runner/cells.py: CellStore``) and skipped; its full run directory
stays under ``--work`` (ignored by git); a cell that was stopped resumes from its last checkpoint there (every 50
rounds). A cell computed by other code than the current one (another hash of the sources on FedStar's path) is flagged
in the tables; ``--rerun-stale`` runs it again. ``--jobs 2`` runs two cells at once (one thread each).
``tests/test_fedstar_cells.py`` re-runs a stored cell for 10 rounds and compares it with its stored curve.

    .venv/bin/python reproductions/fedstar/run.py                # Table 1: CHEM seeds 1-5, BIO-CHEM 1-3, others 1
    .venv/bin/python reproductions/fedstar/run.py --settings CHEM --seeds 1 2 --jobs 2
    .venv/bin/python reproductions/fedstar/run.py --ablation     # Tables 2 and 3 on BIO-CHEM (seed 1)
    .venv/bin/python reproductions/fedstar/run.py --split-spread # CHEM over 5 split seeds, training seed 1
    .venv/bin/python reproductions/fedstar/run.py --tables-only  # rewrite the tables from finished cells

COLLAB is not in the offline dataset collection: BIO-CHEM-SN and BIO-SN-CV run without it (12 and 8 datasets
instead of 13 and 9), which the tables say. The cells of flowergraph's earlier per-class split (an unrecorded older
code state, ``cells/fedstar.jsonl.xz``) are summarised at the end for comparison, never mixed in.

The parts: this file is the command and assembles the results file; ``grid.py`` the cells (which exist,
their names and run configurations, how one is computed and stored); ``report.py`` the tables, their prose
filled into the templates of ``templates/``; ``figures.py`` the figures. ``embeddings.py`` times the structure
embeddings, ``speed.py`` FedStar's speed in Flower's simulation against the authors' code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.cells import CellStore, run_dir_current  # noqa: E402
from reproductions._runner.common import REPO, add_jobs, run_cells, write_result  # noqa: E402
from reproductions.fedstar.figures import plot_settings, plot_summary  # noqa: E402
from reproductions.fedstar.grid import (  # noqa: E402
    LABELS,
    SETTINGS,
    SOURCES,
    SPLIT_SEED,
    SPREAD_SPLITS,
    SPREAD_VARIANTS,
    STORE_NAME,
    TABLE1,
    Cell,
    as_row,
    cell_name,
    cells,
    keep_cell,
    load_cell,
    row_of,
    run_cell,
)
from reproductions.fedstar.report import tables  # noqa: E402
from reproductions._runner.prose import render  # noqa: E402


def results(rows: list[dict], rounds: int, eval_every: int, code: dict, missing: list[Cell]) -> str:
    """docs/results/fedstar.md's body: the settings, the tables of ``rows`` (every stored cell of ``rounds``), the
    figures, and the asked-for cells not run yet (``missing``). ``code``: the current sources' code state."""
    ordered = sorted(
        rows,
        key=lambda r: (
            SETTINGS.index(r["setting"]),
            list(LABELS).index(r["variant"]),
            r["structure"],
            r["split_seed"] != SPLIT_SEED,
            r["split_seed"],
            r["seed"],
        ),
    )
    body = (
        render(
            "fedstar/settings",
            rounds=rounds,
            eval_every=eval_every,
            cores=os.cpu_count(),
            sources=code["sources"],
            commit=code["commit"],
            dirty=", dirty" if code["dirty"] else "",
        )
        + "\n\n"
        + tables(ordered, rounds, eval_every)
    )
    plots = plot_settings(ordered)
    summary_plot = plot_summary(ordered)
    if summary_plot:
        body += f"\n\nTable 1 as a picture: `{summary_plot}`."
    if plots:
        body += "\n\nCurves (mean client accuracy vs round): " + ", ".join(f"`{p}`" for p in plots) + "."
    if missing:
        body += "\n\n**Not run yet** (the table is resumable: the same command runs only these): " + ", ".join(
            cell_name(*c) for c in missing
        )
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--variants", nargs="+", default=list(TABLE1), choices=list(LABELS))
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None,
        help="training seeds (default: CHEM 1-5, BIO-CHEM 1-3, the others 1)",
    )
    parser.add_argument("--ablation", action="store_true", help="the BIO-CHEM ablations (first seed)")
    parser.add_argument(
        "--split-spread",
        action="store_true",
        help=f"CHEM's {', '.join(SPREAD_VARIANTS)} over split seeds {SPREAD_SPLITS} (training seed 1)",
    )
    parser.add_argument("--only-extra", action="store_true", help="with --ablation/--split-spread: not Table 1")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--work", default=str(REPO / "results" / "bench-fedstar-paper-split"))
    parser.add_argument("--tables-only", action="store_true", help="no new runs: the tables from finished cells")
    parser.add_argument("--rerun-stale", action="store_true", help="re-run cells computed by other code")
    add_jobs(parser)
    args = parser.parse_args()
    store = CellStore(STORE_NAME, SOURCES)
    asked = cells(args)
    # every cell in the store goes into the tables (a table of CHEM alone still shows the rest); new runs only
    # for the cells asked for
    rows = {}
    for record in store.records():
        if record["row"].get("rounds") == args.rounds:
            row = as_row(record, store)
            rows[(row["setting"], row["variant"], row["seed"], row["structure"], row["split_seed"])] = row
    pending = []
    for cell in asked:
        out = Path(args.work) / cell_name(*cell)
        done = out / "summary.json"
        if load_cell(store, cell, args.rounds, args.rerun_stale) is not None:
            continue
        if (
            done.exists()
            and json.loads(done.read_text()).get("rounds_completed") == args.rounds
            and json.loads(done.read_text()).get("status") == "completed"
            and (out / "bench.json").exists()
            and run_dir_current(out, SOURCES)
        ):
            rows[cell] = keep_cell(store, cell, row_of(out, cell), args.rounds, args.eval_every)  # finished in --work
        elif not args.tables_only:
            pending.append(cell)
    print(f"{len(rows)} finished cells in the store, {len(pending)} to run", flush=True)
    failed = []
    for (_, cell, _, _), result, error in run_cells(
        run_cell, [(args.work, c, args.rounds, args.eval_every) for c in pending], args.jobs
    ):
        if error is not None:
            print(f"{cell_name(*cell)} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(cell_name(*cell))
            continue
        row = rows[cell] = keep_cell(store, cell, result, args.rounds, args.eval_every)
        print(
            f"{cell_name(*cell)}: {row['accuracy']:.2f}% after {row['rounds']} rounds ({row['wall_s']:.0f} s)",
            flush=True,
        )
    missing = [c for c in asked if c not in rows]
    body = results(list(rows.values()), args.rounds, args.eval_every, store.code, missing)
    write_result(
        "fedstar",
        "FedStar and baselines vs the paper (Tables 1-3)",
        body,
        cell_commands=store.commands(),
        sources=SOURCES,
    )
    if failed:  # the tables above hold every cell that finished; the failed ones resume from their checkpoints
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


if __name__ == "__main__":
    main()
