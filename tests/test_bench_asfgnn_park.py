"""Parking an ASFGNN benchmark cell (reproductions/asfgnn/run.py ``--park``): a run stopped between trials, kept as its
parked file only (run folder, client state and checkpoint arrays deleted), resumes to the row the uninterrupted
run gives, trial by trial; a checkpoint inside a trial and a parked file of other code are refused."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner.cells import _sources_hash  # noqa: E402
from reproductions.asfgnn import compute, grid, parking  # noqa: E402
from reproductions.asfgnn import report  # noqa: E402

NAME = "tuned-Cora-label-a1.0-fl-quick-hpo-s3"


@pytest.fixture
def data(shared_data, monkeypatch):
    monkeypatch.setenv("FLOWERGRAPH_DATA", str(shared_data))


def comparable(row: dict) -> dict:
    """A row without its timings (the trials' seconds and the wall time differ between two runs)."""
    return {
        **{k: v for k, v in row.items() if k != "wall_s"},
        "trials": [{k: v for k, v in t.items() if k != "time_s"} for t in row["trials"]],
    }


def test_a_parked_cell_resumes_to_the_uninterrupted_row(tmp_path, data, monkeypatch):
    # SMAC's folder is made inside the cell's run folder, not in the machine's temp directory: parking kills the
    # process group, which skips the driver's clean-up, and the folder then stays with the run it belongs to
    import tempfile

    from flowergraph.methods.asfgnn.maths import search

    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_temp))
    smac_folders = []
    build = search.SmacSearch._new_smac

    def recorded(driver):
        smac = build(driver)
        smac_folders.append(Path(str(smac.scenario.output_directory)))
        return smac

    monkeypatch.setattr(search.SmacSearch, "_new_smac", recorded)
    # 3 trials x 10 rounds. The search driver's own rebuild (SMAC's model-based proposals after the initial
    # design) is checked in tests/test_asfgnn_core.py; the same test with the paper's GP facade (12 trials of 2
    # rounds, parked after 10) passed once by hand on 2026-11-28 and took 204 s, too long for the suite
    config = grid.run_config("Cora", "fl", seed=3, budget="quick", facade="hpo")
    per_trial, stop = config["asfgnn.trial-rounds"] + 1, 1
    nowhere = tmp_path / "no-parked-files"
    whole = compute.run_cell(tmp_path / "whole", NAME, config, parked_root=nowhere)
    assert len(whole["trials"]) == 3

    # the same run stopped after its first trial (a checkpoint between trials), parked, its folder deleted
    compute.run_cell(tmp_path / "stopped", NAME, {**config, "rounds": stop * per_trial}, parked_root=nowhere)
    parked = parking.park_run(tmp_path / "stopped" / NAME)
    assert parked["round"] == stop * per_trial and parked["trials_finished"] == stop
    assert parked["strategy_state"]["client_checkpoint"] is None  # the clients' files are not kept
    assert len(parked["records"]) == stop * per_trial
    assert not any("clients" in r for r in parked["records"])  # slim records: no per-client numbers
    path = parking.parked_path(NAME, tmp_path / "parked")
    assert parking.write_parked(parked, path) > 0
    assert f"- {NAME}: 1 of 3 trials (round {per_trial})" in report.parked_note("quick", tmp_path / "parked")
    assert report.parked_note("paper", tmp_path / "parked") == ""  # another budget's results file lists none
    shutil.rmtree(tmp_path / "stopped")

    resumed = compute.run_cell(tmp_path / "stopped", NAME, config, parked_root=tmp_path / "parked")
    assert comparable(resumed) == comparable(whole)
    assert resumed["wall_s"] >= parked["wall_s"] > 0  # the parked segment's time is counted
    meta = json.loads((tmp_path / "stopped" / NAME / "config.json").read_text())
    assert meta["resumed_at_round"] == stop * per_trial  # it did resume (did not start over)
    rounds = (tmp_path / "stopped" / NAME / "rounds.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in rounds] == list(range(1, 3 * per_trial + 1))
    # what the resumed run's summary sums over every round, the parked (slim) ones included, is the whole run's
    from flowergraph.storage.results import read_run

    whole_sum, resumed_sum = (read_run(tmp_path / d / NAME)["summary"] for d in ("whole", "stopped"))
    totals = ("rounds_completed", "final_accuracy", "best_accuracy", "best_round", "bytes_down", "bytes_up")
    assert {k: resumed_sum[k] for k in totals} == {k: whole_sum[k] for k in totals}

    # one SMAC for the whole run, one for the stopped run, two for the resumed one (built, then rebuilt from the
    # checkpoint)
    assert len(smac_folders) == 4 and tmp_path / "whole" / NAME / "tmp" in smac_folders[0].parents
    assert all(tmp_path / "stopped" / NAME / "tmp" in f.parents for f in smac_folders[1:])
    assert list(system_temp.iterdir()) == [] and not (tmp_path / "whole" / NAME / "tmp").exists()
    # a run folder holding a finished (hence newer) run is not overwritten by the parked file
    assert parking.unpark(tmp_path / "stopped" / NAME, path, _sources_hash(grid.SOURCES)) is False


def test_parking_refuses_a_checkpoint_inside_a_trial_and_a_parked_run_of_other_code(
    tmp_path, data, capsys, monkeypatch
):
    from flowergraph.storage.checkpoint import checkpoint_file, load_checkpoint, save_checkpoint

    config = grid.run_config("Cora", "sp", seed=3, budget="quick", facade="hpo")
    per_trial = config["asfgnn.trial-rounds"] + 1
    out = tmp_path / "w" / NAME
    compute.run_cell(tmp_path / "w", NAME, {**config, "rounds": per_trial}, parked_root=tmp_path / "none")
    ckpt = load_checkpoint(out)
    ckpt.strategy_state["asfgnn"]["trial"]["finished"] = False
    save_checkpoint(ckpt, checkpoint_file(out, per_trial + 1))  # the latest checkpoint now looks mid-trial
    with pytest.raises(
        ValueError, match=f"round {per_trial} is inside trial 0; only a checkpoint between trials can be parked"
    ):
        parking.park_run(out)

    (out / "checkpoints" / f"round-{per_trial + 1:06d}.npz").unlink()
    path = parking.parked_path(NAME, tmp_path / "parked")
    parking.write_parked({**parking.park_run(out), "sources": "0123456789abcdef"}, path)
    target = tmp_path / "elsewhere" / NAME
    assert parking.unpark(target, path, _sources_hash(grid.SOURCES)) is False
    assert not target.exists()
    assert "was parked by other code (sources 0123456789abcdef" in capsys.readouterr().err
    # unless this code was checked to repeat that code's cells (grid.SAME_AS)
    now = _sources_hash(grid.SOURCES)
    monkeypatch.setitem(grid.SAME_AS, now, {"0123456789abcdef": "checked"})
    assert parking.unpark(target, path, now) is True and (target / "checkpoints").is_dir()
    assert "older code" not in report.parked_note("quick", tmp_path / "parked")
