"""flowergraph on Flower's Message API (flowergraph.app.message_server / message_client / message_records).

Every run here goes through Flower's own Simulation Engine in the test process (InMemoryGrid, link state, the
engine's node contexts) with flowergraph's inline backend, which serialises every message and context through
Flower's protobuf bytes both ways (flowergraph.app.inline): what the clients receive is what a deployment carries.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from flowergraph.app import client_app, message_client, message_records, server_app
from flowergraph.app.generator import write_app
from flowergraph.app.inline import InlineBackend, run_inline
from flowergraph.app.message_server import FlowergraphStrategy
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config
from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.storage.results import read_run
import golden_cases
from records import assert_same_rounds, untimed

COSTS = golden_cases.COSTS
REPO = Path(__file__).resolve().parents[1]


class Recording(InlineBackend):
    """The inline backend, keeping (message type, record names) of every message a client received."""

    def __init__(self):
        super().__init__()
        self.received: list[tuple[str, tuple[str, ...]]] = []

    def process_message(self, message, context):
        from flowergraph.app.inline import wire_message

        got = wire_message(message)
        self.received.append((got.metadata.message_type, tuple(sorted(got.content.keys()))))
        return super().process_message(message, context)


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory):
    return write_app(tmp_path_factory.mktemp("message-api") / "app")


def _faces(app_dir, tmp_path, config, num_nodes):
    """The same run config through the legacy face and the Message-API face: {face: (rounds, backend)}."""
    out = {}
    for face in ("legacy", "message"):
        golden_cases.seed_flower_dp()
        backend = Recording()
        folder = tmp_path / face
        run_inline(
            server_app.app,
            client_app.app,
            num_supernodes=num_nodes,
            app_dir=app_dir,
            backend=backend,
            overrides={**config, "out-dir": str(folder), "flower-api": face},
        )
        out[face] = (read_run(folder)["rounds"], backend)
    return out


@pytest.mark.simulation
@pytest.mark.parametrize("method", golden_cases.CASES)
def test_both_faces_give_the_same_rounds_and_the_golden_records(method, app_dir, tmp_path, request):
    """Every method: the Message-API face's round records (accuracies, losses, phases, bytes, per-client rows)
    equal the legacy face's and the golden records the 0.3 core stored (``tests/golden/<case>.json``, made by
    ``tests/golden/generate.py``), and the clients received Message-API records on the one and legacy records on
    the other (every message type each face sends, as the client's side decoded it)."""
    data = request.getfixturevalue("shared_data") if method in golden_cases.NEEDS_DATA else ""
    config = golden_cases.case_config(method, data, tmp_path)
    faces = _faces(app_dir, tmp_path, config, golden_cases.num_nodes(method, config))
    legacy, message = faces["legacy"][0], faces["message"][0]
    assert [r["round"] for r in message] == [r["round"] for r in legacy] and len(legacy) >= 2
    assert any(r.get("auc" if method.startswith("link") else "accuracy") is not None for r in message)
    golden = json.loads((golden_cases.GOLDEN / f"{method}.json").read_text())["rounds"]
    if method == "fedavg-ckks":
        # CKKS is approximate arithmetic with fresh randomness in every encryption: two runs of the same face
        # differ in the last digits of every decrypted sum (total_weight 1200 -> 1199.999999...), so this case is
        # compared to 1e-5 relative, everything else exactly
        for a, b, g in zip(legacy, message, golden, strict=True):
            golden_cases.close(untimed(a, COSTS), untimed(b, COSTS), a["round"])
            golden_cases.close(g, untimed(b, COSTS), ("golden", a["round"]))
    else:
        assert_same_rounds(legacy, message, COSTS)
        assert_same_rounds(golden, message, COSTS)
    got_legacy = {kind for kind, _ in faces["legacy"][1].received}
    got_message = {kind for kind, _ in faces["message"][1].received}
    assert got_message <= {"train", "evaluate", *message_records.ACTIONS} and "train" in got_message
    assert "query.fg_identity" in got_message
    if method in ("fedavg-dp", "link-fedavg-dp"):
        assert all(
            r["dp"]["mode"] == "central-server" and r["dp"]["noise_stddev"] > 0 for r in message if r["round"] >= 1
        )
    assert "get_properties" in got_legacy and "train" in got_legacy
    trains = [names for kind, names in faces["message"][1].received if kind == "train"]
    assert all(names == ("arrays", "config") for names in trains)
    legacy_trains = [names for kind, names in faces["legacy"][1].received if kind == "train"]
    assert all("fitins.parameters" in names for names in legacy_trains)
    if method == "fedgcn":  # the one-off neighbour exchange ran as phase messages on the Message API
        assert "query.fg_phase" in got_message
        phases = [names for kind, names in faces["message"][1].received if kind == "query.fg_phase"]
        assert any("arrays" in names for names in phases)  # its arrays in an ArrayRecord, not bytes in a config


def _cora(shared_data, **extra):
    return {
        "method": "fedavg",
        "dataset": "Cora",
        "num-clients": 3,
        "rounds": 3,
        "seed": 1,
        "data-dir": str(shared_data),
        "fused-eval": False,
        **extra,
    }


@pytest.mark.simulation
def test_flowers_stock_fedavg_drives_flowergraphs_handlers_as_flowergraphs_fedavg_does(app_dir, shared_data, tmp_path):
    """Flower's own ``flwr.serverapp.strategy.FedAvg`` (weighting by ``num-examples``, every node every round)
    against flowergraph's baseline handlers on Cora gives, round by round, the test accuracies flowergraph's
    ``fedavg`` (train-size weighting) records; the initial model is the one flowergraph's clients build."""
    from flwr.serverapp.strategy import FedAvg

    config = _cora(shared_data)
    run_inline(
        server_app.app,
        client_app.app,
        num_supernodes=3,
        app_dir=app_dir,
        overrides={**config, "out-dir": str(tmp_path / "ours"), "flower-api": "message"},
    )
    ours = {r["round"]: r["accuracy"] for r in read_run(tmp_path / "ours")["rounds"] if r["round"] >= 1}
    results = {}
    stock = ServerApp()

    @stock.main()
    def main(grid: Grid, context: Context) -> None:
        initial = message_client.initial_arrays(context.run_config)
        strategy = FedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_available_nodes=3)
        results["r"] = strategy.start(grid=grid, initial_arrays=initial, num_rounds=3)

    run_inline(
        stock,
        message_client.client_app(),
        num_supernodes=3,
        app_dir=app_dir,
        overrides={**config, "out-dir": str(tmp_path / "stock")},
    )
    theirs = {r: m["accuracy"] for r, m in results["r"].evaluate_metrics_clientapp.items()}
    assert sorted(theirs) == sorted(ours) == [1, 2, 3]
    for r in ours:
        assert theirs[r] == pytest.approx(ours[r], abs=1e-9), r
    assert ours[3] > 0.5  # Cora after 3 rounds of fedavg: it trained


