"""FL-AGCNS's control on how the retrainings are summarised (reproductions/flagcns/report.py ``best_of_retrainings``):
per row and dataset the mean over seeds of each cell's mean and of each cell's best retraining, stale cells marked,
checked against hand numbers."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions.flagcns import figures, grid, report  # noqa: E402


def row_of(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_best_of_retrainings_averages_each_cells_mean_and_best_over_seeds():
    rows = [
        {"kind": "reference", "dataset": "Cora", "architecture_name": "gcn", "seed": 0, "retrains": [78.0, 80.0, 82.0]},
        {"kind": "reference", "dataset": "Cora", "architecture_name": "gcn", "seed": 1, "retrains": [79.0, 81.0]},
        {"kind": "search", "dataset": "Cora", "variant": "feo", "seed": 0, "retrains": [70.0, 75.0], "stale": True},
        {"kind": "search", "dataset": "CiteSeer", "variant": "feo", "seed": 0, "retrains": [60.0, 64.0]},
    ]

    of = report.lookup(rows)

    text = report.best_of_retrainings(of, ["Cora", "CiteSeer"])
    # cell means 80.0 and 80.0 -> 80.0 ± 0.0; bests 82.0 and 81.0 -> 81.5 ± 0.7 (sample std 0.707); paper 81.3
    assert row_of(text, "GCN, authors' network") == [
        "GCN, authors' network",
        "80.0 ± 0.0",
        "81.5 ± 0.7",
        "81.3",
        "-",
        "-",
        "68.6",
    ]
    # one stale cell: both summaries marked; CiteSeer's one seed has no std
    assert row_of(text, "FL-AGCNS") == ["FL-AGCNS", "72.5 †", "75.0 †", "82.9", "62.0", "64.0", "70.6"]
    assert "FL-Random" not in text and "finalists" not in text  # rows without cells are left out
    assert report.best_of_retrainings(lambda kind, dataset, **m: [], ["Cora"]) is None


def test_paired_targets_pair_by_seed_and_give_the_t_interval(monkeypatch):
    rows = (
        [
            {"kind": "search", "dataset": "Cora", "variant": "feo", "seed": s, "flacc": v}
            for s, v in ((0, 80.0), (1, 81.0), (2, 79.0))
        ]
        + [{"kind": "random", "dataset": "Cora", "seed": s, "flacc": v} for s, v in ((0, 79.0), (1, 79.0), (2, 80.0))]
        + [
            {"kind": "fixed", "dataset": "Cora", "architecture_name": "appnp", "seed": 0, "flacc": 81.0, "stale": True},
            {"kind": "fixed", "dataset": "Cora", "architecture_name": "gcn", "seed": 5, "flacc": 70.0},  # no pair
        ]
    )

    of = report.lookup(rows)

    text = report.paired_targets(of, ["Cora"])
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| Cora")]
    # against FL-Random: differences +1, +2, -1 -> mean +0.67, sample std 1.53; t(0.975, 2) = 4.302653:
    # half width 4.302653 * 1.5275 / sqrt(3) = 3.79 -> [-3.1, +4.5]; the paper's 82.9 - 79.8 = +3.1
    assert lines[0] == [
        "Cora",
        "FL-AGCNS",
        "FL-Random",
        "3 (0, 1, 2)",
        "+0.7 ± 1.5",
        "2 / 0 / 1",
        "[-3.1, +4.5]",
        "+3.1",
    ]
    # one seed against APPNP (its cell stale: marked), no interval; the GCN cell shares no seed: no row
    assert lines[1] == ["Cora", "FL-AGCNS", "APPNP", "1 (0)", "-1.0 †", "0 / 0 / 1", "-", "+0.7"]
    assert len(lines) == 2
    assert report.paired_targets(lambda kind, dataset, **m: [], ["Cora"]) is None
    # the figure draws the same pairs, one file per dataset, and the page shows it
    drawn = []
    monkeypatch.setattr(report, "paired_figure", lambda rows, name, *a, **k: drawn.append((name, rows)) or name)
    text = report.paired_targets(of, ["Cora"], "stem")
    assert drawn == [
        (
            "stem_Cora.png",
            [("FL-AGCNS - FL-Random", [1.0, 2.0, -1.0], 82.9 - 79.8), ("FL-AGCNS - APPNP †", [-1.0], 82.9 - 82.2)],
        )
    ]
    assert "](stem_Cora.png)" in text


def test_structure_fc_control_runs_shared_fc_and_its_table_compares_by_seed():
    """``--parts structure-fc``: the control's run configuration is FEO's with one shared FC layer (and nothing
    else changed), and its table lists both variants seed by seed with their output gene and FLACC."""
    feo = grid.run_config("Cora", "feo", "quick", 3, "public")
    shared = grid.run_config("Cora", "feo-shared-fc", "quick", 3, "public")
    assert shared == {**feo, "flagcns.structure-fc": "shared"} and "flagcns.structure-fc" not in feo
    assert feo["node.split"] == "public"
    code = [0] * 13 + [4]  # identity output (ACTIVATIONS index 4)
    rows = [
        {
            "kind": "search",
            "dataset": "Cora",
            "variant": v,
            "seed": s,
            "budget": "quick",
            "split": "public",
            "flacc": f,
            "flacc_std": 0.5,
            "architecture": code[:-1] + [o],
            "describe": "x",
            "parameters": 1e5,
            "inference_s": 0.01,
            "search_s": 60.0,
            "retrains": [f],
        }
        for v, s, f, o in (
            ("feo", 0, 80.0, 4),
            ("feo", 1, 78.0, 4),
            ("feo-shared-fc", 0, 40.0, 2),
            ("feo-shared-fc", 1, 60.0, 2),
        )
    ]
    text = report.tables(rows, "quick", "public")
    assert "**Control: the structures' FC layers**" in text
    per_option = row_of(text.split("**Control: the structures' FC layers**")[1], "Cora")
    assert per_option[2] == "79.0 ± 1.4" and per_option[3] == "s0: identity 80.0, s1: identity 78.0"
    shared_row = [r for r in text.splitlines() if "one shared by the five options" in r][0]
    assert "50.0 ± 14.1" in shared_row and "s0: relu 40.0, s1: relu 60.0" in shared_row
    assert "the public split is the same on every seed" in text


def test_the_fitness_figure_is_drawn_only_for_budgets_ranked_by_fll(monkeypatch):
    """A search's curve is the FLL of the member its fitness ranks first: a fitness curve for the FLL-ranked budgets,
    none for code2021's accuracy ranking, whose figure would show the FLL of the most accurate member as "best
    fitness"."""
    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, name: drawn.append(name) or name)

    def search(budget: str) -> dict:
        return {"kind": "search", "dataset": "Cora", "variant": "feo", "seed": 0, "split": "public", "budget": budget,
                "curve": [[1, 1.4], [2, 1.2]]}  # fmt: skip

    assert grid.BUDGETS["code2021"]["flagcns.fitness"] == "accuracy"
    assert figures.plot([search("code2021")], "code2021") is None
    assert "flagcns.fitness" not in grid.BUDGETS["paper-exact"]  # the default: FLL
    assert figures.plot([search("paper-exact")], "paper-exact") == "flagcns_fitness_paper-exact.png"
    assert drawn == ["flagcns_fitness_paper-exact.png"]


