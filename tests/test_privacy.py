"""Privacy and robustness of the training rounds (issue 10): CKKS secure aggregation, differential privacy,
robust aggregation and poisoning faults, each checked against an independent computation; refused combinations
with their exact reasons. In-process federations here; SecAgg+ needs Flower's transport:
test_privacy_simulation.py."""

import math

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.clients.faults import FaultInjectingClient
from flowergraph.clients.node import NodeClassificationClient
from flowergraph.settings import parse_run_config
from flowergraph.errors import ConfigError
from flowergraph.settings.faults import Fault, parse_faults
from flowergraph.app.inprocess import run_inprocess
from flowergraph import wire
from flowergraph.privacy import ckks
from flowergraph.wire.secure import CKKS_DECRYPT, CKKS_VALUES, DecryptReply, DecryptRequest, EncryptedUpdate
from flowergraph.storage.results import read_run
from flowergraph.strategies.aggregation import (
    CoordinateMedian,
    Krum,
    RoundNotAggregated,
    TrimmedMean,
    Update,
    make_aggregator,
)
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.training import TrainConfig
from flowergraph.strategies import FederationPolicy

BASE = {"method": "fedavg", "dataset": "synthetic", "seed": 0, "fused-eval": False}


def _fits(proxies):
    """Per partition: [(fit instruction arrays, reply arrays, num_examples)] in round order."""
    out = {}
    for k, proxy in enumerate(proxies):
        out[k] = [
            (parameters_to_ndarrays(ins.parameters), parameters_to_ndarrays(res.parameters), res.num_examples)
            for kind, ins, res in proxy.messages
            if kind == "fit"
        ]
    return out


def _flat(arrays):
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    return str(ckks.write_key_file(tmp_path_factory.mktemp("keys") / "ckks.bin"))


# ------------------------------------------------------------------------------------------------ CKKS
def test_ckks_aggregate_equals_plain_averaging_and_the_server_never_holds_an_update(tmp_path, key_file):
    run = {**BASE, "num-clients": 2, "rounds": 3}  # two clients: SecAgg+ could not run this
    plain, plain_proxies = run_inprocess({**run, "out-dir": str(tmp_path / "plain")}, record=True)
    enc, enc_proxies = run_inprocess(
        {**run, "out-dir": str(tmp_path / "ckks"), "secure-agg": "ckks", "key-file": key_file}, record=True
    )
    plain_fits, enc_fits = _fits(plain_proxies), _fits(enc_proxies)
    ctx = ckks.load_key_file(key_file)
    for k in range(2):
        for r in range(3):
            sent_plain, update, n = plain_fits[k][r]
            sent_enc, reply, _ = enc_fits[k][r]
            # the global model each round equals plain weighted averaging within CKKS precision
            np.testing.assert_allclose(_flat(sent_enc), _flat(sent_plain), rtol=0, atol=1e-5)
            # what the server received: [lengths int64, blob uint8], never the update itself
            assert len(reply) == 2 and reply[0].dtype == np.int64 and reply[1].dtype == np.uint8
            assert reply[0].sum() == reply[1].size
            assert _flat(update).astype(np.float32).tobytes() not in reply[1].tobytes()
            # decrypted with the data owners' key it is [n x update, n] (train-size weighting)
            upload = EncryptedUpdate.decode(reply, {CKKS_VALUES: _flat(update).size + 1})
            values = ckks.decrypt_checked(ctx, upload.chunks, upload.length, ckks.check_key(ctx), r + 1, [k])
            np.testing.assert_allclose(values[-1], n, atol=1e-3)
            np.testing.assert_allclose(values[:-1] / n, _flat(update), rtol=0, atol=1e-5)
    # what the decrypting client (partition 0) received in each round's decrypt phase: the sum of both uploads
    # of that round, both participants with their clear num_examples and their check ciphertexts; nothing else
    asks = [
        (ins, res)
        for kind, ins, res in enc_proxies[0].messages
        if kind == "get_properties" and ins.config.get(wire.PHASE) == CKKS_DECRYPT
    ]
    assert len(asks) == 3 and not any(
        kind == "get_properties" and ins.config.get(wire.PHASE) == CKKS_DECRYPT
        for kind, ins, _ in enc_proxies[1].messages
    )
    for r, (ins, res) in enumerate(asks):
        request = wire.decode_phase(ins.config)
        ask = DecryptRequest.decode(request.arrays, request.values)
        assert request.round == r + 1 and ask.participants == (0, 1)
        uploads = [EncryptedUpdate.decode(enc_fits[k][r][1], {CKKS_VALUES: ask.length}) for k in range(2)]
        assert ask.num_examples == tuple(enc_fits[k][r][2] for k in range(2))
        assert ask.checks == [u.check for u in uploads]
        key = ckks.check_key(ctx)
        got = ckks.decrypt_checked(ctx, ask.blobs, ask.length, key, r + 1, [0, 1])
        want = sum(ckks.decrypt_checked(ctx, u.chunks, u.length, key, r + 1, [k]) for k, u in enumerate(uploads))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        # what it returned: that sum, flooded and rounded to multiples of 2^-20 (no raw CKKS decryption)
        total = DecryptReply.decode(wire.unpack_arrays(res.properties), wire.scalars(res.properties)).total
        np.testing.assert_allclose(total, want, rtol=0, atol=1e-4)
        assert np.array_equal(total * 2**20, np.round(total * 2**20))
    rounds = read_run(tmp_path / "ckks")["rounds"]
    assert rounds[0]["phase"] == "secure-ckks-setup"
    training = [r for r in rounds if r.get("round", 0) >= 1]
    assert [r["secure_agg"]["summed"] for r in training] == [2, 2, 2]
    assert all(r["secure_agg"]["decrypted_by"] == "0" for r in training)
    assert abs(enc["final_accuracy"] - plain["final_accuracy"]) < 1e-3


