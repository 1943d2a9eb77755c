"""Faults and resume through Flower's simulation: on Ray where a fault kills or stalls a client process, on the
inline engine otherwise (each Ray run ~20-40 s: Ray start-up dominates).

The expected numbers are computed independently, without Flower: FedAvg replayed by hand with the clients that
the faults leave in each round, and the uninterrupted run of a resumed one in one process (flowergraph/inprocess.py,
whose equality with an uninterrupted run is tested in test_checkpoint.py)."""

import numpy as np
import psutil
import pytest

from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.clients.node import NodeClassificationClient
from flowergraph.storage.results import read_run
from flowergraph.simulation import resume_config, run_simulation
from flowergraph.strategies.common import weighted_average, weighted_metric
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.training import TrainConfig

from flowergraph.app.inprocess import run_inprocess


MODEL = {"kind": "gcn", "hidden": 16, "layers": 2, "dropout": 0.5, "heads": 8, "input_dropout": 0.0}


def _assert_all_stopped(pids):
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"processes left running: {alive}"


def _fit_clients(record):
    """Partition ids whose update was averaged in a round (the record lists their aggregation weight)."""
    return sorted(int(k) for k, v in record["clients"].items() if "fit_weight" in v)


def _eval_clients(record):
    return sorted(int(k) for k, v in record["clients"].items() if "accuracy" in v)


@pytest.mark.simulation
@pytest.mark.ray  # exit and hang faults: real processes
def test_faults_then_resume_fedavg(tmp_path):
    """One run, one fault per round: a wrongly shaped update (round 1), a client that raises (2), a NaN update
    (3), a client that hangs past round-timeout (4), and a client process that dies mid-round (5) of 6. The
    death stops the run after round 5 (exit status 1, the client and the checkpoint to resume from named): Flower
    1.41's Ray simulation would hand round 6's messages to the dead actor, healthy clients' included. Then the run
    is resumed from its round-3 checkpoint (into another folder, without the later faults) and must equal the
    uninterrupted run with the first three faults."""
    plan = "shape:2@1,raise:1@2,nan:0@3,hang:2@4,exit:1@5"
    timeout = 6.0  # a healthy round takes < 1 s
    result = run_simulation(
        "fedavg",
        num_clients=3,
        rounds=6,
        out=tmp_path / "run",
        timeout=400,
        # the stop after a Ray actor died is the legacy loop's (flower-api=auto runs the Message API, which goes
        # on with the clients that answer: docs/reliability.md)
        overrides={
            "inject-faults": plan,
            "min-clients": 2,
            "round-timeout": timeout,
            "checkpoint-every": 3,
            "flower-api": "legacy",
        },
    )
    log = result.log_file.read_text()
    assert result.status == "failed", log[-4000:]
    _assert_all_stopped(result.pids)
    run = read_run(result.out_dir)
    rounds = run["rounds"]
    # Round 5 is recorded with what it lost; round 6 never starts.
    assert [r["round"] for r in rounds] == [1, 2, 3, 4, 5] and run["summary"]["rounds_completed"] == 5
    error = run["summary"]["error"]
    ckpt3 = result.out_dir / "checkpoints" / "round-000003.npz"
    assert error.startswith("ClientProcessDied: round 5: client"), error
    assert "the run stops after round 5" in error and f"Resume from the last checkpoint ({ckpt3})" in error
    assert f"--resume {result.out_dir}" in error
    assert "flowergraph: run failed: round 5: client" in log
    assert sorted(p.name for p in (result.out_dir / "checkpoints").iterdir()) == ["round-000003.npz"]

    # The bad update is rejected / the failure logged, each named by the client's partition id.
    assert [_fit_clients(r) for r in rounds[:4]] == [[0, 1], [0, 2], [1, 2], [0, 1]]
    assert rounds[0]["rejected"] == [{"client": "2", "reason": "array 0 has shape (15,), expected (16,)"}]
    assert rounds[1]["failures"] == [{"client": "1", "reason": "injected fault 'raise' at partition 1 in round 2"}]
    assert rounds[2]["rejected"] == [{"client": "0", "reason": "array 0 holds NaN or infinite values"}]
    assert rounds[3]["failures"] == [
        {
            "client": "2",
            "reason": "no reply in time (the message expired after round-timeout, or its node left the federation)",
        }
    ]
    assert "rejected the update of client 2: array 0 has shape (15,), expected (16,)" in log
    assert "failed to train: injected fault 'raise' at partition 1 in round 2" in log
    assert "rejected the update of client 0: array 0 holds NaN or infinite values" in log
    # No round waits forever: the hung client costs round-timeout, not more.
    assert timeout <= rounds[3]["time_s"] < timeout + 8
    # Round 5: partition 1's process died; other messages sent to its dead actor fail the same way
    # (docs/reliability.md), and the error names every client the round lost.
    died = "the client's process died (Ray: ActorDiedError)"
    assert {"client": "1", "reason": died} in rounds[4]["failures"]
    assert all(f["reason"] == died for f in rounds[4]["failures"])
    assert set(_fit_clients(rounds[4])) <= {0, 2}
    lost = [f["client"] for f in rounds[4]["failures"]]
    assert error.startswith(f"ClientProcessDied: round 5: client{'s' if len(lost) > 1 else ''} {', '.join(lost)} ")
    assert "| lost 1 (process died)" in log  # the round's progress line

    # The final model is what FedAvg over exactly the surviving updates gives (computed here, without Flower).
    gspec, pspec = GraphSpec(dataset="synthetic"), PartitionSpec(num_clients=3)
    clients = [NodeClassificationClient(client_graph(gspec, pspec, k), TrainConfig(), MODEL) for k in range(3)]
    params = clients[0].get_parameters({})
    history = []
    for r, record in enumerate(rounds, start=1):
        fits = [clients[k].fit(params, {"server_round": r}) for k in _fit_clients(record)]
        if len(fits) >= 2:  # min-clients
            params = weighted_average([f[0] for f in fits], [float(f[1]) for f in fits])
        assert record["aggregated"] == (len(fits) >= 2)
        history.append(params)
    final = load_checkpoint(result.out_dir).arrays  # its last checkpoint: round 3
    for got, want in zip(final, history[2], strict=True):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    # Accuracy of each round's model over the clients that evaluated it (with fused evaluation, those whose next
    # fit message came back), weighted by test nodes.
    assert [_eval_clients(r) for r in rounds[:3]] == [[0, 2], [0, 1, 2], [0, 1]]  # 1 raised, 2 hung in the next
    for r, record in enumerate(rounds):
        evals = [clients[k].evaluate(history[r], {}) for k in _eval_clients(record)]
        expected = weighted_metric((m["accuracy"], m["num_test"]) for _, _, m in evals)
        if expected is None:  # round 5: nobody could evaluate (every message went to the dead actor)
            assert record.get("accuracy") is None
        else:
            assert record["accuracy"] == pytest.approx(expected, abs=1e-6), r + 1

    # Resume from the round-3 checkpoint (its round-3 record still waits for the evaluation fused into round 4's
    # fit) without the faults of rounds 4 and 5; the uninterrupted reference runs in one process. The resume runs
    # on the inline engine: what it reads (the checkpoint) is the engine's business no more than the faults' rounds
    # are, and the guard test (test_simulation.py) holds Ray and inline runs equal round by round.
    resumed = run_simulation(
        "fedavg",
        num_clients=3,
        rounds=5,
        out=tmp_path / "resumed",
        timeout=300,
        overrides={
            **resume_config(tmp_path / "run" / "checkpoints" / "round-000003.npz"),
            "out-dir": str(tmp_path / "resumed"),
            "inject-faults": "",
            "simulation-engine": "inline",
        },
    )
    assert resumed.ok, resumed.log_file.read_text()[-3000:]
    _assert_all_stopped(resumed.pids)
    run_inprocess(
        {
            "method": "fedavg",
            "num-clients": 3,
            "rounds": 5,
            "min-clients": 2,
            "checkpoint-every": 5,
            "inject-faults": "shape:2@1,raise:1@2,nan:0@3",
            "out-dir": str(tmp_path / "reference"),
        }
    )
    _assert_equal_runs(tmp_path / "resumed", tmp_path / "reference")
    assert [r["round"] for r in read_run(tmp_path / "resumed")["rounds"]] == [1, 2, 3, 4, 5]


