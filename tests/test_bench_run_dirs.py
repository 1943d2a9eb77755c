"""A benchmark cell's run folder is read back or resumed only when today's code wrote it
(``benchmarks/common.prepare_run_dir``).

The bug this guards against: ``--rerun-stale`` in a ``--work`` folder that still held the finished run of an
older code state read that run's output back (in 0.1 s) and stored it as a cell of today's code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import RUN_CODE, code_state, prepare_run_dir, run_dir_current  # noqa: E402

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
    for name, marker in (("unmarked", None), ("other-code", {"sources": "0123456789abcdef"})):
        out = tmp_path / name
        _finished_run(out, marker)
        assert not run_dir_current(out, SOURCES)
        assert prepare_run_dir(out, SOURCES) == "fresh"
        assert not (out / "summary.json").exists() and not (out / "rounds.jsonl").exists()
        assert run_dir_current(out, SOURCES)


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