def test_acceptance_counts_collapses_against_each_datasets_own_line():
    """A CiteSeer retraining at 66% is no collapse (CiteSeer's line is 60%), a Cora one at 74% is (Cora's is 75%)."""

    def search(d: str, seed: int, retrains: list[float]) -> dict:
        return {
            "kind": "search", "dataset": d, "variant": "feo", "seed": seed, "flacc": sum(retrains) / len(retrains),
            "retrains": retrains, "architecture": [0] * 13 + [3],
        }  # fmt: skip

    cells = [search("Cora", 0, [80.0, 74.0]), search("Cora", 1, [80.0, 81.0])]
    cells += [search("CiteSeer", 0, [66.0, 67.0]), search("CiteSeer", 1, [59.0, 68.0])]

    of = report.lookup(cells)

    text = report.acceptance(of, ["Cora", "CiteSeer"])
    assert "retrainings under the collapse line (Cora 75%, CiteSeer 60%)" in text
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in text.splitlines() if line.startswith("| C")}
    assert rows["Cora"][6] == "1 of 4 (seeds 0)"
    assert rows["CiteSeer"][6] == "1 of 4 (seeds 1)"


def test_the_population_figure_plots_each_member_and_stars_the_seeds_chosen_code(monkeypatch):
    """Each member of a seed's final population is a point (FLL or SuperNet validation accuracy, retrained FLACC),
    and the seed's feo search's architecture is starred at its own member's point; no figure without population
    cells."""
    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, name: drawn.append(fig) or name)
    members = [
        {"architecture": [0] * 13 + [1], "fll": 0.9, "val_accuracy": 0.77, "flacc": 81.0},
        {"architecture": [0] * 13 + [2], "fll": 1.1, "val_accuracy": 0.78, "flacc": 79.0},
        {"architecture": [0] * 13 + [3], "fll": 1.3, "val_accuracy": 0.74, "flacc": 70.0},
    ]
    pop = {"kind": "population", "dataset": "Cora", "budget": "paper-exact", "seed": 2, "split": "public",
           "members": members, "spearman_fll": -1.0, "spearman_val_accuracy": 0.5}  # fmt: skip
    search = {"kind": "search", "dataset": "Cora", "variant": "feo", "seed": 2, "split": "public",
              "budget": "paper-exact", "architecture": [0] * 13 + [2]}  # fmt: skip
    assert figures.population_plot([search], "paper-exact") is None
    assert figures.population_plot([search, pop], "code2021") is None  # another budget's cells only
    assert figures.population_plot([search, pop], "paper-exact") == "flagcns_population_paper-exact.png"
    (fig,) = drawn
    top, bottom = fig.axes[0], fig.axes[1]
    for ax, key in ((top, "fll"), (bottom, "val_accuracy")):
        points, star = (c.get_offsets().tolist() for c in ax.collections)
        assert points == [[m[key], m["flacc"]] for m in members]
        assert star == [[members[1][key], 79.0]]
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["s2: rho -1.00"]
    assert [t.get_text() for t in bottom.get_legend().get_texts()] == ["s2: rho +0.50"]