@pytest.mark.simulation
def test_flowergraphs_fedavg_drives_a_stock_flower_client(app_dir, tmp_path):
    """A ClientApp written as in Flower's quickstart (``@app.train()`` / ``@app.evaluate()``, arrays and metrics
    records, no flowergraph code, no identity or phase handlers): flowergraph's fedavg strategy trains it, and
    each round's global model is the ``num-examples``-weighted mean of what the clients sent (computed here from
    the replies they actually sent)."""
    sent: dict[int, list] = {}
    stock = ClientApp()
    target = np.array([1.0, -2.0, 3.0], dtype=np.float32)

    @stock.train()
    def train(msg: Message, context: Context) -> Message:
        k = int(context.node_config["partition-id"])
        w = msg.content["arrays"]["w"].numpy()
        w = w + (0.5 + 0.25 * k) * (target - w)  # a client's "training": part of the way to the target
        n = 10 * (k + 1)
        sent.setdefault(int(msg.content["config"]["server_round"]), []).append((w.copy(), n))
        return Message(
            RecordDict(
                {
                    "arrays": ArrayRecord({"w": message_records.Array(w)}),
                    "metrics": MetricRecord({"num-examples": n, "train_loss": float(np.square(target - w).sum())}),
                }
            ),
            reply_to=msg,
        )

    @stock.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        w = msg.content["arrays"]["w"].numpy()
        err = float(np.square(target - w).sum())
        return Message(
            RecordDict({"metrics": MetricRecord({"num-examples": 5, "loss": err, "accuracy": 1.0 / (1.0 + err)})}),
            reply_to=msg,
        )

    strategy = FlowergraphStrategy.from_run_config(
        {"method": "fedavg", "num-clients": 3, "rounds": 3, "fused-eval": False, "connect-timeout": 30}
    )
    result = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        result["r"] = strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord({"w": message_records.Array(np.zeros(3, dtype=np.float32))}),
            num_rounds=3,
        )

    run_inline(server, stock, num_supernodes=3, app_dir=app_dir, overrides={"out-dir": str(tmp_path / "o")})
    w = np.zeros(3, dtype=np.float32)
    for r in (1, 2, 3):
        ws, ns = zip(*sent[r])
        w = sum(wi * ni for wi, ni in zip(ws, ns)) / sum(ns)
    np.testing.assert_allclose(result["r"].arrays["w"].numpy(), w, rtol=1e-6)
    accuracies = [result["r"].evaluate_metrics_clientapp[r]["accuracy"] for r in (1, 2, 3)]
    assert accuracies == sorted(accuracies) and accuracies[-1] > 0.9


