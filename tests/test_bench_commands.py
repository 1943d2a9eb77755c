"""A results file names the commands that computed its cells, not only the one that wrote it
(``reproductions/_runner/cells.py``: ``CellStore.save`` records the command; ``reproductions/_runner/common.py``:
``write_result(cell_commands=...)`` lists them).

The defect this guards against: a table rewritten with ``--tables-only`` said it was "produced by" that command,
which computes nothing, and the commands that did compute its numbers were lost."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner import cells as cell_store, common  # noqa: E402


def test_command_line_leaves_out_the_scratch_folder():
    argv = [
        str(REPO / "benchmarks" / "x.py"),
        "--budget",
        "paper",
        "--work",
        "/tmp/w",
        "--seeds",
        "0",
        "1",
        "--work=/tmp/v",
    ]
    assert common.command_line(argv, drop=("--work",)) == ".venv/bin/python benchmarks/x.py --budget paper --seeds 0 1"
    assert (
        common.command_line(argv)
        == ".venv/bin/python benchmarks/x.py --budget paper --work /tmp/w --seeds 0 1 --work=/tmp/v"
    )


def test_cells_record_their_command_and_the_results_file_lists_them(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "REPO", tmp_path)
    monkeypatch.setattr(cell_store, "REPO", tmp_path)
    monkeypatch.setattr(common, "machine", lambda: "test machine")
    store = cell_store.CellStore("demo", ("nothing/*.py",))
    bench = str(tmp_path / "benchmarks" / "demo.py")
    monkeypatch.setattr(sys, "argv", [bench, "--budget", "long", "--work", "/scratch/a"])
    store.save("c1", {}, {"budget": "long", "acc": 0.5})
    monkeypatch.setattr(sys, "argv", [bench, "--budget", "long", "--seeds", "2"])
    store.save("c2", {}, {"budget": "long", "acc": 0.6})
    store.save("c3", {}, {"budget": "quick", "acc": 0.7})
    assert store.load("c1")["command"] == ".venv/bin/python benchmarks/demo.py --budget long"
    long_cells = store.commands(lambda row: row["budget"] == "long")
    assert long_cells == [
        ".venv/bin/python benchmarks/demo.py --budget long",
        ".venv/bin/python benchmarks/demo.py --budget long --seeds 2",
    ]

    out = common.write_result(
        "demo", "Demo", "| table |", argv=[bench, "--budget", "long", "--tables-only"], cell_commands=long_cells
    )
    text = out.read_text()
    head, cells = text.split("Its cells were computed by")
    assert "```bash\n.venv/bin/python benchmarks/demo.py --budget long --tables-only\n```" in head
    assert (
        "```bash\n.venv/bin/python benchmarks/demo.py --budget long\n"
        ".venv/bin/python benchmarks/demo.py --budget long --seeds 2\n```"
    ) in cells
    assert "--seeds 2" not in head and "/scratch" not in text


def test_a_file_written_by_the_command_that_computed_its_cells_lists_nothing_more(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "REPO", tmp_path)
    monkeypatch.setattr(common, "machine", lambda: "test machine")
    argv = [str(tmp_path / "benchmarks" / "demo.py"), "--budget", "long"]
    out = common.write_result(
        "demo", "Demo", "body", argv=argv, cell_commands=[".venv/bin/python benchmarks/demo.py --budget long"]
    )
    assert "Its cells were computed by" not in out.read_text()