def test_population_table_sets_each_chosen_code_against_its_populations_mean():
    """The chosen code's FLACC (its search cell's retrainings) minus the mean over its final population, per seed,
    and over the seeds the mean difference with its Student-t interval (computed here by hand)."""
    from reproductions.flagcns import controls

    def pop(seed: int, accs: list[float], best_val: int | None = 1) -> dict:
        members = [
            {
                "architecture": [0] * 13 + [i],
                "fll": 1.0 + i / 10,
                "val_accuracy": 0.75 if i == best_val else 0.7,
                "flacc": a,
            }
            for i, a in enumerate(accs)
        ]
        return {"kind": "population", "dataset": "Cora", "seed": seed, "members": members, "distinct": len(accs),
                "population": len(accs), "population_retrains": 1, "spearman_fll": -0.5,
                "spearman_val_accuracy": None}  # fmt: skip

    def feo(seed: int, flacc: float) -> dict:
        return {"kind": "search", "dataset": "Cora", "variant": "feo", "seed": seed, "flacc": flacc,
                "architecture": [0] * 13 + [3]}  # fmt: skip

    cells = [pop(0, [78.0, 80.0, 82.0]), pop(1, [79.0, 79.0, 76.0]), pop(2, [70.0, 71.0, 72.0], best_val=None)]
    cells += [feo(0, 81.0), feo(1, 77.0)]  # seed 2 has no search cell: no difference

    of = report.lookup(cells)

    text = "".join(controls.population(of, ["Cora"]))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    by_seed = {r[1]: r for r in rows[1:] if r[0] == "Cora"}
    assert by_seed["0"][6:9] == ["80.0", "81.0 (softmax)", "+1.0"]
    assert by_seed["1"][6:9] == ["78.0", "77.0 (softmax)", "-1.0"]
    assert by_seed["2"][6:9] == ["71.0", "-", "-"]
    # the 2021 code's pick from the same P: the highest SuperNet val acc (member 1: output gene 1, tanh), its one
    # retraining; among equals the first (seed 2: member 0, sigmoid)
    assert [by_seed[s][9] for s in "012"] == ["80.0 (tanh, 75.0)", "79.0 (tanh, 75.0)", "70.0 (sigmoid, 70.0)"]
    # two differences, +1 and -1: mean 0, s = sqrt(2), half-width t(0.975, 1) * s / sqrt(2) = 12.706
    (summary,) = [r for r in rows if r[0] == "**Cora**"]
    assert summary[1] == "**2 seeds**"
    assert summary[8] == "**+0.0** [-12.7, +12.7], 1 / 0 / 1"


