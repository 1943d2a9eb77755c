import json

import pytest

from flowergraph.plot import main as plot_main
from flowergraph.storage.results import RunRecorder, read_run


def _fake_run(path, method, accs):
    rec = RunRecorder(
        path,
        {"method": method, "dataset": "Cora", "num-clients": 3, "node.partitioner": "dirichlet", "node.beta": 1.0},
        total_rounds=len(accs),
        log=None,
    )
    for i, acc in enumerate(accs, start=1):
        rec.write_round(
            {"round": i, "accuracy": acc, "elapsed_s": 0.5 * i, "time_s": 0.5, "bytes_down": 100, "bytes_up": 50}
        )
    return rec.finish()


def test_summary_tracks_final_and_best(tmp_path):
    summary = _fake_run(tmp_path / "a", "fedavg", [0.2, 0.6, float("nan"), 0.5])
    assert summary["status"] == "completed" and summary["rounds_completed"] == 4
    assert summary["best_accuracy"] == 0.6 and summary["best_round"] == 2
    assert summary["final_accuracy"] == 0.5
    assert summary["bytes_down"] == 400 and summary["mean_round_time_s"] == pytest.approx(0.5)
    rows = [json.loads(line) for line in (tmp_path / "a" / "rounds.jsonl").read_text().splitlines()]
    assert rows[2]["accuracy"] is None  # NaN is stored as null, never as invalid JSON
    assert read_run(tmp_path / "a")["config"]["method"] == "fedavg"


def test_plot_several_runs(tmp_path, capsys):
    _fake_run(tmp_path / "a", "fedavg", [0.2, 0.5, 0.7])
    _fake_run(tmp_path / "b", "centralized", [0.4, 0.7, 0.8])
    assert plot_main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "plots")]) == 0
    for name in ("accuracy_vs_round.png", "accuracy_vs_time.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    out = capsys.readouterr().out
    assert out.count("accuracy_vs_round.png") == 1 and out.startswith("plots: ")


def test_time_axis_and_summary_count_one_off_phases(tmp_path):
    """FedGCN's exchange (round 0) took time before round 1: the accuracy-vs-time plot and the summary count it."""
    from flowergraph.plot import setup_time

    rec = RunRecorder(tmp_path, {"method": "fedgcn"}, total_rounds=2, log=None)
    rec.write_round({"round": 0, "phase": "fedgcn-communication", "time_s": 7.5, "elapsed_s": 0.0})
    for r in (1, 2):
        rec.write_round({"round": r, "accuracy": 0.5, "time_s": 1.0, "elapsed_s": 1.0 * r})
    summary = rec.finish()
    assert summary["train_time_s"] == 2.0 and summary["phase_time_s"] == 7.5
    assert setup_time(read_run(tmp_path)["rounds"]) == 7.5


def test_plot_rejects_non_results_folder(tmp_path, capsys):
    assert plot_main([str(tmp_path)]) == 2
    assert "is not a flowergraph results directory (no rounds.jsonl)" in capsys.readouterr().err


def test_time_plot_starts_at_the_launch_and_names_its_clock(tmp_path):
    """The launcher's start time in the summary puts start-up on the time axis; without it the axis says what it
    leaves out. The y axis names which accuracy it is."""
    from flowergraph.plot import METRIC_LABELS, TIME_AXES, time_points
    from flowergraph.storage.results import add_launcher_times

    rec = RunRecorder(tmp_path / "a", {"method": "fedavg"}, total_rounds=2, log=None)
    t0 = rec.started
    for r in (1, 2):
        rec.write_round(
            {"round": r, "accuracy": 0.5 + r / 10, "time_s": 1.0, "elapsed_s": 1.0 * r, "ended_at": t0 + 20.0 + r}
        )
    rec.finish()
    assert time_points(read_run(tmp_path / "a"), "accuracy") == ("serverapp", [(21.0, 0.6), (22.0, 0.7)])
    add_launcher_times(tmp_path / "a", t0 - 30.0, 60.0)  # the launcher started 30 s before the ServerApp
    clock, pts = time_points(read_run(tmp_path / "a"), "accuracy")
    assert clock == "launcher" and [x for x, _ in pts] == [51.0, 52.0]
    assert read_run(tmp_path / "a")["summary"]["wall_time_s"] == 60.0
    assert "start-up included" in TIME_AXES["launcher"] and "start-up excluded" in TIME_AXES["rounds"]
    assert "test accuracy" in METRIC_LABELS["accuracy"]
