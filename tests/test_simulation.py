"""End to end through the simulation launcher: Flower's Ray simulation (each run ~20-60 s: Ray start-up dominates)
where only Ray shows it (the launcher's command line and processes, the timeout, a user's own app), and the inline
engine elsewhere; the guard test runs one federation through both and compares their round records."""

import json
import time
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil
import pytest
from records import assert_same_rounds

from flowergraph.clients.node import NodeClassificationClient
from flowergraph.storage.results import read_run
from flowergraph.simulation import run_flower_app, run_simulation
from flowergraph.strategies.common import weighted_average, weighted_metric
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.training import TrainConfig

REPO = Path(__file__).resolve().parents[1]
INLINE = {"simulation-engine": "inline"}
COSTS = ("elapsed_s", "ended_at", "time_s")  # wall-clock keys of a round record; everything else must repeat


def _assert_all_stopped(pids):
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"processes left running: {alive}"


def _replay(num_clients, rounds, graph_spec, part_spec, train, seed):
    """The same federation computed in this process, without Flower: the reference for the simulation."""
    clients = [
        NodeClassificationClient(client_graph(graph_spec, part_spec, k), train, {"kind": "gcn"}, seed=seed)
        for k in range(num_clients)
    ]
    params = clients[0].get_parameters({})
    accs = []
    for r in range(1, rounds + 1):
        results = [c.fit(params, {"server_round": r}) for c in clients]
        params = weighted_average([res[0] for res in results], [float(res[1]) for res in results])
        evals = [c.evaluate(params, {"server_round": r}) for c in clients]
        accs.append(weighted_metric((m["accuracy"], m["num_test"]) for _, _, m in evals))
    return accs


@pytest.mark.simulation
@pytest.mark.ray
def test_the_launcher_through_ray_and_the_inline_engine_give_the_same_rounds(tmp_path):
    """The guard test of the inline engine, and the launcher's command line through Ray.

    Ray: a fresh interpreter runs ``python -m flowergraph.simulation`` (exit 0, one progress line per round, where
    the results are) with its own TMPDIR, which it must leave empty (no Ray session folder, no PyG module, no
    torch cache); ``--ray-cpus 1`` gives Flower one actor process for all three clients. Inline: the same run
    configuration through ``run_simulation`` with ``simulation-engine=inline``. Both must equal the federation
    computed by hand in this process, and each other: every key of every round record but the wall-clock ones
    (accuracies, losses, the server's evaluation, bytes each way, clients, failures) is equal. Exactly, not
    within a tolerance: the same code runs the same seeded single-thread training on the same bytes, and what
    differs (processes, threads, the transport's serialisation) must not change a number; the replay's
    tolerance (1e-6) is for the independent computation only."""
    args = {"node.partitioner": "metis", "seed": 5, "server-eval": True}
    own = tempfile.mkdtemp(prefix="fgx", dir="/tmp" if os.path.isdir("/tmp") else None)  # short: Ray's sockets
    times = tmp_path / "message-times.jsonl"  # every ClientApp message appends its process id here
    ray_out = tmp_path / "ray"
    try:
        env = dict(os.environ, TMPDIR=own, FLOWERGRAPH_MESSAGE_TIMES=str(times))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "flowergraph.simulation",
                "--method",
                "fedavg",
                "--num-clients",
                "3",
                "--rounds",
                "2",
                "--out",
                str(ray_out),
                "--ray-cpus",
                "1",
                *[x for k, v in args.items() for x in ("--set", f"{k}={str(v).lower()}")],
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert os.listdir(own) == []
    finally:
        shutil.rmtree(own, ignore_errors=True)
    assert "[round 1/2]" in proc.stdout and "[round 2/2]" in proc.stdout
    assert "flowergraph: run completed" in proc.stdout and f"results: {ray_out}" in proc.stdout
    for name in ("config.json", "rounds.jsonl", "summary.json", "flower.log", "superlink.log"):
        assert (ray_out / name).is_file(), name
    ray = read_run(ray_out)
    assert ray["summary"]["status"] == "completed" and ray["summary"]["rounds_completed"] == 2
    assert ray["config"]["node.partitioner"] == "metis" and ray["config"]["simulation-engine"] == "ray"
    handled = [json.loads(line) for line in times.read_text().splitlines()]
    assert sorted({r["partition"] for r in handled}) == ["0", "1", "2"] and len({r["pid"] for r in handled}) == 1

    result = run_simulation(
        "fedavg", num_clients=3, rounds=2, out=tmp_path / "inline", overrides={**args, **INLINE}, timeout=300
    )
    assert result.ok, result.log_file.read_text()[-3000:]
    _assert_all_stopped(result.pids)
    inline = read_run(result.out_dir)
    assert inline["config"]["simulation-engine"] == "inline"
    assert [r["round"] for r in ray["rounds"]] == [r["round"] for r in inline["rounds"]] == [1, 2]
    for row in inline["rounds"]:
        assert set(row["clients"]) == {"0", "1", "2"} and row["num_fit"] == 3 and row["bytes_down"] > 0
        assert row["server_accuracy"] is not None
    assert_same_rounds(ray["rounds"], inline["rounds"], COSTS)
    machine = ("_time_s", "_started", "out_dir")  # wall clock and where the results are
    assert {k: v for k, v in ray["summary"].items() if not k.endswith(machine)} == {
        k: v for k, v in inline["summary"].items() if not k.endswith(machine)
    }
    # ... and both equal the same computation done by hand in this process (same seeds, same data)
    expected = _replay(
        3,
        2,
        GraphSpec(dataset="synthetic", seed=5),
        PartitionSpec(partitioner="metis", num_clients=3, seed=5),
        TrainConfig(),
        seed=5,
    )
    np.testing.assert_allclose([r["accuracy"] for r in inline["rounds"]], expected, atol=1e-6)


