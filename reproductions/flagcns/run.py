"""FL-AGCNS on the paper's settings (Wang et al., Tables 3 and 5): the searched architecture against FL-Random at
the same wall-time budget and against fixed architectures trained federatedly, the ablations on Cora, the best
fitness per generation, and the search's speed in Flower's simulation against no-op clients.

Data: the paper's (METIS into 3 clients, 20 training nodes per class, 500 validation, 1000 test); the split and
METIS are seeded by the cell's seed, so every row of one seed sees the same clients. ``--split`` picks the nodes:
``public`` (the Planetoid public split, 20 training nodes per class, 500 validation, 1000 test, the same on every
seed, as the authors' code of the paper's time reads Cora and CiteSeer, commit d360d44 ``utils.py``, and as the
presets do since 2026-12-01), ``first-per-class`` (the default, so that the commands stored with older cells keep
their meaning: the first 20 of each class in node order train, 500 validation and 1000 test nodes at random, their
2022 rework's ``make_data.py``; on Cora the training nodes are the public split's) or
``per-class`` (20 at random, flowergraph's first choice). Cells of the ``per-class`` split keep their old names,
the others end in ``-<split>``; each split gets its own tables.

Cells (each kept in ``reproductions/flagcns/cells/flagcns/<cell>.json`` with its settings and code state, the runner's
``CellStore``; a finished cell is skipped, a stopped search resumes from its last checkpoint under ``--work``):

* ``search`` (dataset, variant, budget, seed): an FL-AGCNS run (``method=flagcns``) through flowergraph's real
  ServerApp and ClientApp code in one process (:mod:`flowergraph.app.inprocess`; equal to a Flower simulation, which
  the tests check), search then its own retraining; the chosen architecture is then retrained ``--retrains`` times
  from scratch (init seeds 0..R-1, 50 epochs each, the reference's federated retraining in one process:
  ``federated_train_architecture``, which the Flower retraining equals) and FLACC is their mean. Variants: ``feo``
  (FL-AGCNS), ``controller-eo``, ``client-eo`` (gamma fixed to 0 / 1) and ``random-partition`` (FEO on a random
  node partition).
* ``random`` (dataset, budget, seed): FL-Random at the same wall time as the seed's ``feo`` search: random codes of
  the same space, each trained federatedly for 50 epochs (the paper: "we evaluate each GCN architecture for 50
  epochs"), the one with the best federated validation accuracy kept, then retrained like the searched one.
* ``fixed`` (dataset, architecture, seed): GCN, GAT, SAGE, SGC, APPNP as codes of the space (two layers between
  the input and output structures; ``methods/flagcns/maths/space.py: BASELINES``), retrained the same way.
* ``reference`` (dataset, architecture, seed): the same five as the authors' code builds them
  (``methods/flagcns/maths/baselines.py``: their own small PyG networks, whose parameter counts are the paper's Table 3
  column), retrained the same way (the authors' ``server.py --mode eval``: 50 epochs, 10 retrainings).
* ``outputs`` (dataset, budget, seed): a control for the searched architecture: the seed's ``feo`` code retrained
  (like the others) with each of the five output activations in place of the one the search chose; the graph part
  stays as found.
* ``inputs`` (dataset, budget, seed): the same control for the first gene (the input activation).
* ``published`` (dataset, code, fusion, seed): the architectures the authors published as found by FL-AGCNS
  (their README: ``server.py --mode test --code ...``; :data:`PUBLISHED`), translated into this space's code and
  retrained like the others, with stage 2 fused as the paper says (``all``) and as their code does (``leaves``): can
  this space and retraining reach the paper's FL-AGCNS number at all, given the architecture it reports?
* ``speed`` (budget, method): a few epochs in Flower's Ray simulation (1 CPU per client) of ``flagcns`` and of
  ``flagcns-noop`` (same strategy and messages, clients that do no work): wall time per generation and the share
  that is Flower's and the server's own cost.

* ``population`` (dataset, budget, seed): the seed's ``feo`` search's final population (its record lists every
  member's FLL and federated validation accuracy in the SuperNet), every distinct network retrained
  ``--population-retrains`` times like the others: the Spearman correlation between FLL (and the SuperNet's
  validation accuracy) and retrained FLACC over the final population.
* ``adam`` (dataset, budget, seed): the control on the server's Adam: the ``feo`` search with
  ``flagcns.adam-scope=once-touched`` (every parameter trained once keeps being stepped, as the authors' 2021 code
  ran under torch 1.x), retrained like the others.

Budgets (``--budget``; ``BUDGETS``): ``paper-exact`` is ``conf/flagcns-<dataset>-paper.toml`` (the paper's: every
SuperNet step on all of P, no warm-up, the lowest-FLL pick), ``code2021`` is ``conf/flagcns-<dataset>-code2021.toml``
(the authors' 2021 code's: 20 of 60 per step, no warm-up, validation accuracy as fitness and as the final pick,
crossover 0.5), ``paper`` is ``conf/flagcns-<dataset>-warmup50.toml`` (50 warm-up epochs, 20 of 60 per step: not the
paper's; the name the presets had until 2026-12-02, kept so that the stored cells and their commands keep their
meaning), ``default`` is ``conf/flagcns-<dataset>.toml`` and ``quick`` a smoke budget.

FLACC = test accuracy weighted by client test-set sizes at the epoch with the best federated validation accuracy;
parameters of the whole network; inference time = one evaluation forward over every client's subgraph (summed),
median of 10, one thread.

    .venv/bin/python reproductions/flagcns/run.py --quick    # smoke check: tiny budget, 1 seed, minutes
    # issue 72's acceptance, the paper's preset:
    .venv/bin/python reproductions/flagcns/run.py --budget paper-exact --split public --seeds 0 1 2 3 4 \
        --parts search random population
    .venv/bin/python reproductions/flagcns/run.py            # Table 3 (Cora, CiteSeer) + Table 5 + speed
    .venv/bin/python reproductions/flagcns/run.py --datasets Cora --seeds 0 --parts search fixed reference
    .venv/bin/python reproductions/flagcns/run.py --budget default --split per-class --parts fixed  # the earlier split
    .venv/bin/python reproductions/flagcns/run.py --datasets Cora --parts published  # the authors' published codes
    .venv/bin/python reproductions/flagcns/run.py --tables-only  # rewrite docs/results/flagcns*.md from the cells
    # 8 cells at once (a bigger machine): FL-Random gets the time of a search run beside others:
    .venv/bin/python reproductions/flagcns/run.py --jobs 8

The parts: this file is the command (which cells the arguments ask for: :func:`plan`); ``grid.py`` the
grid (datasets, variants, budgets, splits, cell names and run configurations, the paper's numbers);
``compute.py`` how a cell is computed; ``report.py`` and ``controls.py`` the tables, their
prose filled into the templates of ``templates/``, ``figures.py`` the figures. ``core_check.py`` times the
Flower-free core's pieces on Cora.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from reproductions._runner.cells import CellStore, cell_cpu  # noqa: E402
from reproductions._runner.common import REPO, add_jobs, run_cells, write_result  # noqa: E402
from reproductions.flagcns.compute import (  # noqa: E402
    compute_cell,
    fixed_cell,
    gene_cell,
    population_cell,
    published_cell,
    random_cell,
    reference_cell,
    search_cell,
    speed_cell,
)
from reproductions.flagcns.grid import (  # noqa: E402
    ADAM_VARIANTS,
    BUDGETS,
    DATASETS,
    FINALIST_VARIANTS,
    FIXED,
    PUBLISHED,
    SOURCES,
    SPLITS,
    STORE,
    STRUCTURE_VARIANTS,
    VARIANTS,
    cell_name,
    run_config,
)
from reproductions.flagcns.report import results  # noqa: E402


def feo_row(rows: list[dict], dataset: str, seed: int, b: str, split: str) -> dict | None:
    """The stored row of a seed's feo search among ``rows``, or None."""
    return next(
        (
            r
            for r in rows
            if r.get("kind") == "search"
            and r["dataset"] == dataset
            and r["variant"] == "feo"
            and r["seed"] == seed
            and r["budget"] == b
            and r.get("split", "per-class") == split
        ),
        None,
    )


