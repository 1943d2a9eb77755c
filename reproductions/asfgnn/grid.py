"""ASFGNN's grid (``run.py`` is the command; its docstring says what each part computes): which cells exist
(:func:`grid`), their run configurations, the code they depend on and the wall time over a cell's stopped segments;
with the paper's numbers for those cells. How one is computed is ``compute.py``, parking a stopped cell's progress
``parking.py``; the tables are ``report.py`` (Table 6 ``table6.py``, the rows' helpers ``rows.py``), the figures
``figures.py``."""

from __future__ import annotations

import json
from pathlib import Path

from reproductions._runner.cells import run_dir_current

BUDGETS = {
    "paper": {"asfgnn.trials": 100, "asfgnn.trial-rounds": 200},
    "long": {"asfgnn.trials": 10, "asfgnn.trial-rounds": 100},
    "tuning": {"asfgnn.trials": 40, "asfgnn.trial-rounds": 24},
    "default": {"asfgnn.trials": 8, "asfgnn.trial-rounds": 24},
    "quick": {"asfgnn.trials": 3, "asfgnn.trial-rounds": 10},
}
METHODS = ("cm", "fl", "sp", "sfgnn-nojs", "sfgnn")
ALPHAS = (0.6, 0.7, 0.8, 0.9, 1.0)
DRIVERS = ("smac", "grid", "random")
LANES = ("smac", "smac-gp", "grid", "random")  # Table 7's rows: SMAC's two facades, grid, random
LABELS = {
    "cm": "CM (centralized)",
    "fl": "FL (FedAvg, whole model)",
    "sp": "SP (each client alone)",
    "sfgnn": "SFGNN (JS mixing)",
    "sfgnn-nojs": "SFGNN without JS",
}
# The paper's numbers: Table 3 (alpha = 1), Table 5 (graph split), Table 6 (Cora, without / with JS), Table 7 (Cora,
# hours of tuning: grid, BO; the table gives a 17.10 speed-up, the text 10.10)
PAPER3 = {
    "Cora": {"cm": 0.8150, "fl": 0.8833, "sp": 0.9101, "sfgnn": 0.9264},
    "CiteSeer": {"cm": 0.7001, "fl": 0.7500, "sp": 0.7823, "sfgnn": 0.8055},
}
PAPER5 = {"Cora": {"fl": 0.7525, "sfgnn": 0.7986}, "CiteSeer": {"fl": 0.7020, "sfgnn": 0.7583}}
PAPER6 = {
    1.0: (0.9081, 0.9264),
    0.9: (0.8226, 0.8494),
    0.8: (0.7692, 0.7931),
    0.7: (0.7120, 0.7338),
    0.6: (0.7018, 0.7138),
}


# Fig. 3 has no numbers in the paper's text, but the text states which curve is on top where (Sec. 5.2.3):
# SFGNN above SP and FL for alpha > 0.75, FL the best for 0.5 <= alpha < 0.75, SP above FL for 0.88 < alpha <= 1
def paper_fig3(alpha: float) -> tuple[str, str]:
    """(the best of SFGNN / FL / SP, the better of SP / FL) at alpha, as the paper's text states them."""
    return ("SFGNN" if alpha > 0.75 else "FL"), ("SP" if alpha > 0.88 else "FL")


