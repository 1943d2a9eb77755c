"""The runner's CellStore (reproductions/_runner/cells.py): cells packed into one xz archive per store, loose cells
beside it, each store in its folder (a reproduction's reproductions/<paper>/cells/, a benchmark's
benchmarks/cells/)."""

import json
import lzma
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from reproductions._runner import cells as cell_store  # noqa: E402


def test_pack_keeps_every_record_and_removes_only_what_it_packed(tmp_path, monkeypatch):
    monkeypatch.setattr(cell_store, "REPO", tmp_path)
    (tmp_path / "flowergraph").mkdir()
    (tmp_path / "flowergraph" / "m.py").write_text("x = 1\n")
    store = cell_store.CellStore("b", sources=("flowergraph/*.py",))
    a = store.save("a", {"seed": 0}, {"acc": 0.5})
    store.save("b", {"seed": 1}, {"acc": 0.25})
    other = tmp_path / "benchmarks" / "cells" / "b" / "notes.txt"  # not a cell: never touched
    other.write_text("mine")
    assert store.pack() == (2, 2)
    assert sorted(p.name for p in store.dir.iterdir()) == ["notes.txt"] and other.read_text() == "mine"
    with lzma.open(store.archive, "rt") as f:
        assert [json.loads(line)["cell"] for line in f] == ["a", "b"]
    again = cell_store.CellStore("b", sources=("flowergraph/*.py",))
    assert again.load("a") == a and [r["row"]["acc"] for r in again.records()] == [0.5, 0.25]
    again.save("a", {"seed": 0}, {"acc": 0.75})  # a re-run cell, loose: it wins over the packed one
    assert again.load("a")["row"]["acc"] == 0.75
    assert [r["row"]["acc"] for r in again.records()] == [0.75, 0.25]
    assert again.pack() == (2, 1) and cell_store.CellStore("b").load("a")["row"]["acc"] == 0.75
    assert again.pack() == (2, 0)  # nothing loose: the archive is left as it is


def test_the_repository_cells_stay_small():
    """Issue 70: the stored cells at most 5 MB in all (the archives and the parked checkpoints)."""
    folders = {REPO / folder for folder, _ in cell_store.STORES.values()}
    total = sum(p.stat().st_size for folder in folders for p in folder.rglob("*") if p.is_file())
    assert 1_000_000 < total <= 5_000_000, (
        f"the cell folders {sorted(map(str, folders))} hold {total:,} bytes (at most 5,000,000): pack them "
        "(python -m reproductions._runner.cells pack)"
    )


def test_every_store_names_its_folder_and_the_sources_its_cells_were_hashed_with():
    """A store missing from STORES would be read with the whole package's hash (every cell "older"), and a store
    named in STORES is found in its folder."""
    assert set(cell_store.store_names()) == set(cell_store.STORES), (
        f"stores not in cells.STORES: {sorted(set(cell_store.store_names()) - set(cell_store.STORES))}; "
        f"named but not found in their folders: {sorted(set(cell_store.STORES) - set(cell_store.store_names()))}"
    )
    for name, (folder, _) in cell_store.STORES.items():
        assert cell_store.CellStore(name).archive == REPO / folder / f"{name}.jsonl.xz"
        assert cell_store.CellStore(name).archive.is_file(), name


def test_currency_counts_the_cells_a_code_change_turns_into_older_code(tmp_path, monkeypatch, capsys):
    """The refactor case (fe4f7ce, reverted): a code change that moves no number still changes the sources hash,
    and `status --against` names the store whose current cells it turns older; same_computation counts back."""
    import types

    monkeypatch.setattr(cell_store, "REPO", tmp_path)
    module = tmp_path / "flowergraph" / "m.py"
    module.parent.mkdir()
    module.write_text("x = 1\n")
    before = tmp_path / "before"
    (before / "flowergraph").mkdir(parents=True)
    (before / "flowergraph" / "m.py").write_text("x = 1  # a comment is not code\n")
    grid = types.ModuleType("fake_grid")
    grid.SOURCES = ("flowergraph/*.py",)
    monkeypatch.setitem(sys.modules, "fake_grid", grid)
    monkeypatch.setitem(cell_store.STORES, "b", ("benchmarks/cells", "fake_grid"))
    old = cell_store.CellStore("b", grid.SOURCES)
    old.save("a", {"seed": 0}, {"acc": 0.5})
    old.save("b", {"seed": 1}, {"acc": 0.5})
    module.write_text("x = 2 - 1\n")  # same value, other code
    new = cell_store.CellStore("b", grid.SOURCES)
    new.save("c", {"seed": 2}, {"acc": 0.5})
    got = cell_store.currency("b", against=before)
    assert got["cells"] == 3 and got["current"] == 1 and got["against"] == 2
    assert got["sources"] == new.code["sources"] != old.code["sources"]
    assert got["older"] == {old.code["sources"]: (2, ["unknown"])}  # tmp_path is no git checkout
    grid.same_computation = lambda h: {h, old.code["sources"]} if h == new.code["sources"] else {h}
    again = cell_store.currency("b", against=before)
    assert again["current"] == 3 and again["older"] == {} and again["against"] == 2
    with pytest.raises(SystemExit):
        cell_store.status_main(["status", "nope"])
    assert "no store 'nope'; the stores: ['b']" in capsys.readouterr().err