def test_the_adam_control_pairs_once_touched_with_this_step_on_the_seeds_that_have_both():
    """The Adam table's bold line: once-touched minus this-step per seed where both searches exist (seed 2 has only
    this-step: left out), their mean and Student-t interval (computed here by hand) and ahead / level / behind."""
    from reproductions.flagcns import controls

    def search(variant: str, seed: int, flacc: float) -> dict:
        return {"kind": "search", "dataset": "Cora", "variant": variant, "seed": seed, "flacc": flacc,
                "architecture": [0] * 13 + [3]}  # fmt: skip

    cells = [search("feo", 0, 80.0), search("feo", 1, 79.0), search("feo", 2, 81.0)]
    cells += [search("feo-once-touched", 0, 79.0), search("feo-once-touched", 1, 80.0)]

    of = report.lookup(cells)

    text = "\n".join(controls.adam(of, ["Cora"]))
    line = next(ln for ln in text.splitlines() if "seed-paired (2 seeds)" in ln)
    # diffs -1.0 and +1.0: mean 0, s = sqrt(2), half-width t(0.975, 1) * sqrt(2) / sqrt(2) = 12.706
    assert "**+0.0** [-12.7, +12.7], 1 / 0 / 1" in line
    assert "s0: -1.0, s1: +1.0" in line
    assert "s2" not in line


def test_every_stored_search_chose_its_own_pick_rules_member_of_its_final_population():
    """Against the stored cells: each feo search's chosen architecture is the member of its final population (the
    population cell's members, scored as the search scored them) that ``flowergraph``'s final pick takes under the
    search's own rule (``code2021``: the highest SuperNet val acc; the paper's presets: the lowest FLL). So the
    population table's 2021-pick column reads the rule the searches ran, not a copy of it."""
    from reproductions.flagcns import controls
    from reproductions._runner.cells import CellStore

    rows = [rec["row"] for rec in CellStore(grid.STORE, grid.SOURCES).records()]
    pairs = [
        (pop, feo)
        for pop in rows
        if pop.get("kind") == "population"
        for feo in report.lookup(rows, budget=pop["budget"], split=pop["split"], seed=pop["seed"])(
            "search", pop["dataset"], variant="feo"
        )
    ]
    assert {(p["budget"], f["pick"]) for p, f in pairs} >= {("code2021", "accuracy"), ("paper-exact", "fll")}
    for pop, feo in pairs:
        assert controls.pick(pop["members"], feo["pick"])["architecture"] == feo["architecture"], (pop["seed"], feo)