def test_a_bad_value_is_refused_with_the_launchers_message(app_dir, tmp_path, monkeypatch):
    """A bad run-config value reaching the Message-API strategy, or a ClientApp handler, is refused with the
    message the launcher prints for it."""
    from flwr.supercore.task_identity import TaskIdentity

    for attribute, value in (("_task_id", 1), ("_run_id", 1), ("_node_id", 7)):  # what a node's process has set
        monkeypatch.setattr(TaskIdentity, attribute, value)
    bad = {"method": "fedavg", "weighting": "by-size"}
    with pytest.raises(ConfigError) as launcher:
        parse_run_config(bad)
    with pytest.raises(ConfigError) as strategy:
        FlowergraphStrategy.from_run_config(bad)
    assert str(strategy.value) == str(launcher.value) and "by-size" in str(launcher.value)
    assert "valid choices" in str(launcher.value)
    with pytest.raises(ConfigError, match="secure-agg='secagg\\+' with flower-api='message'"):
        parse_run_config({"method": "fedavg", "secure-agg": "secagg+", "flower-api": "message"})
    context = Context(
        run_id=1,
        node_id=7,
        node_config={"partition-id": 0, "num-partitions": 3},
        state=RecordDict(),
        run_config={"method": "fedavg", "num-clients": 3, "weighting": "by-size"},
    )
    msg = Message(
        RecordDict({"arrays": ArrayRecord(), "config": ConfigRecord({})}), dst_node_id=7, message_type="train"
    )
    with pytest.raises(ConfigError) as handler:
        message_client.train(msg, context)
    assert str(launcher.value) in str(handler.value) and "flowergraph refused the run" in str(handler.value)