PAPER7 = {"grid_h": 6.67, "bo_h": 0.39, "speedup": 17.10}
# Table 4, Cora: SFGNN's clients A and B (K, lr, L2, d); hidden size not given (128, the core check's)
TABLE4 = {
    "asfgnn.hidden": 128,
    "asfgnn.depth": "4,2",
    "asfgnn.lr": "0.01",
    "asfgnn.l2": "0.005",
    "asfgnn.dropout": "0.5",
}
SOURCES = (
    "flowergraph/methods/asfgnn/maths/*.py",
    "flowergraph/tasks/datasets.py",
    "flowergraph/tasks/splits.py",
    "flowergraph/tasks/federated_graph.py",
    "flowergraph/tasks/torch_state.py",
    "flowergraph/tasks/compute.py",
    "flowergraph/methods/asfgnn/wire.py",
    "flowergraph/methods/asfgnn/client.py",
    "flowergraph/methods/asfgnn/server.py",
    "flowergraph/methods/asfgnn/__init__.py",
    "flowergraph/strategies/base.py",
    "flowergraph/strategies/updates.py",  # base.py's round replies -> updates since 01c7304
    "flowergraph/strategies/bank.py",
    "flowergraph/strategies/aggregation.py",
    "flowergraph/clients/base.py",
    "flowergraph/clients/state.py",
)
STORE = "asfgnn"
# The sources hash (cell_store.code_state) of older code whose cells this code repeats, by the hash of this code: a
# refactor that changes no computation (and so no number) still changes the hash, and every stored cell would read
# "older code" and no parked cell resume. An entry is added only after `reproductions/asfgnn/run.py --check-repeats`
# recomputed stored cells of that older code with this code and every row repeated to the last digit; it applies to
# this code only (any change to SOURCES gives a new hash, which has no entries until checked again).
SAME_AS: dict[str, dict[str, str]] = {
    "4c0b81e9bc8bb37f": {  # the merge of main after 20309eb (strategies/base.py's round replies -> updates.py)
        "05a7960ea3c6ffed": "2026-12-03, the quick budget's 11 stored cells (Table 3 on Cora and CiteSeer: CM, FL, SP, "
        "SFGNN; the control's 3) recomputed on this code, every row repeated to the last digit",
        "e646c73c87bf8802": "2026-12-03, Table 6's sizes control at alpha 0.9 (long budget, paper-independent, SFGNN "
        "without JS, seed 2) recomputed on this code, its row repeated to the last digit",
    },
    "e646c73c87bf8802": {  # 7251f46 (asfgnn.sizes added; issue 70's refactors before it)
        "05a7960ea3c6ffed": "2026-12-03, 14 stored cells recomputed, every row repeated to the last digit: the quick "
        "budget's 11 (Table 3 on Cora and CiteSeer: CM, FL, SP, SFGNN; the control's 3), Table 6's alpha 0.9 at the "
        "default budget (seed 9, with and without JS), Table 5's Cora SFGNN at the default budget (seed 2; stored "
        "before its oracle_test column)"
    },
}


def same_computation(sources: str) -> set[str]:
    """The sources hashes whose cells the code of hash ``sources`` repeats (itself included; see ``SAME_AS``)."""
    return {sources, *SAME_AS.get(sources, {})}


def store():
    """The cell store, a cell of code in :func:`same_computation` counted as current."""
    from reproductions._runner.cells import CellStore

    class Store(CellStore):
        def current(self, record: dict | None) -> bool:
            return record is not None and record.get("code", {}).get("sources") in same_computation(
                self.code["sources"]
            )

    return Store(STORE, SOURCES)


def run_config(
    dataset: str,
    method: str,
    *,
    setting: str = "label",
    alpha: float = 1.0,
    seed: int = 0,
    search: str = "smac",
    budget: str = "default",
    facade: str = "hpo",
    fixed: dict | None = None,
    sizes: str = "disjoint",
    local_steps: int = 1,
) -> dict:
    """A cell's run configuration (without the machine's paths); ``sizes`` and ``local_steps`` are set only when
    not the defaults (so the configurations of the cells stored before they existed are unchanged)."""
    config = {
        "method": "asfgnn-cm" if method == "cm" else "asfgnn",
        "dataset": dataset,
        "num-clients": 2,
        "seed": seed,
        "asfgnn.setting": setting,
        "asfgnn.alpha": alpha,
    }
    if sizes != "disjoint":
        config["asfgnn.sizes"] = sizes
    if local_steps != 1:
        config["asfgnn.local-epochs"] = local_steps
    if method != "cm":
        config["asfgnn.variant"] = "sfgnn" if method.startswith("sfgnn") else method
        if method == "sfgnn-nojs":
            config["asfgnn.js"] = False
    if fixed is not None:  # one trial with fixed values
        config.update(
            {
                "asfgnn.search": "none",
                "asfgnn.trials": 1,
                "asfgnn.trial-rounds": BUDGETS[budget]["asfgnn.trial-rounds"],
                **fixed,
            }
        )
    else:
        config.update({"asfgnn.search": search, **BUDGETS[budget]})
        if search == "smac":
            config["asfgnn.smac-facade"] = facade
    config["rounds"] = config["asfgnn.trials"] * (config["asfgnn.trial-rounds"] + 1)
    return config


def completed(out: Path) -> bool:
    """Whether the run folder ``out`` holds a finished run of the code as it is now."""
    summary = out / "summary.json"
    return (
        summary.exists()
        and json.loads(summary.read_text()).get("status") == "completed"
        and run_dir_current(out, SOURCES)
    )