def search_variants(args, dataset: str) -> list[str]:
    """The search variants the parts ask for on ``dataset``."""
    return (
        (["feo"] if "search" in args.parts or "random" in args.parts else [])
        + ([v for v in VARIANTS[1:]] if "ablation" in args.parts and dataset == "Cora" else [])
        + (["feo-accuracy"] if "fitness" in args.parts else [])
        + (list(FINALIST_VARIANTS) if "finalists" in args.parts else [])
        + (list(STRUCTURE_VARIANTS) if "structure-fc" in args.parts else [])
        + (list(ADAM_VARIANTS) if "adam" in args.parts else [])
        + ([f"{v}-accuracy" for v in VARIANTS[1:]] if "ablation-accuracy" in args.parts and dataset == "Cora" else [])
    )


def plan_after_feo(args, b: str, split: str, store: CellStore, cell, add, pending: dict, dataset: str, seed: int):
    """A seed's cells that take its stored feo search: its outputs / inputs and its final population."""
    searched = cell_name(f"{dataset}-feo-{b}-s{seed}", split)
    feo = store.load(searched)
    if feo is None or searched in pending:
        return
    config = run_config(dataset, "feo", b, seed, split)
    for gene in ("output", "input"):
        if f"{gene}s" in args.parts:
            code = feo["row"]["architecture"]
            add(
                cell(
                    cell_name(f"{dataset}-{gene}s-{b}-s{seed}", split),
                    {**config, "architecture": code, **({"gene": gene} if gene == "input" else {})},
                    gene_cell,  # outputs cells predate the "gene" key
                    (dataset, b, seed, args.retrains, split, code, gene),
                )
            )
    if "population" not in args.parts:
        return
    members = feo["row"].get("final_population")
    if not members:
        print(
            f"{searched}: its stored row lists no final population (a cell of the code before "
            f"2026-12-02); --parts population needs a search cell computed since",
            file=sys.stderr,
        )
        return
    add(
        cell(
            cell_name(f"{dataset}-population-{b}-s{seed}", split),
            {**config, "architecture": feo["row"]["architecture"], "population-retrains": args.population_retrains},
            population_cell,
            (dataset, b, seed, args.population_retrains, split, members),
        )
    )


