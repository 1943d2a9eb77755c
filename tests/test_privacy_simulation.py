"""Secure aggregation through Flower's transport (Ray simulation): ``secure-agg=secagg+`` runs the training
rounds through Flower's SecAggPlusWorkflow and ``secaggplus_mod``; the strategy is handed only the secure
aggregate (one distinct payload per round, checked on what the ServerApp receives) and the model equals plain
averaging within SecAgg+'s quantisation. FedGCN with ``fedgcn.he=true`` and ``secure-agg=secagg+`` is the
paper's fully private Algorithm 1. The in-process reference equals a Flower simulation of the same settings
(test_simulation.py), so it stands in for the plain runs."""

import io

import pytest

from flowergraph.app.inprocess import run_inprocess
from flowergraph.storage.results import read_run
from flowergraph.simulation import run_simulation

pytestmark = pytest.mark.simulation


def _training(path):
    return [r for r in read_run(path)["rounds"] if r.get("round", 0) >= 1 and not r.get("phase")]


def test_fedavg_under_secaggplus_equals_plain_averaging(tmp_path):
    run = {"seed": 3, "fused-eval": False}
    result = run_simulation("fedavg", 3, 3, None, tmp_path / "secagg", {**run, "secure-agg": "secagg+"},
                            stream=io.StringIO(), timeout=600)
    assert result.status == "completed", result.log_file.read_text()[-3000:]
    got = _training(tmp_path / "secagg")
    assert all(r["secure_agg"] == {"mode": "secagg+", "distinct_payloads": 1} for r in got)
    assert all(r["num_fit"] == 3 and r["aggregated"] and r["bytes_measured"] == "grid" for r in got)
    # SecAgg+'s four stages (setup, share keys, collect masked vectors, unmask), 3 clients each, each timed
    assert all([(st["messages"], st["replies"]) for st in r["fit_stages"]] == [(3, 3)] * 4 for r in got)
    assert all(0 < sum(st["time_s"] for st in r["fit_stages"]) <= r["time_s"] for r in got)
    run_inprocess({"method": "fedavg", "num-clients": 3, "rounds": 3, **run, "out-dir": str(tmp_path / "plain")})
    want = _training(tmp_path / "plain")
    assert [r["accuracy"] for r in got] == pytest.approx([r["accuracy"] for r in want], abs=0.003)
    assert [r["loss"] for r in got] == pytest.approx([r["loss"] for r in want], abs=2e-3)
    # SecAgg+ costs bytes the strategy never sees (key shares, masked vectors); the grid counts them
    assert all(r["bytes_up"] > w["bytes_up"] for r, w in zip(got, want))


def test_fedgcn_he_with_secaggplus_is_fully_private_algorithm_1(tmp_path):
    run = {"seed": 4, "fedgcn.hops": 2}
    result = run_simulation("fedgcn", 3, 2, None, tmp_path / "private",
                            {**run, "fedgcn.he": True, "secure-agg": "secagg+", "dp": "central-client",
                             "weighting": "uniform", "dp-noise-multiplier": 0.0, "dp-clipping-norm": 100.0},
                            stream=io.StringIO(), timeout=600)
    assert result.status == "completed", result.log_file.read_text()[-3000:]
    rounds = read_run(tmp_path / "private")["rounds"]
    phase = rounds[0]
    assert phase["phase"] == "fedgcn-communication" and phase["he"] is True
    got = _training(tmp_path / "private")
    assert all(r["secure_agg"]["distinct_payloads"] == 1 for r in got)
    assert [r["dp"]["releases"] for r in got] == [1, 2]
    run_inprocess({"method": "fedgcn", "num-clients": 3, "rounds": 2, **run, "weighting": "uniform",
                   "out-dir": str(tmp_path / "plain")})
    want = _training(tmp_path / "plain")
    # CKKS (1e-7) and SecAgg+ quantisation (4e-6) only: the accuracies agree; a 100-norm clip never binds
    assert [r["accuracy"] for r in got] == pytest.approx([r["accuracy"] for r in want], abs=0.003)