@pytest.mark.simulation
def test_checkpoint_kill_and_resume_on_the_message_api_equals_the_uninterrupted_run(shared_data, tmp_path):
    """FedGraph (server state: the DDPG agent; client state: each client's episode in ``context.state``) through
    the Message-API face: the launcher is killed (SIGKILL, its whole process group) once round 2's checkpoint is
    written, ``--resume`` finishes the run, and rounds 3-6 and the final model equal an uninterrupted run's."""
    base = [
        sys.executable,
        "-m",
        "flowergraph.simulation",
        "--method",
        "fedgraph",
        "--num-clients",
        "3",
        "--rounds",
        "6",
        "--dataset",
        "Cora",
    ]
    sets = {
        "seed": 5,
        "fedgraph.alpha": 0.0,
        "fedgraph.episode-rounds": 2,
        "data-dir": str(shared_data),
        "simulation-engine": "inline",
        "flower-api": "message",
        "checkpoint-every": 1,
    }

    def command(out, state):
        extra = [a for k, v in {**sets, "state-dir": str(state)}.items() for a in ("--set", f"{k}={v}")]
        return base + ["--out", str(out)] + extra

    env = dict(os.environ, PYTHONPATH=str(REPO))
    full = subprocess.run(
        command(tmp_path / "full", tmp_path / "s1"), env=env, capture_output=True, text=True, timeout=600
    )
    assert full.returncode == 0, full.stdout[-3000:] + full.stderr[-3000:]
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        command(out, tmp_path / "s2"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "round-000002.npz").exists():  # renamed into place when complete
            assert proc.poll() is None and time.monotonic() < deadline, "no round-2 checkpoint"
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    done = [r["round"] for r in read_run(out)["rounds"]] if (out / "rounds.jsonl").exists() else []
    # rounds take ~0.2 s each: rounds 3-6 leave ~1 s to notice round 2's checkpoint; resumed from the last one
    assert 6 not in done, "the run ended before it was killed"
    resumed = subprocess.run(base[:3] + ["--resume", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    want = [r for r in read_run(tmp_path / "full")["rounds"] if r["round"] > 2]
    got = [r for r in read_run(out)["rounds"] if r["round"] > 2]
    assert [r["round"] for r in got] == [3, 4, 5, 6]
    assert_same_rounds(want, got, COSTS)
    for a, b in zip(load_checkpoint(tmp_path / "full").arrays, load_checkpoint(out).arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"


@pytest.mark.simulation
@pytest.mark.ray
def test_the_example_app_runs_with_flwr_run_in_flowers_simulation(tmp_path):
    """examples/message_api_app (its own ServerApp and quickstart-style ClientApp) through ``flwr run`` on a
    private SuperLink in Flower's Ray simulation: FedGCN on the synthetic graph trains, and its per-round
    accuracies equal flowergraph's own ServerApp's on the Message-API face with the same settings."""
    from flowergraph.simulation import run_flower_app

    result = tmp_path / "result.json"
    run = run_flower_app(
        REPO / "examples" / "message_api_app",
        num_supernodes=3,
        run_config={"results-file": str(result)},
        log_dir=tmp_path,
        timeout=300,
        ray_cpus=1,
    )
    assert run.status == "completed", run.log_file.read_text()[-3000:]
    got = json.loads(result.read_text())
    assert got["method"] == "fedgcn" and sorted(got["evaluate"]) == ["1", "2", "3"]
    app_dir = write_app(tmp_path / "app")
    run_inline(
        server_app.app,
        client_app.app,
        num_supernodes=3,
        app_dir=app_dir,
        overrides={"method": "fedgcn", "rounds": 3, "out-dir": str(tmp_path / "ours"), "flower-api": "message"},
    )
    want = {str(r["round"]): r["accuracy"] for r in read_run(tmp_path / "ours")["rounds"] if r["round"] >= 1}
    assert {r: m["accuracy"] for r, m in got["evaluate"].items()} == pytest.approx(want, abs=1e-9)
    assert want["3"] > 0.5


@pytest.mark.simulation
@pytest.mark.parametrize("name", ["FedProx", "FedMedian", "Krum"])
def test_flowers_other_stock_strategies_train_flowergraphs_handlers(name, app_dir, shared_data, tmp_path):
    """Flower's FedProx (its proximal-mu travels in the config; flowergraph's fedavg client ignores what it does
    not read), FedMedian and Krum drive flowergraph's fedavg handlers on Cora: the model they aggregate is the
    one the clients build, and it trains: test accuracy rises every round and ends above 0.2 (Cora has 7 classes;
    Krum keeps one client's model per round, FedMedian a coordinate-wise median: both slower than the mean)."""
    import flwr.serverapp.strategy as stock

    config = _cora(shared_data)
    kwargs = {"FedProx": {"proximal_mu": 0.01}, "Krum": {"num_malicious_nodes": 0}}.get(name, {})
    results = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = getattr(stock, name)(fraction_train=1.0, fraction_evaluate=1.0, min_available_nodes=3, **kwargs)
        results["r"] = strategy.start(
            grid=grid, initial_arrays=message_client.initial_arrays(context.run_config), num_rounds=3
        )

    run_inline(
        server,
        message_client.client_app(),
        num_supernodes=3,
        app_dir=app_dir,
        overrides={**config, "out-dir": str(tmp_path / "o")},
    )
    accuracy = {r: m["accuracy"] for r, m in results["r"].evaluate_metrics_clientapp.items()}
    assert sorted(accuracy) == [1, 2, 3] and accuracy[3] > 0.2, accuracy
    if name != "Krum":  # Krum keeps one client's model per round: its accuracy need not rise every round
        assert accuracy[1] < accuracy[2] < accuracy[3], accuracy


@pytest.mark.simulation
def test_flowers_message_api_mods_act_on_flowergraphs_train_replies(app_dir, tmp_path):
    """Flower's ``LocalDpMod`` (noise off: sensitivity 0) on flowergraph's train handler, driven by
    flowergraph's fedavg: each client's update reaches the server clipped, so the round's global update has norm
    at most the clipping norm, while the same round without the mod moves the model much further."""
    from flwr.clientapp.mod import LocalDpMod

    def one_round(train_mods):
        strategy = FlowergraphStrategy.from_run_config(
            {"method": "fedavg", "num-clients": 3, "rounds": 1, "fused-eval": False}
        )
        out = {}
        server = ServerApp()

        @server.main()
        def main(grid: Grid, context: Context) -> None:
            out["r"] = strategy.start(grid=grid, initial_arrays=ArrayRecord(), num_rounds=1)
            out["initial"] = [a.copy() for a in out.get("initial", [])]

        client = message_client.client_app(train_mods=train_mods)
        initial = message_client.initial_arrays({"method": "fedavg", "num-clients": 3})
        run_inline(server, client, num_supernodes=3, app_dir=app_dir, overrides={"out-dir": str(tmp_path / "o")})
        got = out["r"].arrays
        assert list(got.keys()) == list(initial.keys())
        return float(np.sqrt(sum(np.square(got[k].numpy() - initial[k].numpy()).sum() for k in got.keys())))

    clip = 0.05
    plain = one_round([])
    clipped = one_round([LocalDpMod(clipping_norm=clip, sensitivity=0.0, epsilon=1.0, delta=1e-5)])
    assert plain > 4 * clip
    assert 0 < clipped <= clip * (1 + 1e-5)


class CountingGrid:
    """A grid that counts its pushes (how many calls, how many messages each) and passes everything on."""

    def __init__(self, grid):
        self.grid, self.pushes = grid, []

    def push_messages(self, messages):
        messages = list(messages)
        self.pushes.append(sorted(m.metadata.message_type for m in messages))
        return self.grid.push_messages(messages)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        self.pushes.append(sorted(m.metadata.message_type for m in messages))
        return self.grid.send_and_receive(messages, timeout=timeout)

    def __getattr__(self, name):
        return getattr(self.grid, name)


@pytest.mark.simulation
def test_the_message_api_sends_a_phase_and_the_identity_to_every_node_in_one_push(tmp_path):
    """FedGCN's exchange (upload, then download) and the identity handshake: each is one push of one message per
    node (Flower's grid then carries them concurrently), not a message per thread; the records are unchanged
    (the golden records hold: test_both_faces_give_the_same_rounds_and_the_golden_records)."""
    from flowergraph.serverapp import FedGCN

    pushes = []
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        counting = CountingGrid(grid)
        pushes.append(counting.pushes)
        FedGCN(hops=2).start(grid=counting, num_rounds=1)

    run_inline(app, message_client.client_app(), num_supernodes=4, app_dir=write_app(tmp_path / "app"))
    (calls,) = pushes
    by_kind = {}
    for call in calls:
        by_kind.setdefault(tuple(sorted(set(call))), []).append(len(call))
    assert by_kind[("query.fg_identity",)] == [4]
    assert by_kind[("query.fg_phase",)] == [4, 4]  # fedgcn.upload, then fedgcn.download
    assert by_kind[("train",)] == [4] and by_kind[("evaluate",)] == [4]