def plan_fixed(args, b: str, split: str, cell, add, dataset: str, seed: int) -> None:
    """A seed's fixed architectures, retrained as FL-AGCNS codes."""
    if "fixed" in args.parts:
        for name in FIXED:
            add(
                cell(
                    cell_name(f"{dataset}-{name}-{b}-s{seed}", split),
                    {**run_config(dataset, "feo", b, seed, split), "flagcns.architecture": name},
                    fixed_cell,
                    (dataset, name, b, seed, args.retrains, split),
                )
            )


def plan_references(args, b: str, split: str, cell, add, dataset: str, seed: int) -> None:
    """A seed's reference implementations of the fixed architectures, and the published architectures."""
    config = run_config(dataset, "feo", b, seed, split)
    if "reference" in args.parts:
        for name in FIXED:
            add(
                cell(
                    cell_name(f"{dataset}-ref-{name}-{b}-s{seed}", split),
                    {**config, "reference-architecture": name},
                    reference_cell,
                    (dataset, name, b, seed, args.retrains, split),
                )
            )
    if "published" in args.parts:
        for key in [k for d, k in PUBLISHED if d == dataset]:
            for fusion in ("all", "leaves"):
                add(
                    cell(
                        cell_name(f"{dataset}-published-{key}-{fusion}-{b}-s{seed}", split),
                        {**config, "flagcns.fusion": fusion, "published": key},
                        published_cell,
                        (dataset, key, fusion, b, seed, args.retrains, split),
                    )
                )


