"""The stored FedStar cells are reproducible: the cheapest stored cell of ``reproductions/fedstar/run.py``
(``reproductions/fedstar/cells/fedstar-paper-split.jsonl.xz``) is re-run for 10 rounds from its recorded settings with
today's code, and its mean client accuracy after round 10 must equal the stored curve's: to the last digit where the
cell was computed in this environment (``cell_store.environment``: CPU, instruction set, package versions), to 0.005
elsewhere (another CPU or package build moves the last digits: 0.001 on the cheapest cell on 2026-11-26), with a
warning.

A failure means the code on FedStar's path now computes other numbers than the stored table's: re-run the cells
(``reproductions/fedstar/run.py --rerun-stale``) or find the change."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STORE = "fedstar-paper-split"


def _cheapest_cell() -> dict:
    sys.path.insert(0, str(REPO))
    from reproductions._runner.cells import CellStore

    records = list(CellStore(STORE).records())
    records = [
        r
        for r in records
        if any(rnd == 10 for rnd, _ in r["row"].get("curve", [])) and r["settings"]["dataset"].count(",") <= 6
    ]
    if not records:
        warnings.warn(f"NO STORED FEDSTAR CELL in {STORE}: the reproduction test has nothing to re-run", stacklevel=1)
        pytest.skip(f"no stored FedStar cell with a round-10 point in {STORE} (run reproductions/fedstar/run.py)")
    return min(records, key=lambda r: r["row"].get("cpu_s") or math.inf)


def test_cell_store_records_code_state_and_flags_other_code(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO))
    from reproductions._runner import cells as cell_store

    monkeypatch.setattr(cell_store, "REPO", tmp_path)
    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "m.py"
    module.write_text('"""doc"""\ndef f():\n    """doc"""\n    return 1  # a comment\n')
    store = cell_store.CellStore("t", ("pkg/*.py",))
    record = store.save("a", {"seed": 1}, {"accuracy": 0.5})
    assert record["code"]["files"] == 1 and store.current(store.load("a")) and store.flag(record) == ""
    assert store.load("a")["env"] == cell_store.environment() and record["env"]["torch"].startswith("2.")
    # documentation and comments do not change the code state ...
    module.write_text('"""other doc"""\ndef f():\n    """changed"""\n    return 1\n')
    assert cell_store.CellStore("t", ("pkg/*.py",)).current(store.load("a"))
    # ... code does, and the cell is flagged with the commit that produced it
    module.write_text("def f():\n    return 2\n")
    later = cell_store.CellStore("t", ("pkg/*.py",))
    assert not later.current(store.load("a"))
    assert later.flag(store.load("a")).startswith(" (older code: ")


def test_a_stored_cell_reproduces_its_first_ten_rounds(shared_data, tmp_path):
    from flowergraph.app.inprocess import run_inprocess
    from flowergraph.storage.results import read_run

    record = _cheapest_cell()
    settings = dict(
        record["settings"],
        rounds=10,
        **{"data-dir": str(shared_data), "out-dir": str(tmp_path / "run"), "state-dir": str(tmp_path / "state")},
    )
    sys.path.insert(0, str(REPO))
    from reproductions._runner import cells as cell_store

    run_inprocess(settings)
    rounds = {r["round"]: r for r in read_run(tmp_path / "run")["rounds"] if r.get("round", 0) >= 1}
    stored = dict((rnd, acc) for rnd, acc in record["row"]["curve"])
    here = cell_store.environment()
    exact = record.get("env") == here
    if not exact:  # another CPU or package build: the last digits move (cell_store.environment), not the numbers
        warnings.warn(
            f"STORED FEDSTAR CELL {record['cell']} WAS COMPUTED IN ANOTHER ENVIRONMENT "
            f"({record.get('env', 'not recorded')}; here {here}): reproduction checked to 0.005, not bit "
            f"for bit",
            stacklevel=1,
        )
    assert rounds[10]["mean_client_accuracy"] == pytest.approx(stored[10], abs=1e-9 if exact else 5e-3), (
        f"cell {record['cell']} (code {record['code']}) no longer reproduces: round 10 gives "
        f"{rounds[10]['mean_client_accuracy']}, stored {stored[10]}"
    )


def test_the_table_generator_runs_on_cells_of_every_kind(shared_data, monkeypatch):
    """``reproductions/fedstar/run.py --tables-only`` builds every section (Table 1 with the paper's and the authors'
    columns, gains over Local, claims, the split spread, the ablations) from rows of each kind; a name lost from
    the module (as the paper's numbers once were) fails here, not after hours of cells."""
    sys.path.insert(0, str(REPO))
    monkeypatch.setenv("FLOWERGRAPH_DATA", str(shared_data))
    from reproductions.fedstar import grid, report

    def row(variant, seed, accuracy, structure="dse+rwse", split_seed=grid.SPLIT_SEED):
        return {
            "setting": "CHEM",
            "variant": variant,
            "seed": seed,
            "structure": structure,
            "split_seed": split_seed,
            "accuracy": accuracy,
            "late": accuracy - 0.5,
            "clients": {k: accuracy / 100 for k in range(7)},
            "rounds": 200,
            "wall_s": 300.0,
            "cpu_s": 290.0,
            "round_s": 1.5,
            "rounds_s": 300.0,
            "curve": [[10, 0.6], [200, accuracy / 100]],
            "stale": "",
        }

    rows = [row(v, s, 70.0 + s + (5 if v == "fedstar" else 0)) for v in grid.TABLE1 for s in (1, 2)]
    rows += [row(v, 1, 71.0 + k, split_seed=k) for v in grid.SPREAD_VARIANTS for k in (1, 2)]
    rows[0]["stale"] = " (older code: abc123)"
    text = report.tables(rows, 200)
    assert "79.79" in text and "79.10" in text  # the paper's CHEM FedStar and the authors' code's, side by side
    assert "(older code: abc123)" in text or "†" in text  # a cell from other code is flagged in the table
