"""ASFGNN on Flower (Zheng et al., Tables 3, 5, 6 and 7): tuned accuracy of SFGNN and its baselines, the JS
ablation over alpha, a control at fixed hyper-parameters, and the tuning cost of SMAC against grid and random
search.

Every cell is one ASFGNN run (``method=asfgnn`` / ``asfgnn-cm``) through flowergraph's real ServerApp and ClientApp
code in one process (:mod:`flowergraph.app.inprocess`; equal to the core's reference loops and to a Flower
simulation, which tests/test_asfgnn.py checks). Each cell is kept in ``reproductions/asfgnn/cells/asfgnn.jsonl.xz`` with
its settings and code state (``cell_store.CellStore``); a finished cell is skipped, a stopped run resumes from its last
checkpoint under ``--work``.

Cells:

* ``tuned`` (dataset, setting, alpha, method, budget, seed): a search (SMAC by default: ``asfgnn.search=smac``,
  ``--facade``) of the budget's trials x T rounds over the paper's space; the row is the best trial (best mean
  client validation accuracy M) and its mean client test accuracy. Methods: ``sfgnn``, ``sfgnn-nojs``
  (``asfgnn.js=false``), ``fl``, ``sp``, ``cm`` (``method=asfgnn-cm``). Table 3 (Cora, CiteSeer, alpha 1: CM, FL,
  SP, SFGNN), Table 5 (``setting=graph``: FL, SFGNN), Table 6 / Fig. 3 (Cora, alpha 0.6..1.0: SFGNN with and
  without JS, FL, SP).
* ``sizes`` and ``steps``: Table 6's controls at alpha (``--alphas``), tuned as Table 6: the paper's client sizes
  read literally (``--sizes``: ``asfgnn.sizes``, overlapping clients; ours are disjoint) and more full-batch steps
  per round (``--local-steps``: ``asfgnn.local-epochs``; the paper's and Table 6's cells take 1).
* ``control`` (method, seed): no search, Table 4's Cora hyper-parameters (A: K 4, B: K 2; lr 0.01, L2 0.005, d 0.5;
  hidden 128) for SFGNN, SFGNN without JS and SP: the same per-client networks with and without the shared
  discriminator, so the gap is what sharing (and mixing) gives, not what tuning gives.
* ``search`` (driver, budget, seed): SFGNN on Cora tuned by ``smac``, ``grid`` (the paper's grid, shuffled) or
  ``random``, every trial's objective and wall time kept; Table 7's shape is the trials and the time each driver
  needs to come within 0.5 points of the best validation accuracy any of them reached.

The paper's T (rounds per trial) and number of trials are not given: ``paper`` uses T = 200 (GCN's epochs) and 100
trials (SMAC's default), ``long`` 10 x 100 (1.5-9 min per Cora cell here: is the gap to the paper the short trials?),
``default`` conf/asfgnn-cora.toml's 8 x 24, ``tuning`` 40 x 24 (Table 7 only: 8 trials are too few for SMAC to
leave its initial design), ``quick`` 3 x 10 (a smoke check). ``--methods`` and ``--alphas`` pick
a part's rows (in that order), e.g. Table 3's SP and SFGNN first.

    .venv/bin/python reproductions/asfgnn/run.py --quick --parts table3   # smoke check (minutes)
    .venv/bin/python reproductions/asfgnn/run.py --budget default         # every table at the 2-core budget
    .venv/bin/python reproductions/asfgnn/run.py --parts control          # the control (fixed hyper-parameters)
    # alpha = 1 on Cora with 10 x 100 trials:
    .venv/bin/python reproductions/asfgnn/run.py --budget long --datasets Cora --parts table3 table6 --alphas 1.0 \
        --methods sp sfgnn sfgnn-nojs
    # Table 7, 40 trials:
    .venv/bin/python reproductions/asfgnn/run.py --budget tuning --datasets Cora --parts search
    # Table 3 at the paper's budget, 16 cells at once:
    .venv/bin/python reproductions/asfgnn/run.py --budget paper --facade blackbox --parts table3 --jobs 16
    # Table 6's control: the paper's sizes:
    .venv/bin/python reproductions/asfgnn/run.py --budget long --datasets Cora --parts sizes --alphas 0.9 \
        --methods sfgnn-nojs sfgnn --seeds 0 1 2 3 4
    # 5 local steps per round, not 1:
    .venv/bin/python reproductions/asfgnn/run.py --budget long --datasets Cora --parts steps --alphas 1.0 0.9 \
        --methods sfgnn --seeds 0 1 2 3 4
    # rewrite docs/results/asfgnn*.md from the stored cells:
    .venv/bin/python reproductions/asfgnn/run.py --tables-only
    # do stored cells repeat on this code?
    .venv/bin/python reproductions/asfgnn/run.py --quick --parts table3 control --check-repeats --work /tmp/w

The parts: this file is the command; ``grid.py`` the cells (which exist, their run configurations) and the paper's
numbers; ``compute.py`` how one is computed; ``parking.py`` a stopped cell's progress kept in the repository;
``report.py`` the tables (Table 6 ``table6.py``, the rows' helpers ``rows.py``), their prose filled into the templates
of ``templates/``; ``figures.py`` the figures. ``core_check.py`` checks the Flower-free core at fixed
hyper-parameters.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions.asfgnn.compute import compute_cell, run_cell  # noqa: E402
from reproductions.asfgnn.grid import ALPHAS, BUDGETS, METHODS, SOURCES, completed, grid  # noqa: E402
from reproductions.asfgnn.grid import store as cell_store  # noqa: E402
from reproductions.asfgnn.parking import park_run, parked_path, write_parked  # noqa: E402
from reproductions.asfgnn.report import parked_note, tables  # noqa: E402
from reproductions._runner.cells import run_dir_current  # noqa: E402
from reproductions._runner.common import REPO, add_jobs, run_cells, write_result  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke check: quick budget, 1 seed")
    parser.add_argument("--budget", choices=tuple(BUDGETS), default="paper")
    parser.add_argument("--facade", choices=("hpo", "blackbox"), default="hpo", help="SMAC's facade")
    parser.add_argument("--datasets", nargs="+", default=["Cora", "CiteSeer"], choices=["Cora", "CiteSeer"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["table3", "table5", "table6", "control", "search"],
        choices=["table3", "table5", "table6", "sizes", "steps", "control", "search"],
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["paper-independent"],
        choices=["paper", "paper-independent"],
        help="the sizes part's readings of the paper's client sizes (asfgnn.sizes)",
    )
    parser.add_argument("--local-steps", nargs="+", type=int, default=[5], help="the steps part's steps per round")
    parser.add_argument("--work", default=str(REPO / "results" / "bench-asfgnn"), help="run folders (not in git)")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=list(METHODS),
        choices=METHODS,
        help="the methods a part runs, in this order (a part skips the others)",
    )
    parser.add_argument("--alphas", nargs="+", type=float, default=list(ALPHAS), help="Table 6's alphas")
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    parser.add_argument(
        "--park",
        action="store_true",
        help="no computing: keep the progress of the selected cells' stopped runs under --work in "
        "reproductions/asfgnn/cells/asfgnn/parked/ (commit it), so a later run on another machine resumes "
        "them; see the parking comment in parking.py",
    )
    parser.add_argument(
        "--rederive",
        action="store_true",
        help="recompute the rows of current cells whose run folder under --work is finished (no "
        "training): columns added since, e.g. oracle_test",
    )
    parser.add_argument(
        "--check-repeats",
        action="store_true",
        help="no storing: recompute the selected stored cells under --work and compare each with its stored row "
        "(what SAME_AS in grid.py rests on); use a --work folder of its own",
    )
    add_jobs(parser, "their wall times are then measured side by side")
    args = parser.parse_args()
    if bad := [a for a in args.alphas if a not in ALPHAS]:
        parser.error(f"--alphas {bad}: Table 6's alphas are {list(ALPHAS)}")
    if args.quick:
        args.budget, args.seeds = "quick", args.seeds[:1]
    return args


def main() -> None:
    args = parse_args()
    from flowergraph.tasks import configure_torch

    configure_torch(1)
    store = cell_store()
    work = Path(args.work)
    if args.check_repeats:
        sys.exit(check_repeats(store, grid(args), work))
    rows, pending = stored_and_pending(store, args, work)
    if args.park:
        park(pending, work)
        return
    failed = compute(store, pending, args.jobs, rows)
    b = args.budget
    seen = {r["cell"] for r in rows}  # every stored cell of this budget goes into the tables
    for record in store.records():
        if record["cell"] not in seen and record["row"].get("budget") == b:
            rows.append({**record["row"], "cell": record["cell"], "stale": store.flag(record)})
    name = "asfgnn" if b == "paper" else f"asfgnn_{b}"
    write_result(
        name,
        f"ASFGNN on Flower: Tables 3, 5, 6, a control and Table 7's tuning cost (budget {b})",
        tables(rows, b) + parked_note(b),
        cell_commands=store.commands(lambda row: row.get("budget") == b),
        sources=SOURCES,
    )
    if failed:  # the tables above hold every cell that finished; the failed ones resume from their checkpoints
        sys.exit(f"{len(failed)} cells failed (tracebacks above): {', '.join(failed)}")


def stored_and_pending(store, args, work: Path) -> tuple[list[dict], list[tuple[Path, str, dict, dict]]]:
    """The rows of the selected cells that are stored (re-derived from their run folders with ``--rederive``), and
    the cells to compute, in the order asked for."""
    rows: list[dict] = []
    pending: list[tuple[Path, str, dict, dict]] = []  # cells to compute, in the order asked for
    for name, config, meta in grid(args):
        record = store.load(name)
        if record is not None and args.rederive and store.current(record) and completed(work / name):
            # the row again from the cell's finished run folder (no training): picks up columns added since
            row = {**meta, **run_cell(work, name, config), "cell_s": record["row"].get("cell_s")}
            rows.append({**store.save(name, config, row)["row"], "cell": name, "stale": ""})
        elif record is not None and not (args.rerun_stale and not store.current(record)):
            rows.append({**record["row"], "cell": name, "stale": store.flag(record)})
        elif not args.tables_only:
            pending.append((work, name, config, meta))
    return rows, pending


def park(pending: list[tuple[Path, str, dict, dict]], work: Path) -> None:
    """Park the stopped runs of the ``pending`` cells under ``work`` (parking.py)."""
    for _, name, _, _ in pending:
        out = work / name
        if not (out / "checkpoints").is_dir() or completed(out) or not run_dir_current(out, SOURCES):
            print(f"{name}: no stopped run of this code under {work}: nothing to park", flush=True)
            continue
        try:
            parked = park_run(out)
        except ValueError as exc:  # a checkpoint inside a trial: say so, park the others
            print(f"{name}: not parked: {exc}", file=sys.stderr, flush=True)
            continue
        size = write_parked(parked, path := parked_path(name))
        print(
            f"parked {name}: {parked['trials_finished']} trials finished (round {parked['round']}), "
            f"{parked['wall_s'] / 3600:.2f} h so far -> {path.relative_to(REPO)} ({size / 1e6:.1f} MB)",
            flush=True,
        )


def compute(store, pending: list[tuple[Path, str, dict, dict]], jobs: int, rows: list[dict]) -> list[str]:
    """Compute the ``pending`` cells, ``jobs`` at a time, storing each and adding its row to ``rows`` as it
    finishes; the names of the cells that failed."""
    if pending:
        print(f"{len(pending)} cells to compute, {min(jobs, len(pending))} at a time", flush=True)
    failed = []
    for (_, name, config, _), row, error in run_cells(compute_cell, pending, jobs):
        if error is not None:
            print(f"cell {name} failed:\n{error}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        print(f"cell {name}: best val {row['best_val']:.4f}, test {row['test']:.4f}, {row['cell_s']:.0f} s", flush=True)
        rows.append({**store.save(name, config, row)["row"], "cell": name, "stale": ""})
        parked_path(name).unlink(missing_ok=True)  # its progress is the stored cell now
    return failed


def check_repeats(store, cells: list[tuple[str, dict, dict]], work: Path) -> int:
    """Recompute each stored cell of ``cells`` in ``work`` and compare its row (best trial and configuration,
    accuracies, every trial's numbers; not the times) with the stored one, on the columns the stored row has (a
    cell stored before a column existed, e.g. ``oracle_test``, lacks it); 1 if any differs."""

    def comparable(row: dict, stored: dict) -> dict:
        keep = [k for k in ("best_trial", "best_config", "best_val", "test", "oracle_test") if k in stored]
        return {
            **{k: row.get(k) for k in keep},
            "trials": [{k: v for k, v in t.items() if k != "time_s"} for t in row["trials"]],
        }

    differ = 0
    for name, config, meta in cells:
        record = store.load(name)
        if record is None:
            continue
        row = compute_cell(work, name, config, meta)
        same = comparable(row, record["row"]) == comparable(record["row"], record["row"])
        differ += not same
        print(
            f"{name} (stored by {record['code']['sources']}, {record['code']['commit']}): "
            f"{'repeats' if same else 'DIFFERS'}: test {row['test']!r} vs {record['row']['test']!r}, best val "
            f"{row['best_val']!r} vs {record['row']['best_val']!r}; this code {store.code['sources']}",
            flush=True,
        )
    return int(differ > 0)


if __name__ == "__main__":
    main()