def plan(args, b: str, split: str, store: CellStore, cell, add, rows: list[dict], pending: dict) -> None:
    """Every cell the arguments ask for, in order: ``cell(name, settings, fn, fn_args)`` returns its row if it is
    stored (else queues it in ``pending`` and returns None), ``add`` keeps a row. A seed's random cell needs its feo
    search's row in ``rows``, its outputs/inputs cells the stored feo cell, not one queued to be computed again."""
    work = Path(args.work)
    for dataset in args.datasets:
        for seed in args.seeds:
            for v in search_variants(args, dataset):
                add(
                    cell(
                        cell_name(f"{dataset}-{v}-{b}-s{seed}", split),
                        run_config(dataset, v, b, seed, split),
                        search_cell,
                        (work, dataset, v, b, seed, args.retrains, split),
                    )
                )
            if "random" in args.parts and (feo := feo_row(rows, dataset, seed, b, split)) is not None:
                add(
                    cell(
                        cell_name(f"{dataset}-random-{b}-s{seed}", split),
                        {**run_config(dataset, "feo", b, seed, split), "random-search-seconds": feo["search_s"]},
                        random_cell,
                        (dataset, b, seed, feo["search_s"], args.retrains, split),
                    )
                )
            plan_fixed(args, b, split, cell, add, dataset, seed)
            plan_after_feo(args, b, split, store, cell, add, pending, dataset, seed)
            plan_references(args, b, split, cell, add, dataset, seed)
    if "speed" in args.parts:
        for sb in ["quick"] if args.quick else ["default", "paper"]:
            for method in ("flagcns-noop", "flagcns"):
                add(
                    cell(
                        f"speed-{sb}-{method}",
                        {**BUDGETS[sb], "method": method, "epochs": args.speed_epochs},
                        speed_cell,
                        (sb, method, args.speed_epochs),
                    )
                )