def segments_before(out: Path) -> float:
    """The wall seconds of a run folder's earlier segments (``bench.json``), a segment that was stopped before it
    finished counted from its start to its last round in ``rounds.jsonl`` (its rounds after the last checkpoint
    are run again, so they count twice, as they cost twice)."""
    meta = out / "bench.json"
    previous = json.loads(meta.read_text()) if meta.exists() else {}
    wall = previous.get("wall_s", 0.0)
    if (opened := previous.get("open_since")) is not None and (rounds := out / "rounds.jsonl").exists():
        ended = [json.loads(line).get("ended_at") for line in rounds.read_text().splitlines() if line.strip()]
        ended = [e for e in ended if e is not None and e >= opened]
        wall += max(ended) - opened if ended else 0.0
    return wall


def tuned_cell(
    args, dataset: str, method: str, seed: int, setting="label", alpha=1.0, sizes="disjoint", steps=1
) -> tuple[str, dict, dict]:
    """A tuned cell (Tables 3, 5 and 6), or one of Table 6's controls (their own kinds, so no other table mixes
    them in): the paper's client sizes, and more local steps per round."""
    b = args.budget
    kind, tag, extra = "tuned", "", {}
    if sizes != "disjoint":
        kind, tag, extra = "sizes", f"{sizes}-", {"sizes": sizes}
    elif steps != 1:
        kind, tag, extra = "steps", f"steps{steps}-", {"local_steps": steps}
    name = f"tuned-{dataset}-{setting}-a{alpha:.1f}-{tag}{method}-{b}-{args.facade}-s{seed}"
    config = run_config(
        dataset,
        method,
        setting=setting,
        alpha=alpha,
        seed=seed,
        budget=b,
        facade=args.facade,
        sizes=sizes,
        local_steps=steps,
    )
    meta = {"kind": kind, "dataset": dataset, "setting": setting, "alpha": alpha, "method": method}
    return name, config, {**meta, **extra, "budget": b, "seed": seed}


def search_cell(args, driver: str, seed: int) -> tuple[str, dict, dict]:
    """A Table 7 cell: SFGNN on Cora tuned by ``driver``."""
    b = args.budget
    # --facade only changes SMAC: grid and random keep the "-hpo" names they were stored under
    facade = args.facade if driver == "smac" else "hpo"
    return (
        f"search-{driver}-{b}-{facade}-s{seed}",
        run_config("Cora", "sfgnn", seed=seed, search=driver, budget=b, facade=facade),
        {
            "kind": "search",
            "driver": driver,
            "budget": b,
            "seed": seed,
            **({"facade": facade} if driver == "smac" else {}),
        },
    )


def grid(args) -> list[tuple[str, dict, dict]]:
    """(name, run configuration, row metadata) of every cell the command's arguments select, in the order asked for,
    each once (Table 3's alpha = 1 cells are also Table 6's)."""
    out: dict[str, tuple[str, dict, dict]] = {}
    b = args.budget

    def cell(name: str, config: dict, meta: dict) -> None:
        out.setdefault(name, (name, config, meta))

    def picked(*methods: str) -> list[str]:
        return [m for m in args.methods if m in methods]

    for seed in args.seeds:
        if "table3" in args.parts:
            for dataset in args.datasets:
                for method in picked("cm", "fl", "sp", "sfgnn"):
                    cell(*tuned_cell(args, dataset, method, seed))
        if "table5" in args.parts:
            for dataset in args.datasets:
                for method in picked("fl", "sfgnn"):
                    cell(*tuned_cell(args, dataset, method, seed, setting="graph"))
        if "table6" in args.parts and "Cora" in args.datasets:
            for alpha in args.alphas:
                for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                    cell(*tuned_cell(args, "Cora", method, seed, alpha=alpha))
        if "sizes" in args.parts:  # the paper's client sizes at alpha < 1 (at 1 they are the disjoint split)
            for alpha in [a for a in args.alphas if a < 1.0]:
                for sizes in args.sizes:
                    for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                        cell(*tuned_cell(args, "Cora", method, seed, alpha=alpha, sizes=sizes))
        if "steps" in args.parts:  # more full-batch steps per round (the 1-step cells are Table 6's)
            for alpha in args.alphas:
                for steps in args.local_steps:
                    for method in picked("sfgnn-nojs", "sfgnn", "fl", "sp"):
                        cell(*tuned_cell(args, "Cora", method, seed, alpha=alpha, steps=steps))
        if "control" in args.parts:
            for method in picked("sfgnn", "sfgnn-nojs", "sp"):
                cell(
                    f"control-{method}-{b}-s{seed}",
                    run_config("Cora", method, seed=seed, budget=b, fixed=TABLE4),
                    {"kind": "control", "dataset": "Cora", "method": method, "budget": b, "seed": seed},
                )
        if "search" in args.parts:
            for driver in DRIVERS:
                cell(*search_cell(args, driver, seed))
    return list(out.values())