def test_ckks_clients_with_different_keys_fail_the_run(tmp_path, key_file):
    other = str(ckks.write_key_file(tmp_path / "other.bin"))
    nodes = [
        {"partition-id": 0, "num-partitions": 2, "key-file": key_file},
        {"partition-id": 1, "num-partitions": 2, "key-file": other},
    ]
    with pytest.raises(RuntimeError, match="clients hold different CKKS keys"):
        run_inprocess(
            {
                **BASE,
                "num-clients": 2,
                "rounds": 1,
                "out-dir": str(tmp_path / "run"),
                "secure-agg": "ckks",
                "key-file": key_file,
            },
            node_configs=nodes,
        )


def test_ckks_without_a_key_file_is_refused_before_training(tmp_path):
    from flwr.app import Context, RecordDict

    from flowergraph.app import node_client as client_app

    ctx = Context(
        run_id=1,
        node_id=1,
        node_config={"partition-id": 0, "num-partitions": 2},
        state=RecordDict(),
        run_config={**BASE, "num-clients": 2, "secure-agg": "ckks"},
    )
    with pytest.raises(ConfigError, match="needs the data owners' CKKS key file: set key-file"):
        client_app.build_client(ctx)


def test_ckks_resumes_from_a_checkpoint(tmp_path, key_file):
    run = {**BASE, "num-clients": 2, "rounds": 3, "secure-agg": "ckks", "key-file": key_file, "checkpoint-every": 1}
    full, _ = run_inprocess({**run, "out-dir": str(tmp_path / "full")})
    run_inprocess({**run, "rounds": 2, "out-dir": str(tmp_path / "part")})
    resumed, _ = run_inprocess(
        {
            **run,
            "out-dir": str(tmp_path / "part"),
            "resume-from": str(tmp_path / "part" / "checkpoints" / "round-000002.npz"),
        }
    )
    for a, b in zip(load_checkpoint(tmp_path / "full").arrays, load_checkpoint(tmp_path / "part").arrays):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert resumed["rounds_completed"] == 3


# ------------------------------------------------------------------------------------------------ DP
def _final(path):
    return load_checkpoint(path).arrays