# --------------------------------------------------------------------------------------------------------- main
PARTS = ["search", "ablation", "random", "fixed", "reference", "outputs", "speed", "fitness", "ablation-accuracy"]
PARTS += ["published", "inputs", "finalists", "structure-fc", "population", "adam"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke check: tiny budget, 1 seed, 2 retrainings")
    parser.add_argument(
        "--budget",
        choices=tuple(BUDGETS),
        default="paper",
        help="paper-exact: conf/flagcns-*-paper.toml; code2021: conf/flagcns-*-code2021.toml; paper "
        "(the stored cells' name): conf/flagcns-*-warmup50.toml, not the paper's; default: "
        "conf/flagcns-*.toml (module docstring)",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--retrains", type=int, default=10, help="retrainings of every architecture (the paper: 10)")
    parser.add_argument("--parts", nargs="+", default=PARTS[:7], choices=PARTS)
    parser.add_argument(
        "--population-retrains",
        type=int,
        default=1,
        help="retrainings of each final-population member (--parts population)",
    )
    parser.add_argument(
        "--split",
        choices=tuple(SPLITS),
        default="first-per-class",
        help="how the 20 training nodes per class are chosen (module docstring)",
    )
    parser.add_argument("--speed-epochs", type=int, default=4, help="epochs per speed run (1 warm-up)")
    parser.add_argument("--work", default=str(REPO / "results" / "bench-flagcns"), help="run folders (not in git)")
    parser.add_argument("--tables-only", action="store_true")
    parser.add_argument("--rerun-stale", action="store_true")
    add_jobs(
        parser,
        "a seed's random, outputs/inputs and population cells start once its feo search is stored, and "
        "the speed cells run alone, after the others",
    )
    args = parser.parse_args()
    if args.quick:
        args.budget, args.seeds, args.retrains, args.speed_epochs = "quick", args.seeds[:1], 2, 3
    return args


def stored_row(store: CellStore, record: dict) -> dict:
    """A stored cell's row as the tables read it."""
    return {
        **record["row"],
        "cell": record["cell"],
        "stale": store.flag(record),
        "sources": record.get("code", {}).get("sources"),
        "cpu": cell_cpu(record),
    }


class Invocation:
    """The cells of one invocation: the rows the plan found stored, the cells pending, the rows computed here and
    the cells that failed."""

    def __init__(self, args, store: CellStore) -> None:
        self.args, self.store = args, store
        self.rows: list[dict] = []
        # cells to compute: name -> (settings, function, its arguments); a cell that depends on a seed's feo search
        # (random, outputs, inputs) is asked for only once that search is stored, so the plan runs twice
        self.pending: dict[str, tuple[dict, object, tuple]] = {}
        self.computed: dict[str, dict] = {}  # rows computed by this invocation
        self.failed: list[str] = []

    def cell(self, name: str, settings: dict, fn, fn_args: tuple) -> dict | None:
        if name in self.computed:
            return self.computed[name]
        record = self.store.load(name)
        if record is not None and not (self.args.rerun_stale and not self.store.current(record)):
            return stored_row(self.store, {**record, "cell": name})
        if not self.args.tables_only and name not in self.failed:
            self.pending[name] = (settings, fn, fn_args)
        return None

    def add(self, row) -> None:
        if row is not None:
            self.rows.append(row)

    def plan(self) -> None:
        self.rows.clear()
        self.pending.clear()
        a = self.args
        plan(a, a.budget, a.split, self.store, self.cell, self.add, self.rows, self.pending)

    def compute(self, names: list[str], jobs: int) -> None:
        for (name, _, _), row, error in run_cells(compute_cell, [(n, *self.pending[n][1:]) for n in names], jobs):
            if error is not None:
                print(f"cell {name} failed:\n{error}", file=sys.stderr, flush=True)
                self.failed.append(name)
                continue
            print(
                f"cell {name}: {json.dumps({k: v for k, v in row.items() if k not in ('curve', 'retrains')})[:300]}",
                flush=True,
            )
            saved = self.store.save(name, {**self.pending[name][0], "retrains": self.args.retrains}, row)
            self.computed[name] = {**saved["row"], "cell": name, "stale": "", "cpu": cell_cpu(saved)}


def main() -> None:
    args = parse_args()
    from flowergraph.tasks import configure_torch

    configure_torch(1)
    store = CellStore(STORE, SOURCES)
    cells = Invocation(args, store)
    for _ in range(2):  # the second pass finds the cells that waited for a feo search of the first
        cells.plan()
        names = [n for n in cells.pending if not n.startswith("speed-")]
        if names:
            print(f"{len(names)} cells to compute, {min(args.jobs, len(names))} at a time", flush=True)
        cells.compute(names, args.jobs)
        cells.compute([n for n in cells.pending if n.startswith("speed-")], 1)  # timed alone, after the others
    cells.plan()  # every cell asked for, as stored now
    b, rows = args.budget, cells.rows
    # every stored cell of this budget (and the speed cells) goes into the tables, not only this invocation's
    seen = {r["cell"] for r in rows}
    for record in store.records():
        if record["cell"] not in seen and (record["row"].get("budget") == b or record["row"].get("kind") == "speed"):
            rows.append(stored_row(store, record))
    name = "flagcns" if b == "paper" else f"flagcns_{b}"
    write_result(
        name,
        f"FL-AGCNS: searched architectures, baselines, ablations and speed (budget {b})",
        results(rows, b),
        cell_commands=store.commands(lambda row: row.get("budget") == b or row.get("kind") == "speed"),
        sources=SOURCES,
    )


if __name__ == "__main__":
    main()