@pytest.mark.simulation
def test_centralized_equals_training_on_the_whole_graph(tmp_path, shared_data):
    result = run_simulation(
        "centralized",
        num_clients=4,
        rounds=2,
        dataset="Cora",
        out=tmp_path / "c",
        overrides={"data-dir": str(shared_data), "node.local-steps": 5, **INLINE},
        timeout=300,
    )
    assert result.ok
    run = read_run(result.out_dir)
    assert set(run["rounds"][0]["clients"]) == {"0"}
    expected = _replay(
        1,
        2,
        GraphSpec(dataset="Cora", data_dir=str(shared_data)),
        PartitionSpec(partitioner="none", num_clients=1),
        TrainConfig(local_steps=5),
        seed=0,
    )
    np.testing.assert_allclose([r["accuracy"] for r in run["rounds"]], expected, atol=1e-6)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--dataset", "Corra"], "error: unknown dataset 'Corra'; valid choices: node classification: Cora"),
        (["--method", "fedprx"], "error: unknown method 'fedprx'; valid choices: fedavg, fedprox"),
        (
            ["--set", "node.partitioner=kmeans"],
            "error: unknown node.partitioner 'kmeans'; valid choices: dirichlet, louvain",
        ),
        (
            ["--num-clients", "50", "--set", "node.synthetic-nodes=20", "--set", "node.partitioner=random"],
            "error: num-clients=50 is more than the graph's 20 nodes",
        ),
        (["--rounds", "0"], "error: rounds=0: must be >= 1"),
        (["--data-dir", "/no/such/dir"], "error: data-dir '/no/such/dir' does not exist"),
        (["--set", "rounds_=3"], "error: unknown run-config key 'rounds_'"),
        (
            ["--ray-cpus", "1", "--cpus-per-client", "2"],
            "error: ray-cpus=1 is less than cpus-per-client=2: no client "
            "would fit; give ray-cpus >= 2, or leave it out",
        ),
    ],
)
def test_bad_input_fails_before_training(tmp_path, args, message, capsys, launcher_main):
    """The launcher's main in this process (the exit status of a real process is checked by the next test)."""
    assert launcher_main(["--out", str(tmp_path / "x"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x" / "flower.log").exists()  # Flower never started


@pytest.mark.simulation
@pytest.mark.ray
def test_run_past_timeout_exits_nonzero_and_leaves_nothing_running(tmp_path, monkeypatch):
    """The timeout counts from the launch: a slow data check (3 s here) spends part of it, and the message names
    the timeout the user gave (it once named what was left after the check)."""
    import io

    import flowergraph.simulation as launcher

    real = launcher.preflight

    def slow_preflight(settings):
        time.sleep(3)
        return real(settings)

    monkeypatch.setattr(launcher, "preflight", slow_preflight)
    said = io.StringIO()
    started = time.monotonic()
    result = run_simulation("fedavg", num_clients=2, rounds=50, out=tmp_path / "t", timeout=8, stream=said)
    assert result.status == "failed"
    assert "flowergraph: stopped after the 8 s timeout" in said.getvalue(), said.getvalue()[-2000:]
    assert time.monotonic() - started < 8 + 60  # the watchdog stopped it (50 rounds would take minutes)
    # the watchdog may stop the ServerApp before it wrote anything; what it wrote never says "completed"
    summary = tmp_path / "t" / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["status"] == "failed"
    _assert_all_stopped(result.pids)


def test_existing_results_are_never_overwritten(tmp_path):
    """In a fresh interpreter: bad input makes the launcher's process exit 2."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "rounds.jsonl").write_text('{"round": 1}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "flowergraph.simulation", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "already holds the results of a run" in proc.stderr
    assert (tmp_path / "r" / "rounds.jsonl").read_text() == '{"round": 1}\n'


@pytest.mark.simulation
@pytest.mark.ray
def test_plugin_example_app(tmp_path):
    """A user's own Flower app (examples/plugin_app) with flowergraph's strategy and client."""
    run = run_flower_app(
        REPO / "examples" / "plugin_app",
        num_supernodes=3,
        run_config={"results-dir": str(tmp_path / "res"), "num-server-rounds": 2},
        log_dir=tmp_path,
        timeout=300,
        ray_cpus=1,
    )
    assert run.status == "completed", run.log_file.read_text()[-3000:]
    _assert_all_stopped(run.pids)
    (run_dir,) = list((tmp_path / "res").iterdir())
    rounds = read_run(run_dir)["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    assert set(rounds[-1]["clients"]) == {"0", "1", "2"} and rounds[-1]["accuracy"] > 0.3
