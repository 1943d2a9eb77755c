"""End to end through Flower's Ray simulation (each run ~20-30 s: Ray start-up dominates)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest

from flowergraph.clients.node import NodeClassificationClient
from flowergraph.storage.results import read_run
from flowergraph.simulation import run_flower_app, run_simulation
from flowergraph.strategies.common import weighted_average, weighted_metric
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.training import TrainConfig

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.simulation


def _assert_all_stopped(pids):
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"processes left running: {alive}"


def _replay(num_clients, rounds, graph_spec, part_spec, train, seed):
    """The same federation computed in this process, without Flower: the reference for the simulation."""
    clients = [NodeClassificationClient(client_graph(graph_spec, part_spec, k), train, {"kind": "gcn"}, seed=seed)
               for k in range(num_clients)]
    params = clients[0].get_parameters({})
    accs = []
    for r in range(1, rounds + 1):
        results = [c.fit(params, {"server_round": r}) for c in clients]
        params = weighted_average([res[0] for res in results], [float(res[1]) for res in results])
        evals = [c.evaluate(params, {"server_round": r}) for c in clients]
        accs.append(weighted_metric((m["accuracy"], m["num_test"]) for _, _, m in evals))
    return accs


def test_fedavg_three_clients_two_rounds_equals_in_process_replay(tmp_path, monkeypatch):
    times = tmp_path / "message-times.jsonl"  # every ClientApp message appends its process id here
    monkeypatch.setenv("FLOWERGRAPH_MESSAGE_TIMES", str(times))
    result = run_simulation("fedavg", num_clients=3, rounds=2, out=tmp_path / "run",
                            overrides={"node.partitioner": "metis", "seed": 5}, timeout=300, ray_cpus=1)
    assert result.ok, result.log_file.read_text()[-3000:]
    _assert_all_stopped(result.pids)
    run = read_run(result.out_dir)
    assert run["summary"]["status"] == "completed" and run["summary"]["rounds_completed"] == 2
    assert [r["round"] for r in run["rounds"]] == [1, 2]
    for row in run["rounds"]:
        assert set(row["clients"]) == {"0", "1", "2"} and row["num_fit"] == 3 and row["bytes_down"] > 0
    assert run["config"]["node.partitioner"] == "metis" and run["config"]["num-clients"] == 3
    # ray_cpus=1: Ray got one CPU, so Flower ran every message of the 3 clients in one actor process
    handled = [json.loads(line) for line in times.read_text().splitlines()]
    assert sorted({r["partition"] for r in handled}) == ["0", "1", "2"] and len({r["pid"] for r in handled}) == 1
    # Flower's run equals the same computation done by hand in this process (same seeds, same data).
    expected = _replay(3, 2, GraphSpec(dataset="synthetic", seed=5),
                       PartitionSpec(partitioner="metis", num_clients=3, seed=5), TrainConfig(), seed=5)
    np.testing.assert_allclose([r["accuracy"] for r in run["rounds"]], expected, atol=1e-6)


def test_centralized_equals_training_on_the_whole_graph(tmp_path, shared_data):
    result = run_simulation("centralized", num_clients=4, rounds=2, dataset="Cora", out=tmp_path / "c",
                            overrides={"data-dir": str(shared_data), "node.local-steps": 5}, timeout=300,
                            ray_cpus=1)
    assert result.ok
    run = read_run(result.out_dir)
    assert set(run["rounds"][0]["clients"]) == {"0"}
    expected = _replay(1, 2, GraphSpec(dataset="Cora", data_dir=str(shared_data)),
                       PartitionSpec(partitioner="none", num_clients=1), TrainConfig(local_steps=5), seed=0)
    np.testing.assert_allclose([r["accuracy"] for r in run["rounds"]], expected, atol=1e-6)


def test_command_line_on_cora_shows_progress(tmp_path, shared_data):
    out = tmp_path / "cora"
    proc = subprocess.run(
        [sys.executable, "-m", "flowergraph.simulation", "--method", "fedavg", "--num-clients", "3", "--rounds", "2",
         "--dataset", "Cora", "--data-dir", str(shared_data), "--out", str(out), "--set", "server-eval=true",
         "--ray-cpus", "1"],
        capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[round 1/2]" in proc.stdout and "[round 2/2]" in proc.stdout
    assert f"results: {out}" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and 0.0 <= summary["final_accuracy"] <= 1.0
    assert summary["final_server_accuracy"] is not None
    for name in ("config.json", "rounds.jsonl", "flower.log"):
        assert (out / name).is_file()


@pytest.mark.parametrize("args,message", [
    (["--dataset", "Corra"], "error: unknown dataset 'Corra'; valid choices: node classification: Cora"),
    (["--method", "fedprx"], "error: unknown method 'fedprx'; valid choices: fedavg, fedprox"),
    (["--set", "node.partitioner=kmeans"], "error: unknown node.partitioner 'kmeans'; valid choices: dirichlet, "
                                           "louvain"),
    (["--num-clients", "50", "--set", "node.synthetic-nodes=20", "--set", "node.partitioner=random"],
     "error: num-clients=50 is more than the graph's 20 nodes"),
    (["--rounds", "0"], "error: rounds=0: must be >= 1"),
    (["--data-dir", "/no/such/dir"], "error: data-dir '/no/such/dir' does not exist"),
    (["--set", "rounds_=3"], "error: unknown run-config key 'rounds_'"),
    (["--ray-cpus", "1", "--cpus-per-client", "2"], "error: ray-cpus=1 is less than cpus-per-client=2: no client "
                                                    "would fit; give ray-cpus >= 2, or leave it out"),
])
def test_bad_input_fails_before_training(tmp_path, args, message, capsys, launcher_main):
    """The launcher's main in this process (the exit status of a real process is checked by the next test)."""
    assert launcher_main(["--out", str(tmp_path / "x"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x" / "flower.log").exists()  # Flower never started


def test_run_past_timeout_exits_nonzero_and_leaves_nothing_running(tmp_path):
    result = run_simulation("fedavg", num_clients=2, rounds=50, out=tmp_path / "t", timeout=8)
    assert result.status == "failed"
    assert json.loads((tmp_path / "t" / "summary.json").read_text())["status"] == "failed" \
        if (tmp_path / "t" / "summary.json").exists() else True
    _assert_all_stopped(result.pids)


def test_existing_results_are_never_overwritten(tmp_path):
    """In a fresh interpreter: bad input makes the launcher's process exit 2."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "rounds.jsonl").write_text('{"round": 1}\n')
    proc = subprocess.run([sys.executable, "-m", "flowergraph.simulation", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "already holds the results of a run" in proc.stderr
    assert (tmp_path / "r" / "rounds.jsonl").read_text() == '{"round": 1}\n'


def test_plugin_example_app(tmp_path):
    """A user's own Flower app (examples/plugin_app) with flowergraph's strategy and client."""
    run = run_flower_app(REPO / "examples" / "plugin_app", num_supernodes=3,
                         run_config={"results-dir": str(tmp_path / "res"), "num-server-rounds": 2},
                         log_dir=tmp_path, timeout=300, ray_cpus=1)
    assert run.status == "completed", run.log_file.read_text()[-3000:]
    _assert_all_stopped(run.pids)
    (run_dir,) = list((tmp_path / "res").iterdir())
    rounds = read_run(run_dir)["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    assert set(rounds[-1]["clients"]) == {"0", "1", "2"} and rounds[-1]["accuracy"] > 0.3
