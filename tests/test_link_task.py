"""The link task through the launcher (issue 92): ``task=link`` runs, its summary's AUC and Hits@K against a
recomputation from the run's records and its final model, bad input refused before training, the client against
the Flower-free core, checkpoint/resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from flowergraph.app.inprocess import run_inprocess
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config
from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.storage.results import read_run
from flowergraph.strategies.common import weighted_metric

REPO = Path(__file__).resolve().parents[1]
SMALL = {"link.hidden": 16, "link.out": 16}  # a small encoder: fast in-process runs


def _launch(*args: str, data: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "flowergraph.simulation", "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO,
    )


def _specs(config: dict):
    from flowergraph.methods.link import graph_spec, link_spec, model_kwargs, partition_spec

    s = parse_run_config(config)
    return s, graph_spec(s), partition_spec(s), link_spec(s), model_kwargs(s)


def test_the_acceptance_command_and_its_numbers(shared_data, tmp_path):
    """fedavg on Cora with task=link, 3 clients, 2 rounds (inline engine) exits 0; summary.json's AUC and Hits@50
    are the weighted means of the last round's client rows, and those rows (and the server's cross-client numbers)
    are what the core computes from the final model."""
    from flowergraph.tasks.link import LinkPredictor, client_link_data, cross_test_set, embed, evaluate_cross
    from flowergraph.tasks.link import evaluate_link
    from flowergraph.tasks.models import set_weights

    out = tmp_path / "run"
    proc = _launch(
        *("--method", "fedavg", "--dataset", "Cora", "--num-clients", "3", "--rounds", "2", "--out", str(out)),
        *("--set", "task=link", "--set", "simulation-engine=inline", "--set", "server-eval=true"),
        *("--set", "checkpoint-every=2"),
        data=shared_data,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "final test AUC" in proc.stdout + proc.stderr
    run = read_run(out)
    summary, last = run["summary"], run["rounds"][-1]
    assert summary["status"] == "completed" and summary["rounds_completed"] == 2
    rows = list(last["clients"].values())
    for name, count in (("auc", "num_test"), ("hits@50", "num_test"), ("val_auc", "num_val")):
        expected = weighted_metric((r[name], r[count]) for r in rows)
        assert summary[f"final_{name}"] == pytest.approx(expected, abs=1e-12)
    assert 0.5 < summary["final_auc"] <= 1 and 0 <= summary["final_hits@50"] <= 1
    # the final model, evaluated by the core on each client's own test pairs and on the cross-client set
    s, g, p, lspec, kwargs = _specs(
        {"method": "fedavg", "dataset": "Cora", "data-dir": str(shared_data), "task": "link"}
    )
    model = LinkPredictor(1433, **kwargs)
    set_weights(model, load_checkpoint(out).arrays)
    clients = [client_link_data(g, p, lspec, k) for k in range(3)]
    for c in clients:
        r = evaluate_link(model, c)
        row = last["clients"][str(c.client_id)]
        assert row["auc"] == pytest.approx(r["test_auc"], abs=1e-6)
        assert row["hits@50"] == pytest.approx(r["test_hits@50"], abs=1e-6)
        assert row["num_test"] == r["num_test_pos"] + r["num_test_neg"]
    cross = evaluate_cross(cross_test_set(g, p, lspec), {c.client_id: embed(model, c) for c in clients})
    assert summary["final_server_cross_auc"] == pytest.approx(cross["cross_auc"], abs=1e-6)
    assert summary["final_server_cross_hits@50"] == pytest.approx(cross["cross_hits@50"], abs=1e-6)


def test_a_graph_dataset_with_task_link_exits_2_naming_the_dataset_and_its_tasks(shared_data, tmp_path):
    proc = _launch("--dataset", "MUTAG", "--set", "task=link", "--out", str(tmp_path / "r"), data=shared_data)
    assert proc.returncode == 2
    assert (
        "task='link' (link prediction) cannot use dataset 'MUTAG', which supports task 'graph'; valid datasets "
        "for task 'link': Cora, CiteSeer, PubMed, synthetic" in proc.stdout + proc.stderr
    )
    assert not (tmp_path / "r").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"dataset": "Cora", "task": "link", "node.hidden": 32},
            "node.hidden=32 applies to node classification (task 'node'), but task='link' makes this run link "
            "prediction, which ignores it; use 'link.hidden', remove the key, or set task='node'; valid keys of "
            "task 'link': link.val-fraction, ",
        ),
        (
            {"dataset": "Cora", "task": "link", "node.model": "gat"},
            "node.model='gat' applies to node classification (task 'node'), but task='link' makes this run link "
            "prediction, which ignores it; remove the key, or set task='node'",
        ),
        ({"dataset": "Cora", "link.hidden": 32}, "link.hidden=32 applies to link prediction (task 'link'), but"),
        ({"dataset": "Cora", "task": "link", "link.hits-k": 0}, "link.hits-k=0: must be >= 1"),
        ({"dataset": "Cora", "task": "link", "link.val-fraction": 1.0}, "link.val-fraction=1.0: must be in [0.0, 1.0)"),
        (
            {"dataset": "Cora", "task": "link", "link.val-fraction": 0.5, "link.test-fraction": 0.5},
            "link val-fraction + test-fraction must be < 1 (the rest are the training edges), got 0.5 + 0.5 = 1.0",
        ),
        ({"dataset": "Cora", "task": "link", "link.neg-ratio": 0}, "link.neg-ratio=0.0: must be in (0, 100]"),
        ({"dataset": "Cora", "task": "edge"}, "unknown task 'edge'; valid choices: auto, node, graph, link"),
        ({"dataset": "Cora", "task": "graph"}, "task='graph' (graph classification) cannot use dataset 'Cora', "),
        (
            {"dataset": "Cora", "task": "link", "method": "flagcns"},
            "method 'flagcns' does node classification, not link prediction (task='link'); valid methods for task "
            "'link': fedavg, fedprox, fedper, gcfl, centralized, local, fedgcn",
        ),
        (
            {"dataset": "Cora", "task": "link", "method": "fedgcn"},
            "fedgcn.hops=2 on task=link aggregates over the cross-client edges the silos know, and "
            "link.cross-known-fraction=0 leaves none (every cross-client edge is a test edge): it would be fedavg. "
            "Set link.cross-known-fraction in (0, 1), or fedgcn.hops=0",
        ),
        (
            {
                "dataset": "Cora",
                "task": "link",
                "method": "fedgcn",
                "link.cross-known-fraction": 0.5,
                "link.encoder": "sage",
            },
            "method 'fedgcn' on task=link trains a 2-layer GCN encoder; got link.encoder='sage' link.layers=2 "
            "(valid: link.encoder='gcn', link.layers=2)",
        ),
        (
            {"dataset": "Cora", "task": "link", "link.cross-known-fraction": 1.0},
            "link.cross-known-fraction=1.0: must be in [0.0, 1.0)",
        ),
        ({"dataset": "Cora", "task": "link", "method": "fedper", "server-eval": True}, "fedper's server holds no"),
        ({"dataset": "Cora", "task": "link", "method": "local", "secure-agg": "ckks"}, "secure-agg='ckks' gives"),
    ],
)
def test_bad_input_is_refused_naming_the_value_and_the_valid_choices(config, message):
    with pytest.raises(ConfigError) as caught:
        s = parse_run_config(config)
        if s.server_eval:  # the server-side evaluation is refused when the strategy is built
            from flowergraph.app.run_strategy import build_strategy

            build_strategy(s)
    assert message in str(caught.value)


def test_task_auto_keeps_the_dataset_s_task():
    assert parse_run_config({"dataset": "Cora"}).task == "node"
    assert parse_run_config({"dataset": "MUTAG"}).task == "graph"
    assert parse_run_config({"dataset": "Cora", "task": "link"}).task == "link"
    assert parse_run_config({"dataset": "Cora", "task": "node"}).task == "node"


def _client(shared_data, baseline="fedavg", mu=0.0, **extra):
    from flowergraph.clients.state import ClientState
    from flowergraph.methods.registry import ClientArgs, Sharing

    config = {"method": baseline, "dataset": "Cora", "data-dir": str(shared_data), "task": "link", **SMALL, **extra}
    s = parse_run_config(config)
    from flwr.app import RecordDict

    state = ClientState(RecordDict())
    args = ClientArgs(settings=s, partition_id=1, num_partitions=3, context=None, state=state)
    return s, s.task_info.baseline_client(args, Sharing(baseline, mu)), state


def test_the_client_fits_and_evaluates_as_the_core_does(shared_data):
    from flowergraph.clients.node import round_seed
    from flowergraph.tasks.link import LinkPredictor, client_link_data, evaluate_link, train_link
    from flowergraph.tasks.models import get_weights

    s, client, _ = _client(shared_data)
    _, g, p, lspec, kwargs = _specs({"dataset": "Cora", "data-dir": str(shared_data), "task": "link", **SMALL})
    data = client_link_data(g, p, lspec, 1)
    initial = client.get_parameters({})
    arrays, n, metrics = client.fit(initial, {"server_round": 2})
    model = LinkPredictor(data.num_features, **kwargs, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(get_weights(model), initial, strict=True))
    torch.manual_seed(round_seed(0, 2, 1))
    loss = train_link(model, data, seed=0, start_epoch=1)
    for a, b in zip(arrays, get_weights(model), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert n == data.train_pos.size(1) and metrics["train_loss"] == pytest.approx(loss, abs=1e-6)
    loss, count, metrics = client.evaluate(arrays, {})
    r = evaluate_link(model, data)
    assert metrics["auc"] == pytest.approx(r["test_auc"], abs=1e-6)
    assert metrics["hits@50"] == pytest.approx(r["test_hits@50"], abs=1e-6)
    assert metrics["val_auc"] == pytest.approx(r["val_auc"], abs=1e-6)
    assert count == r["num_test_pos"] + r["num_test_neg"] and loss == pytest.approx(r["test_loss"], abs=1e-6)


def test_fedper_keeps_the_last_layer_and_fedprox_pulls_towards_the_received_model(shared_data):
    _, fedavg, _ = _client(shared_data)
    _, fedper, state = _client(shared_data, "fedper")
    assert fedper.model_keys() == [k for k in fedavg.model_keys() if not k.startswith("encoder.convs.1.")]
    arrays, _, _ = fedper.fit(fedper.get_parameters({}), {"server_round": 1})
    assert len(arrays) == len(fedper.model_keys()) and set(state.get_arrays("link-personal")) == {
        k for k in fedavg.model_keys() if k.startswith("encoder.convs.1.")
    }
    _, fedprox, _ = _client(shared_data, "fedprox", mu=10.0, **{"link.local-steps": 3})
    _, plain, _ = _client(shared_data, "fedavg", **{"link.local-steps": 3})
    start = plain.get_parameters({})
    moved = [np.linalg.norm(c.fit(start, {"server_round": 1})[0][0] - start[0]) for c in (plain, fedprox)]
    assert moved[1] < moved[0]  # the proximal term keeps FedProx closer to the model it received


def test_local_never_takes_the_server_s_model(shared_data):
    _, local, _ = _client(shared_data, "local")
    trained, _, _ = local.fit(local.get_parameters({}), {"server_round": 1})
    other = [np.zeros_like(a) for a in trained]  # what the server might send: ignored from round 2 on
    again, _, _ = local.fit(other, {"server_round": 2})
    assert not np.allclose(again[0], 0) and not np.allclose(again[0], trained[0])


def test_checkpoint_resume_equals_the_uninterrupted_run(shared_data, tmp_path):
    base = {
        "method": "fedper",
        "dataset": "Cora",
        "data-dir": str(shared_data),
        "task": "link",
        "num-clients": 2,
        "rounds": 3,
        "checkpoint-every": 1,
        "fused-eval": False,
        **SMALL,
    }
    run_inprocess({**base, "out-dir": str(tmp_path / "full")})
    run_inprocess({**base, "rounds": 2, "out-dir": str(tmp_path / "cut")})
    run_inprocess({**base, "resume-from": str(tmp_path / "cut"), "out-dir": str(tmp_path / "cut")})
    full, resumed = (read_run(tmp_path / name) for name in ("full", "cut"))
    assert [r["auc"] for r in resumed["rounds"]] == [r["auc"] for r in full["rounds"]]
    assert resumed["summary"]["final_hits@50"] == full["summary"]["final_hits@50"]
    for a, b in zip(load_checkpoint(tmp_path / "full").arrays, load_checkpoint(tmp_path / "cut").arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    assert json.loads((tmp_path / "full" / "summary.json").read_text())["final_auc"] > 0.5


def test_a_data_owner_with_its_partition_file_splits_its_edges_as_the_cut_does(shared_data, tmp_path):
    """A deployed data owner reads only its own partition file: its link data (every own split, both directions of
    its message-passing graph, its features) equals what a client cut out of the global graph gets, so a deployment
    trains and scores exactly as a simulation; it has no view of the cross-client set (that needs the global
    graph)."""
    from flowergraph.data import GraphSpec, PartitionSpec, export_partitions
    from flowergraph.tasks.link import LinkSpec, client_link_data, graph_link_data
    from flowergraph.tasks.partition_files import load_partition_file

    gspec, pspec, lspec = GraphSpec(dataset="Cora", data_dir=str(shared_data)), PartitionSpec(num_clients=3), LinkSpec()
    export_partitions(gspec, pspec, tmp_path, log=None)
    for k in range(3):
        owner = graph_link_data(load_partition_file(tmp_path / f"client-{k}.npz", client_id=k), lspec)
        cut = client_link_data(gspec, pspec, lspec, k)
        for name in ("global_ids", "x", "edge_index", "train_pos", "val_pos", "val_neg", "test_pos", "test_neg"):
            assert torch.equal(getattr(owner, name), getattr(cut, name)), (k, name)
        assert owner.cross_pos.shape == (2, 0) and cut.cross_pos.size(1) > 0


@pytest.mark.simulation
def test_secaggplus_averages_the_link_predictor_as_plain_fedavg_does(shared_data, tmp_path):
    """task=link under secure-agg=secagg+ through Flower's transport (inline engine): the strategy is handed one
    secure aggregate a round, and round 1's model (both runs start from the same initial model) equals plain
    averaging within SecAgg+'s quantisation (2^22 levels over [-8, 8]: 4e-6 per value)."""
    import io

    from flowergraph.simulation import run_simulation

    run = {
        "dataset": "Cora",
        "data-dir": str(shared_data),
        "task": "link",
        "seed": 3,
        "fused-eval": False,
        "checkpoint-every": 1,
        **SMALL,
    }
    result = run_simulation(
        "fedavg",
        3,
        2,
        None,
        tmp_path / "secagg",
        {**run, "secure-agg": "secagg+", "simulation-engine": "inline"},
        stream=io.StringIO(),
        timeout=600,
    )
    assert result.status == "completed", result.log_file.read_text()[-3000:]
    rounds = [r for r in read_run(tmp_path / "secagg")["rounds"] if r.get("round", 0) >= 1 and not r.get("phase")]
    assert [r["secure_agg"] for r in rounds] == [{"mode": "secagg+", "distinct_payloads": 1}] * 2
    run_inprocess({"method": "fedavg", "num-clients": 3, "rounds": 2, **run, "out-dir": str(tmp_path / "plain")})
    first = [load_checkpoint(tmp_path / p / "checkpoints" / "round-000001.npz").arrays for p in ("secagg", "plain")]
    for a, b in zip(*first, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-5)
    assert max(float(np.abs(a - b).max()) for a, b in zip(*first)) > 0  # quantised: not the plain bytes
    plain = read_run(tmp_path / "plain")["summary"]["final_auc"]
    assert read_run(tmp_path / "secagg")["summary"]["final_auc"] == pytest.approx(plain, abs=0.01)
