"""FedGraph's per-iteration exchange (``fedgraph.exchange=iteration``, the paper's cadence), the parallel clock
(``fedgraph.round-time=parallel``) and the dealt-METIS data, on Flower (issue 72). Every owner's rows are checked
against ``owner_rows`` of its current weights, which the test rebuilds by replaying the owner's own local
iterations from the recorded messages; the traffic against the samples the test draws itself; the clock against its
recorded parts and the recorded messages."""

import re

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.errors import ConfigError
from flowergraph.methods.fedgraph import client_graph_of
from flowergraph.settings import parse_run_config
from flowergraph.storage import load_checkpoint, read_run
from flowergraph.app.loop import parameters_bytes
from flowergraph.strategies.common import config_bytes
from flowergraph.methods.fedgraph.maths import NETWORKS, SECONDS_PER_ROWS, build_model, owner_rows, reward
from flowergraph.methods.fedgraph.maths.clock import delta_of
from flowergraph.tasks.torch_state import load_module_arrays
from flowergraph.methods.fedgraph import wire as msg
from fedgraph_replay import STEPS, asked, by_partition, replay, round_of
from records import assert_same_rounds

K = 3
BASE = {
    "method": "fedgraph",
    "dataset": "Cora",
    "num-clients": K,
    "rounds": 2,
    "seed": 5,
    "fedgraph.alpha": 0.0,
    "fedgraph.episode-rounds": 2,
    "fedgraph.exchange": "iteration",
    "fedgraph.agent": "fixed",
    "fedgraph.batch-size": 48,
    "fedgraph.prob": 0.5,
}
COSTS = ("time_s", "elapsed_s", "ended_at", "round_time", "_s", "fedgraph_local_s", "fedgraph_sample_s")


def _config(shared_data, tmp, name, **extra):
    return {**BASE, "data-dir": str(shared_data), "out-dir": str(tmp / name), "state-dir": str(tmp / "state"), **extra}


@pytest.fixture(scope="module")
def iteration_run(tmp_path_factory, shared_data):
    tmp = tmp_path_factory.mktemp("fedgraph-iteration")
    config = _config(shared_data, tmp, "run")
    _, proxies = run_inprocess(config, record=True)
    return config, tmp / "run", proxies