def test_central_dp_noise_has_the_documented_scale(tmp_path):
    z, clip, n = 1.0, 0.5, 3
    run = {
        **BASE,
        "num-clients": n,
        "rounds": 1,
        "weighting": "uniform",
        "dp": "central-server",
        "dp-clipping-norm": clip,
        "checkpoint-every": 1,
        "node.hidden": 64,
    }  # ~2400 parameters: a tight estimate
    run_inprocess({**run, "dp-noise-multiplier": 0.0, "out-dir": str(tmp_path / "clean")})
    run_inprocess({**run, "dp-noise-multiplier": z, "out-dir": str(tmp_path / "noisy")})
    diff = _flat(_final(tmp_path / "noisy")) - _flat(_final(tmp_path / "clean"))
    expected = z * clip / n  # Flower's compute_stdv: z C / n on the mean of n clipped updates
    assert diff.size > 2000
    assert abs(diff.std() / expected - 1) < 0.1 and abs(diff.mean()) < 4 * expected / math.sqrt(diff.size)
    (rec,) = [r for r in read_run(tmp_path / "noisy")["rounds"] if r.get("round", 0) >= 1]
    assert rec["dp"]["noise_stddev"] == pytest.approx(expected) and rec["dp"]["releases"] == 1
    import dp_accounting  # independent: Google's accountant directly, one Gaussian release, no amplification

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), 1)
    assert rec["dp"]["epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    clean = [r for r in read_run(tmp_path / "clean")["rounds"] if r.get("round", 0) >= 1][0]
    assert clean["dp"]["epsilon"] == "inf"  # no noise: no guarantee


def test_central_dp_server_side_clips_every_update(tmp_path):
    clip = 0.05
    run = {**BASE, "num-clients": 3, "rounds": 1, "weighting": "uniform", "checkpoint-every": 1}
    _, proxies = run_inprocess({**run, "out-dir": str(tmp_path / "plain")}, record=True)
    fits = _fits(proxies)
    updates = [_flat(fits[k][0][1]) - _flat(fits[k][0][0]) for k in range(3)]
    assert min(np.linalg.norm(u) for u in updates) > clip  # so every update is clipped
    run_inprocess(
        {
            **run,
            "dp": "central-server",
            "dp-clipping-norm": clip,
            "dp-noise-multiplier": 0.0,
            "out-dir": str(tmp_path / "dp"),
        }
    )
    global0 = _flat(fits[0][0][0])
    expected = global0 + np.mean([u * clip / np.linalg.norm(u) for u in updates], axis=0)
    np.testing.assert_allclose(_flat(_final(tmp_path / "dp")), expected, rtol=0, atol=1e-6)


def test_central_dp_client_side_clips_before_sending(tmp_path):
    clip = 0.05
    run = {
        **BASE,
        "num-clients": 3,
        "rounds": 2,
        "weighting": "uniform",
        "dp": "central-client",
        "dp-clipping-norm": clip,
        "dp-noise-multiplier": 0.5,
        "out-dir": str(tmp_path),
    }
    _, proxies = run_inprocess(run, record=True)
    for k, rounds in _fits(proxies).items():
        for sent, reply, _ in rounds:
            assert np.linalg.norm(_flat(reply) - _flat(sent)) == pytest.approx(clip, rel=1e-4)
    recs = [r for r in read_run(tmp_path)["rounds"] if r.get("round", 0) >= 1]
    assert [r["dp"]["releases"] for r in recs] == [1, 2] and recs[0]["dp"]["mode"] == "central-client"


def test_local_dp_noise_has_the_documented_scale(tmp_path):
    clip, eps, delta = 10.0, 0.5, 1e-5  # epsilon < 1: where the classic Gaussian mechanism's formula holds
    run = {**BASE, "num-clients": 3, "rounds": 1}
    _, plain = run_inprocess({**run, "out-dir": str(tmp_path / "plain")}, record=True)
    _, noisy = run_inprocess(
        {
            **run,
            "out-dir": str(tmp_path / "dp"),
            "dp": "local",
            "dp-clipping-norm": clip,
            "dp-sensitivity": clip,
            "dp-epsilon": eps,
            "dp-delta": delta,
        },
        record=True,
    )
    sigma = clip * math.sqrt(2 * math.log(1.25 / delta)) / eps  # Flower's LocalDpMod arithmetic
    for k in range(3):
        sent, update, _ = _fits(plain)[k][0]
        assert np.linalg.norm(_flat(update) - _flat(sent)) < clip  # no clipping: the difference is the noise
        noise = _flat(_fits(noisy)[k][0][1]) - _flat(update)
        assert abs(noise.std() / sigma - 1) < 0.1
    rec = [r for r in read_run(tmp_path / "dp")["rounds"] if r.get("round", 0) >= 1][0]
    assert rec["dp"]["noise_stddev"] == pytest.approx(sigma) and rec["dp"]["epsilon_per_round"] == eps


def test_dp_budget_survives_a_resume(tmp_path):
    run = {
        **BASE,
        "num-clients": 3,
        "rounds": 4,
        "weighting": "uniform",
        "dp": "central-client",
        "dp-noise-multiplier": 1.2,
        "checkpoint-every": 2,
    }
    run_inprocess({**run, "out-dir": str(tmp_path / "full")})
    run_inprocess({**run, "rounds": 2, "out-dir": str(tmp_path / "part")})
    summary, _ = run_inprocess(
        {
            **run,
            "out-dir": str(tmp_path / "part"),
            "resume-from": str(tmp_path / "part" / "checkpoints" / "round-000002.npz"),
        }
    )
    full = read_run(tmp_path / "full")["summary"]["dp"]
    assert summary["dp"]["releases"] == full["releases"] == 4
    assert summary["dp"]["epsilon"] == pytest.approx(full["epsilon"], rel=1e-12)


def test_a_failed_client_skips_the_noisy_release_but_the_round_is_recorded(tmp_path):
    run_inprocess(
        {
            **BASE,
            "num-clients": 3,
            "rounds": 2,
            "weighting": "uniform",
            "dp": "central-server",
            "inject-faults": "raise:1@2",
            "checkpoint-every": 1,
            "out-dir": str(tmp_path),
        }
    )
    recs = [r for r in read_run(tmp_path)["rounds"] if r.get("round", 0) >= 1]
    assert recs[1]["aggregated"] is False and "1 client(s) failed" in recs[1]["dp"]["skipped"]
    assert recs[1]["failures"] == [{"client": "1", "reason": "injected fault 'raise' at partition 1 in round 2"}]
    assert [r["dp"]["releases"] for r in recs] == [1, 1]
    for a, b in zip(
        load_checkpoint(tmp_path / "checkpoints" / "round-000001.npz").arrays, load_checkpoint(tmp_path).arrays
    ):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------ robust rules
def _updates(vectors, sizes=None):
    sizes = sizes or [1] * len(vectors)
    return [
        Update(str(i), [np.asarray(v[:2], dtype=np.float32).reshape(2), np.asarray(v[2:], dtype=np.float32)], n)
        for i, (v, n) in enumerate(zip(vectors, sizes))
    ]


VECTORS = np.array(
    [
        [1.0, 2.0, 3.0, 4.0],
        [1.1, 1.9, 3.2, 4.1],
        [0.9, 2.2, 2.9, 3.8],
        [1.2, 2.1, 3.1, 4.2],
        [100.0, -50.0, 80.0, -90.0],
    ]
)


def test_median_and_trimmed_mean_against_hand_computation():
    ups = _updates(VECTORS)
    got = _flat(CoordinateMedian("uniform").aggregate(ups, [1.0] * 5))
    np.testing.assert_allclose(got, np.median(VECTORS, axis=0), rtol=1e-6)
    got = _flat(TrimmedMean(0.2, "uniform").aggregate(ups, [1.0] * 5))
    trimmed = np.sort(VECTORS, axis=0)[1:-1].mean(axis=0)  # 20% of 5 = one value dropped at each end
    np.testing.assert_allclose(got, trimmed, rtol=1e-6)


def _krum_scores(vectors, f):
    n = len(vectors)
    d = np.array([[np.sum((a - b) ** 2) for b in vectors] for a in vectors])
    return [sum(sorted(d[i][j] for j in range(n) if j != i)[: max(1, n - f - 2)]) for i in range(n)]


def test_krum_and_multi_krum_against_hand_computation():
    ups = _updates(VECTORS, sizes=[10, 20, 30, 40, 50])
    scores = _krum_scores(VECTORS, 1)
    got = _flat(Krum(1, None, "train-size").aggregate(ups, [10.0, 20.0, 30.0, 40.0, 50.0]))
    np.testing.assert_allclose(got, VECTORS[int(np.argmin(scores))], rtol=1e-6)
    best = np.argsort(scores)[:3]  # multi-Krum, keep 3: their train-size weighted mean
    w = np.array([10, 20, 30, 40, 50], dtype=float)[best]
    got = _flat(Krum(1, 3, "train-size").aggregate(ups, [10.0, 20.0, 30.0, 40.0, 50.0]))
    np.testing.assert_allclose(got, (VECTORS[best] * w[:, None]).sum(0) / w.sum(), rtol=1e-6)
    assert 4 not in best
    with pytest.raises(RoundNotAggregated, match="needs at least 2 x 1 \\+ 3 = 5 valid updates, got 4"):
        Krum(1).aggregate(ups[:4], [1.0] * 4)


def test_make_aggregator_names_the_valid_choices():
    with pytest.raises(
        ValueError, match="unknown aggregator 'mode'; valid choices: mean, median, trimmed-mean, krum, multi-krum"
    ):
        make_aggregator("mode")


# ------------------------------------------------------------------------------------------------ poisoning
def test_poison_faults_scale_and_flip_the_update():
    graph = client_graph(GraphSpec(dataset="synthetic", seed=1), PartitionSpec(num_clients=3, seed=1), 0)

    def inner():
        return NodeClassificationClient(graph, TrainConfig(), {"kind": "gcn"}, seed=2)

    params = inner().get_parameters({})
    honest, _, _ = inner().fit(params, {"server_round": 1})
    for kind, factor in (("scale", 100.0), ("flip", -10.0)):
        got, _, _ = FaultInjectingClient(inner(), {1: kind}, 0).fit(params, {"server_round": 1})
        for g, h, p in zip(got, honest, params):
            np.testing.assert_allclose(g, p + factor * (h - p), rtol=1e-5, atol=1e-5)
            assert np.isfinite(g).all()
    assert parse_faults("scale:0@*", num_clients=3, rounds=3) == (
        Fault(1, 0, "scale"),
        Fault(2, 0, "scale"),
        Fault(3, 0, "scale"),
    )


def test_robust_aggregation_resists_a_poisoned_client(tmp_path):
    run = {**BASE, "num-clients": 5, "rounds": 2, "checkpoint-every": 2}
    run_inprocess({**run, "out-dir": str(tmp_path / "clean")})
    clean = _flat(_final(tmp_path / "clean"))
    dist = {}
    for agg in ("mean", "median", "krum"):
        out = tmp_path / agg
        run_inprocess({**run, "aggregator": agg, "inject-faults": "scale:0@*", "out-dir": str(out)})
        dist[agg] = np.linalg.norm(_flat(_final(out)) - clean)
    assert dist["median"] < dist["mean"] / 10 and dist["krum"] < dist["mean"] / 10
    rec = [r for r in read_run(tmp_path / "krum")["rounds"] if r.get("round", 0) >= 1][0]
    assert rec["aggregated"] is True


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    "extra,message",
    [
        (
            {"secure-agg": "secagg+", "num-clients": 2},
            "secure-agg='secagg+' needs at least 3 clients per round (Flower's SecAgg+ protocol), this run has 2; use "
            "secure-agg='ckks', which works with 2",
        ),
        (
            {"secure-agg": "secagg+", "num-clients": 10, "fraction-fit": 0.2},
            "secure-agg='secagg+' needs at least 3 clients per round (Flower's SecAgg+ protocol), this run has 2",
        ),
        (
            {"secure-agg": "secagg+", "aggregator": "median"},
            "aggregator='median' needs every client's update, but secure-agg='secagg+' gives the server only their "
            "sum; "
            "valid with secure aggregation: aggregator='mean'",
        ),
        (
            {"secure-agg": "ckks", "aggregator": "krum", "num-clients": 5},
            "aggregator='krum' needs every client's update, but secure-agg='ckks' gives the server only their sum",
        ),
        (
            {"secure-agg": "ckks", "dp": "central-server", "weighting": "uniform"},
            "dp='central-server' clips each client's update on the server, which secure-agg='ckks' hides; use "
            "dp='central-client'",
        ),
        (
            {"secure-agg": "secagg+", "weighting": "batch-size"},
            "weighting='batch-size' with secure aggregation: each client weighs its own update",
        ),
        (
            {"dp": "central-client"},
            "dp='central-client' calibrates its noise to the unweighted mean of the sampled clients' clipped "
            "updates; set "
            "weighting='uniform' (got 'train-size')",
        ),
        (
            {"dp": "central-server", "weighting": "uniform", "aggregator": "median"},
            "dp='central-server' adds noise calibrated to a mean; aggregator='median' is not one",
        ),
        (
            {"aggregator": "krum", "num-clients": 4},
            "aggregator='krum' with aggregator-malicious=1 needs at least 2f + 3 = 5 clients per round; "
            "this run samples 4",
        ),
        (
            {"dp": "local", "dp-clipping-norm": 2.0, "dp-sensitivity": 1.0},
            "dp='local': dp-sensitivity=1.0 is below dp-clipping-norm=2.0",
        ),
        ({"secagg-num-shares": 2}, "secagg-num-shares=2: a count must be at least 3"),
        ({"secagg-num-shares": 2.5}, "secagg-num-shares=2.5: give a fraction in (0, 1] or a whole count"),
        (
            {"secagg-num-shares": 5, "secagg-reconstruction-threshold": 5},
            "secagg-reconstruction-threshold=5 must be below secagg-num-shares=5",
        ),
        ({"aggregator-trim": 0.5}, "aggregator-trim=0.5"),
    ],
)
def test_combinations_that_cannot_work_are_refused(extra, message):
    with pytest.raises(ConfigError) as info:
        parse_run_config({"num-clients": 3, **extra})
    assert message in str(info.value)


