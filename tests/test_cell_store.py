"""benchmarks/cell_store.py's CellStore: cells packed into one xz archive per benchmark, loose cells beside it."""

import json
import lzma
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import cell_store  # noqa: E402


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
    """Issue 70: benchmarks/cells at most 5 MB (the archives and the parked checkpoints)."""
    total = sum(p.stat().st_size for p in (REPO / "benchmarks" / "cells").rglob("*") if p.is_file())
    assert total <= 5_000_000, (
        f"benchmarks/cells holds {total:,} bytes (at most 5,000,000): pack it (python benchmarks/cell_store.py pack)"
    )
