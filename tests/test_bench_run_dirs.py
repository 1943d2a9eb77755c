"""A benchmark cell's run folder is read back or resumed only when today's code wrote it
(``reproductions/_runner/cells.prepare_run_dir``).

The bug this guards against: ``--rerun-stale`` in a ``--work`` folder that still held the finished run of an
older code state read that run's output back (in 0.1 s) and stored it as a cell of today's code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner.cells import RUN_CODE, code_state, prepare_run_dir, remove_run_folder, run_dir_current  # noqa: E402

SOURCES = ("flowergraph/errors.py",)


def _finished_run(out: Path, marker: dict | None) -> None:
    out.mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps({"status": "completed"}))
    (out / "rounds.jsonl").write_text('{"round": 1, "accuracy": 0.5}\n')
    if marker is not None:
        (out / RUN_CODE).write_text(json.dumps(marker))


def test_a_new_folder_is_started_and_records_the_code(tmp_path):
    out = tmp_path / "cell"
    assert prepare_run_dir(out, SOURCES) == "fresh"
    assert out.is_dir() and sorted(p.name for p in out.iterdir()) == [RUN_CODE]
    assert json.loads((out / RUN_CODE).read_text())["sources"] == code_state(SOURCES)["sources"]
    assert run_dir_current(out, SOURCES)


def test_a_finished_run_of_todays_code_is_read_back(tmp_path):
    out = tmp_path / "cell"
    _finished_run(out, {"sources": code_state(SOURCES)["sources"]})
    assert prepare_run_dir(out, SOURCES) == "completed"
    assert (out / "rounds.jsonl").read_text() == '{"round": 1, "accuracy": 0.5}\n'  # untouched


def test_a_finished_run_of_older_code_is_removed_not_read(tmp_path):
    out = tmp_path / "other-code"
    _finished_run(out, {"sources": "0123456789abcdef"})
    assert not run_dir_current(out, SOURCES)
    assert prepare_run_dir(out, SOURCES) == "fresh"
    assert not (out / "summary.json").exists() and not (out / "rounds.jsonl").exists()
    assert run_dir_current(out, SOURCES)


def test_a_folder_no_benchmark_started_is_refused_not_deleted(tmp_path):
    """A non-empty folder without the benchmark's record is not a benchmark's run folder (someone's own files, or
    a run from before the record existed): it is left whole and the error names it."""
    out = tmp_path / "unmarked"
    _finished_run(out, None)
    (out / "notes.txt").write_text("mine")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(SystemExit, match=rf"error: {out} holds files that no benchmark run started"):
        prepare_run_dir(out, SOURCES)
    assert sorted(p.name for p in out.iterdir()) == before and (out / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_run_dir(empty, SOURCES) == "fresh"  # an empty folder is fine


def test_a_stopped_run_resumes_only_under_todays_code(tmp_path):
    current = {"sources": code_state(SOURCES)["sources"]}
    for marker, expected in ((current, "resume"), ({"sources": "0123456789abcdef"}, "fresh")):
        out = tmp_path / expected
        (out / "checkpoints").mkdir(parents=True)
        (out / "checkpoints" / "round-10.npz").write_bytes(b"x")
        (out / RUN_CODE).write_text(json.dumps(marker))
        assert prepare_run_dir(out, SOURCES) == expected
        assert (out / "checkpoints" / "round-10.npz").exists() == (expected == "resume")


def test_a_started_run_without_checkpoints_starts_over(tmp_path):
    out = tmp_path / "cell"
    out.mkdir()
    (out / RUN_CODE).write_text(json.dumps({"sources": code_state(SOURCES)["sources"]}))
    (out / "rounds.jsonl").write_text("{}\n")  # a run killed before its first checkpoint
    assert prepare_run_dir(out, SOURCES) == "fresh"
    assert sorted(p.name for p in out.iterdir()) == [RUN_CODE]


def test_remove_run_folder_deletes_only_run_folders(tmp_path):
    """The benchmarks' "compute this cell again" clean-up: a run's folder (a flowergraph run's config.json, or
    the benchmark's record) and an empty folder go; anything else is refused and stays."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "rounds.jsonl").write_text("")
    remove_run_folder(run)
    assert not run.exists()
    remove_run_folder(tmp_path / "absent")  # nothing to do
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep")
    with pytest.raises(SystemExit, match=rf"error: {mine} is in the way of a benchmark's run folder"):
        remove_run_folder(mine)
    assert (mine / "thesis.tex").read_text() == "keep"