def test_owners_send_the_rows_of_the_requested_nodes_with_their_current_weights(iteration_run):
    """Every iteration-rows reply of every owner equals owner_rows of the owner's weights after its own previous
    local iterations (rebuilt here by replaying them), for exactly the ids it was asked for; every request is
    exactly the remote neighbours of the requester's sample (drawn here); the fit returns the replayed weights."""
    config, _, proxies = iteration_run
    checked = 0
    for server_round in (1, 2):
        replays = {k: replay(config, proxies, k, server_round) for k in range(K)}
        for k, rep in replays.items():
            # the requests: begin's reply (iteration 1), then each step's reply (the next iteration)
            requests = [
                msg.IdsByClient.decode(wire.unpack_arrays(r.properties), wire.scalars(r.properties))
                for _, r in rep["phase"][msg.BEGIN] + rep["phase"].get(msg.STEP, [])
            ]
            assert [q.iteration for q in requests] == list(range(1, STEPS + 1))
            for q, sample in zip(requests, rep["samples"], strict=True):
                want = asked(sample, rep["view"])
                assert sorted(q.parts) == sorted(want) and all(np.array_equal(q.parts[j], want[j]) for j in want)
            # the rows it received are exactly what it asked for
            for q, t in zip(requests, range(1, STEPS + 1)):
                ids = np.sort(np.concatenate([*q.parts.values(), np.zeros(0, np.int64)]))
                np.testing.assert_array_equal(rep["received"][t][0], ids)
            # as owner: iteration t's rows are computed with the weights before its own iteration t
            model = build_model(rep["view"].graph.num_features, rep["view"].graph.num_classes)
            for request, res in rep["phase"].get(msg.ITERATION_ROWS, []):
                wanted = msg.IdsByClient.decode(request.arrays, request.values)
                up = msg.RowsUpload.decode(wire.unpack_arrays(res.properties), wire.scalars(res.properties))
                load_module_arrays(model, rep["weights"][wanted.iteration - 1])
                for j, ids in wanted.parts.items():
                    expect = owner_rows(model, rep["view"], "fedgraph", 1, {}, ids=ids)
                    np.testing.assert_array_equal(up.parts[j][0], ids)
                    np.testing.assert_allclose(up.parts[j][1], expect.values, rtol=1e-6, atol=1e-7)
                    checked += len(ids)
                assert up.macs > 0
            sent = parameters_to_ndarrays(rep["fit"][1].parameters)
            for a, b in zip(sent, rep["weights"][-1].values(), strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert checked > 0


def test_traffic_follows_the_samples_and_the_policy(iteration_run, shared_data, tmp_path):
    """The rows the server relays per iteration are the remote neighbours of the samples (counted here from the
    replayed samples); a smaller policy moves fewer rows and fewer bytes, while the round cadence moves the same
    rows whatever the policy (every boundary row, once per round)."""
    config, out, proxies = iteration_run
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    for rec in rounds:
        counts = [0] * STEPS
        for k in range(K):
            for t, sample in enumerate(replay(config, proxies, k, rec["round"])["samples"]):
                counts[t] += int(sample.remote[1].numel())
        assert rec["phases"][msg.ITERATION_PHASE]["rows_per_iteration"] == counts
        assert rec["fedgraph"]["clock"]["messages"] == 2 * STEPS + 1
    traffic = {}
    for cadence in ("round", "iteration"):
        for kappa, p in ((16, 0.2), (512, 1.0)):
            name = f"{cadence}-{kappa}"
            cfg = _config(
                shared_data,
                tmp_path,
                name,
                **{"fedgraph.exchange": cadence, "fedgraph.batch-size": kappa, "fedgraph.prob": p, "rounds": 1},
            )
            run_inprocess(cfg)
            rec = [r for r in read_run(tmp_path / name)["rounds"] if r["round"] == 1][0]
            key = msg.ITERATION_PHASE if cadence == "iteration" else msg.EXCHANGE_PHASE
            phase = rec["phases"][key]
            traffic[(cadence, kappa)] = (
                sum(phase.get("rows_per_iteration", [])),
                phase["bytes_down"] + phase["bytes_up"],
            )
    assert traffic[("iteration", 16)][0] < traffic[("iteration", 512)][0] / 3
    assert traffic[("iteration", 16)][1] < traffic[("iteration", 512)][1]
    assert traffic[("round", 16)][1] == traffic[("round", 512)][1]


def _clock_parts_from_messages(proxies, server_round, exchange):
    """Per client: bytes of the round's training messages (phases of the training exchange and fit; evaluation
    left out) and the multiply-adds it reported (fit metrics and rows replies), from the recorded messages."""
    kinds = {msg.BEGIN, msg.ITERATION_ROWS, msg.STEP} if exchange == "iteration" else {msg.ROWS, msg.STORE_ROWS}
    out = {}
    for k, proxy in by_partition(proxies).items():
        size = work = steps = rows = 0
        done = False
        for kind, ins, res in proxy.messages:
            if round_of(kind, ins) != server_round or done:
                continue
            if kind == "get_properties" and ins.config.get(wire.PHASE) in kinds:
                props = dict(res.properties)
                size += config_bytes(ins.config) + config_bytes(props)
                if ins.config[wire.PHASE] in (msg.ROWS, msg.ITERATION_ROWS):
                    up = msg.RowsUpload.decode(wire.unpack_arrays(props), wire.scalars(props))
                    work, rows = work + up.macs, rows + 1
            elif kind == "fit":
                metrics = {m: v for m, v in res.metrics.items() if not m.startswith(wire.EVAL_PREFIX)}
                size += parameters_bytes(ins.parameters) + config_bytes(ins.config)
                size += parameters_bytes(res.parameters) + config_bytes(metrics)
                work, steps = work + int(res.metrics[msg.TRAIN_MACS]), steps + STEPS
                done = True  # the separate evaluation's exchange comes after the fit
        out[k] = (size, work, steps, rows)
    return out


@pytest.mark.parametrize("exchange", ["round", "iteration"])
def test_the_parallel_clock_is_its_recorded_parts(shared_data, tmp_path, exchange):
    """round-time=parallel on the WAN profile: each round's delta is max_i(c work_i + c0 steps_i + c1 rows_i) + 8
    max_i(bytes_i) / 50 Mbit/s + messages x 30 ms + the server's seconds, recomputed from the record's parts; the
    parts are the recorded messages' bytes and reported multiply-adds; alpha is profiled on round 1's delta; the
    reward is eq. 9 of it."""
    config = _config(
        shared_data,
        tmp_path,
        exchange,
        **{
            "fedgraph.exchange": exchange,
            "fedgraph.agent": "ddpg",
            "fedgraph.alpha": -1.0,
            "fedgraph.round-time": "parallel",
            "fedgraph.network": "wan",
            "fedgraph.seconds-per-mac": 2e-10,
            "fedgraph.seconds-per-step": 5e-4,  # and the calibrated c1 per rows computation
        },
    )
    _, proxies = run_inprocess(config, record=True)
    rounds = [r for r in read_run(tmp_path / exchange)["rounds"] if r["round"] >= 1]
    wan = NETWORKS["wan"]
    for rec in rounds:
        info, clock = rec["fedgraph"], rec["fedgraph"]["clock"]
        assert clock["messages"] == (2 * STEPS + 1 if exchange == "iteration" else 3)
        parts = _clock_parts_from_messages(proxies, rec["round"], exchange)
        assert clock["bytes"] == [parts[k][0] for k in range(K)]
        assert clock["work"] == [parts[k][1] for k in range(K)]
        assert clock["steps"] == [parts[k][2] for k in range(K)]
        assert clock["rows"] == [parts[k][3] for k in range(K)]
        c1 = SECONDS_PER_ROWS
        compute = max(2e-10 * w + 5e-4 * n + c1 * m for w, n, m in zip(clock["work"], clock["steps"], clock["rows"]))
        delta = compute + 8 * max(clock["bytes"]) / wan.bandwidth_bps + clock["messages"] * wan.rtt_s
        delta += clock["server_s"]
        assert 0 < clock["server_s"] < 1
        assert info["parallel_s"] == pytest.approx(delta, rel=1e-12)
        assert clock["wan_s"] == pytest.approx(delta_of(clock, "wan"), rel=1e-12)
        assert clock["lan_s"] == pytest.approx(delta_of(clock, "lan"), rel=1e-12) and clock["lan_s"] < delta
        alpha = 1.0 / rounds[0]["fedgraph"]["parallel_s"]
        assert info["alpha"] == pytest.approx(alpha, rel=1e-12)
        assert info["reward"] == pytest.approx(reward(info["server_accuracy"], delta, 0.8, 128.0, alpha), abs=1e-12)


def test_resume_equals_uninterrupted_with_the_iteration_cadence(shared_data, tmp_path):
    """The DDPG agent with the per-iteration exchange, a checkpoint every round: resumed after round 2 (an episode
    boundary) and after round 3, every later record and the final model equal the uninterrupted run's; no client
    keeps a round's iteration state once its fit is done (so checkpoints never carry it)."""
    config = _config(shared_data, tmp_path, "full", **{"fedgraph.agent": "ddpg", "rounds": 4, "checkpoint-every": 1})
    _, proxies = run_inprocess(config, record=True)
    for proxy in proxies:
        names = [n for n in proxy.context.state.array_records] + list(proxy.context.state.config_records)
        assert not [n for n in names if n.startswith("fedgraph-iter")], names
    out = tmp_path / "full"
    for at in (2, 3):
        ckpt = load_checkpoint(out / "checkpoints" / f"round-{at:06d}.npz")
        resumed = {**config, "out-dir": str(tmp_path / f"resumed-{at}"), "resume-from": str(ckpt.path)}
        run_inprocess(resumed)
        want = [r for r in read_run(out)["rounds"] if r["round"] > at]
        got = [r for r in read_run(tmp_path / f"resumed-{at}")["rounds"] if r["round"] > at]
        assert [r["round"] for r in got] == list(range(at + 1, 5))
        assert_same_rounds(want, got, COSTS)
        for a, b in zip(load_checkpoint(out).arrays, load_checkpoint(tmp_path / f"resumed-{at}").arrays, strict=True):
            np.testing.assert_array_equal(a, b)


BAD = [
    ({"fedgraph.exchange": "step"}, "unknown fedgraph.exchange 'step'; valid choices: round, iteration"),
    (
        {"fedgraph.staleness": "one-round"},
        "fedgraph.staleness='one-round' means rows computed after the owner's previous round; with "
        "fedgraph.exchange='iteration' rows are computed in every local iteration with the owner's current weights, "
        "so there is nothing one round old; valid with it: fedgraph.staleness='same-round'",
    ),
    (
        {"fedgraph.sharing": "nonshare"},
        "exchanges nothing (the same run as fedgraph.exchange='round'); valid with it: fedgraph.sharing='fedgraph'",
    ),
    (
        {"fedgraph.sharing": "allshare"},
        "would need a second relay per iteration (not built); valid with it: fedgraph.sharing='fedgraph'",
    ),
    ({"node.layers": 3}, "fedgraph.exchange='iteration' with node.layers=3"),
    (
        {"fedgraph.network": "wan"},
        "fedgraph.network='wan' chooses the parallel clock that feeds eq. 9, but fedgraph.round-time='server'",
    ),
    ({"fedgraph.network": "dsl"}, "unknown fedgraph.network 'dsl'; valid choices: lan, wan"),
    (
        {"fedgraph.round-time": "wall"},
        "unknown fedgraph.round-time 'wall'; valid choices: server, slowest-client, work, parallel",
    ),
    ({"fedgraph.seconds-per-mac": -1e-9}, "fedgraph.seconds-per-mac=-1e-09: must be >= 0.0"),
    (
        {"fedgraph.seconds-per-step": -0.5},
        "fedgraph.seconds-per-step=-0.5: must be -1 (the calibrated constant) or >= 0",
    ),
    (
        {"fedgraph.parts-per-client": 4, "fedgraph.data": "random"},
        "fedgraph.parts-per-client=4 deals METIS parts to the clients, but fedgraph.data='random'; valid with it: "
        "fedgraph.data='metis'",
    ),
    ({"fedgraph.parts-per-client": 0}, "fedgraph.parts-per-client=0: must be >= 1"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[f"{next(iter(e))}={next(iter(e.values()))}" for e, _ in BAD])
def test_bad_settings_name_the_value_and_the_valid_choices(extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_run_config({**BASE, **extra})


@pytest.mark.parametrize("preset,parts", [("fedgraph-cora-metis5.toml", 16), ("fedgraph-citeseer-metis5.toml", 64)])
def test_metis_presets_deal_blocks_with_a_third_of_the_edges_across_clients(shared_data, preset, parts):
    """The METIS presets: 5 clients, METIS blocks dealt at random (parts-per-client), every block inside one
    client, sizes balanced, and >= 30% of the edges between clients for seeds 0-4 (plain METIS-5 cuts 7% of Cora's,
    2% of CiteSeer's: tests/test_fedgraph_iteration.py's setting note in docs/methods/fedgraph.md)."""
    from pathlib import Path

    from flowergraph.settings import load_preset

    values = load_preset(Path(__file__).resolve().parents[1] / "conf" / preset)
    assert (values["fedgraph.data"], values["fedgraph.parts-per-client"], values["num-clients"]) == ("metis", parts, 5)
    for seed in range(5):
        s = parse_run_config({**values, "seed": seed, "data-dir": str(shared_data)})
        graphs = [client_graph_of(s, k) for k in range(5)]
        cross = sum(int(g.cross_edges.shape[1]) for g in graphs)
        internal = sum(int(g.edge_index.shape[1]) for g in graphs)
        assert cross / (cross + internal) >= 0.30, (seed, cross / (cross + internal))
        sizes = [g.num_nodes for g in graphs]
        assert max(sizes) - min(sizes) < 0.1 * min(sizes)


@pytest.mark.simulation
def test_iteration_cadence_through_flowers_simulation(iteration_run, tmp_path):
    """2 rounds of the per-iteration exchange in Flower's simulation engine, inline (every message and the
    client's state round-tripped through Flower's serde between the iterations): the accuracies and the rows moved
    equal the in-process run's."""
    from flowergraph.simulation import run_simulation

    config, out, _ = iteration_run
    overrides = {k: v for k, v in config.items() if k not in ("method", "num-clients", "rounds", "state-dir")}
    overrides.update({"out-dir": str(tmp_path / "sim"), "checkpoint-every": 0, "simulation-engine": "inline"})
    result = run_simulation("fedgraph", num_clients=K, rounds=2, overrides=overrides, timeout=300)
    assert result.ok, result.log_file.read_text()[-3000:]
    want = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    got = [r for r in read_run(tmp_path / "sim")["rounds"] if r["round"] >= 1]
    for a, b in zip(want, got, strict=True):
        assert b["accuracy"] == pytest.approx(a["accuracy"], abs=1e-6)
        assert (
            b["phases"][msg.ITERATION_PHASE]["rows_per_iteration"]
            == a["phases"][msg.ITERATION_PHASE]["rows_per_iteration"]
        )
        assert b["fedgraph"]["clock"]["work"] == a["fedgraph"]["clock"]["work"]


def test_a_client_without_labelled_nodes_still_owns_rows(shared_data, tmp_path):
    """With almost no labelled nodes some clients draw no sample: they ask for nothing, take no step (no work on
    the clock), yet answer as owners every iteration; the round aggregates the others (eq. 8 weight 0)."""
    extra = {"num-clients": 5, "fedgraph.data": "metis", "node.split": "random:0.002/0.3/0.3", "rounds": 1}
    config = _config(shared_data, tmp_path, "few", **extra)
    s = parse_run_config(config)
    labelled = [int(client_graph_of(s, k).train_mask.sum()) for k in range(5)]
    assert 0 in labelled and any(labelled)
    run_inprocess(config)
    rec = [r for r in read_run(tmp_path / "few")["rounds"] if r["round"] == 1][0]
    clock = rec["fedgraph"]["clock"]
    assert clock["steps"] == [STEPS if n else 0 for n in labelled]
    assert rec["aggregated"] and rec["num_fit"] == 5