@pytest.mark.parametrize(
    "key,value,choices",
    [
        ("aggregator", "mode", "mean, median, trimmed-mean, krum, multi-krum"),
        ("secure-agg", "paillier", "none, secagg+, ckks"),
        ("dp", "yes", "none, central-server, central-client, local"),
    ],
)
def test_bad_privacy_choices_name_the_valid_ones(key, value, choices):
    with pytest.raises(ConfigError) as info:
        parse_run_config({key: value})
    assert str(info.value) == f"unknown {key} {value!r}; valid choices: {choices}"


def test_secagg_plus_is_refused_in_process(tmp_path):
    with pytest.raises(ConfigError, match="needs Flower's message transport: use flowergraph.simulation"):
        run_inprocess({**BASE, "num-clients": 3, "rounds": 1, "secure-agg": "secagg+", "out-dir": str(tmp_path)})


def test_secaggplus_weight_above_the_bound_is_refused_and_fails_the_run():
    """Flower's secaggplus_mod scales an update by weight / max_weight and only warns when that exceeds 1, then
    clips: the client refuses instead, and the server loop fails the run with the reason although SecAgg+'s
    workflow drops failed clients and goes on."""
    from flwr.common import ndarrays_to_parameters

    from flowergraph.clients.secure import SecureUpdates
    from flowergraph.app.polling import PollingGrid
    from flowergraph.wire import CONFIG_ERROR_MARKER
    from flowergraph.app.loop import FlowergraphServer, LegacyStrategy
    from flowergraph.strategies import WeightedAveraging

    class Inner:
        def __init__(self, n):
            self.n = n

        def fit(self, parameters, config):
            return [np.ones(2, dtype=np.float32)], self.n, {}

    assert SecureUpdates(Inner(40), "secagg+", 0, max_weight=40.0).fit([], {})[1] == 40
    assert SecureUpdates(Inner(3288), "secagg+", 1, weighting="uniform", max_weight=1.0).fit([], {})[1] == 1
    with pytest.raises(ConfigError) as err:
        SecureUpdates(Inner(3288), "secagg+", 6, max_weight=1000.0).fit([], {})
    text = (
        "secure-agg='secagg+': partition 6 weighs its update 3288 (training-set size), above "
        "secagg-max-weight=1000, which SecAgg+ would clip; set secagg-max-weight >= the largest training-set "
        "size (or use uniform weighting)"
    )
    assert str(err.value) == f"{CONFIG_ERROR_MARKER} {text}"
    assert parse_run_config({"secure-agg": "secagg+", "weighting": "uniform"}).secagg_weight_bound == 1.0
    assert parse_run_config({"secure-agg": "secagg+"}).secagg_weight_bound == 1000.0
    assert parse_run_config({"secure-agg": "secagg+", "secagg-max-weight": 3288}).secagg_weight_bound == 3288.0

    class Reply:  # what Flower's grid returns for a ClientApp that raised
        def __init__(self, reason):
            self.metadata = type("M", (), {"reply_to_message_id": "m0"})()
            self.error = type("E", (), {"reason": reason})()

        def has_error(self):
            return True

    class Grid:
        def push_messages(self, messages):
            return ["m0"]

        def pull_messages(self, ids):
            return [Reply(f"<class 'ConfigError'>:<'{err.value}'>")]

    server = FlowergraphServer(strategy=LegacyStrategy(WeightedAveraging(FederationPolicy(num_clients=3))))
    server.parameters = ndarrays_to_parameters([np.zeros(2, dtype=np.float32)])
    server.use_fit_workflow(lambda grid, ctx: grid.send_and_receive(["stage"]), PollingGrid(Grid()), 2, 10.0)
    with pytest.raises(RuntimeError) as failed:
        server._fit_round_workflow(1)
    assert str(failed.value) == f"round 1: {CONFIG_ERROR_MARKER} {text}"