def _assert_equal_runs(got_dir, want_dir):
    got, want = read_run(got_dir), read_run(want_dir)
    assert [r["round"] for r in got["rounds"]] == [r["round"] for r in want["rounds"]]  # none duplicated or lost
    assert got["summary"]["status"] == "completed"
    for g, w in zip(got["rounds"], want["rounds"], strict=True):
        assert sorted(g.get("clients", {})) == sorted(w.get("clients", {})), g["round"]  # the same sample
        for key in ("accuracy", "val_accuracy", "train_loss"):
            if w.get(key) is not None:
                assert g[key] == pytest.approx(w[key], abs=1e-6), (g["round"], key)
    for g, w in zip(load_checkpoint(got_dir).arrays, load_checkpoint(want_dir).arrays, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)


@pytest.mark.simulation
def test_stateful_fedgcn_interrupted_and_resumed_equals_uninterrupted(tmp_path):
    """FedGCN keeps the exchanged aggregations in each node's context.state, which a new run does not have: the
    resumed run re-runs the communication phase. fraction-fit < 1: the partitions sampled in each round must not
    depend on Flower's random node ids."""
    base = {
        "method": "fedgcn",
        "num-clients": 3,
        "rounds": 4,
        "seed": 11,
        "checkpoint-every": 2,
        "node.partitioner": "louvain",
        "fraction-fit": 0.67,
        "fraction-evaluate": 0.67,
    }
    run_inprocess({**base, "out-dir": str(tmp_path / "reference")})  # uninterrupted
    # no fault here kills a process: Flower's engine inline (messages and context.state serialised) shows it
    first = run_simulation(
        "fedgcn",
        num_clients=3,
        rounds=2,
        out=tmp_path / "run",
        timeout=300,
        overrides={
            **{k: v for k, v in base.items() if k not in ("method", "num-clients", "rounds")},
            "simulation-engine": "inline",
        },
    )
    assert first.ok, first.log_file.read_text()[-3000:]
    second = run_simulation(
        "fedgcn", num_clients=3, rounds=4, timeout=300, overrides={**resume_config(tmp_path / "run"), "rounds": 4}
    )
    assert second.ok, second.log_file.read_text()[-3000:]
    _assert_all_stopped(first.pids + second.pids)
    assert second.out_dir == tmp_path / "run"  # the same results folder, continued
    assert "resuming from" in second.log_file.read_text()
    run = read_run(tmp_path / "run")
    assert [r["round"] for r in run["rounds"]] == [0, 1, 2, 3, 4] and run["summary"]["rounds_completed"] == 4
    assert len({tuple(sorted(r["clients"])) for r in run["rounds"][1:]}) > 1  # rounds sampled different clients
    _assert_equal_runs(tmp_path / "run", tmp_path / "reference")
