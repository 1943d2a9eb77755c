"""ASFGNN on Flower (issue 22): the Flower run against the core's in-process reference loops
(:func:`~flowergraph.methods.asfgnn.maths.reference.run_clients`, ``run_centralized``) on the paper's two-client label
split of Cora, what each client sends and receives (checked on the recorded messages against an independent
computation), resume between and within SMAC trials (the search driver's state included), secure aggregation
with CKKS (the server receives only ciphertexts), faults, and every bad ``asfgnn.*`` value. In-process federations
run the real ServerApp and ClientApp code (:mod:`flowergraph.app.inprocess`); one test runs Flower's simulation."""

import json
import re

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.errors import ConfigError
from flowergraph.privacy import ckks
from flowergraph.settings import parse_run_config
from flowergraph.storage import load_checkpoint, read_run
from flowergraph.methods.asfgnn.maths.data import centralized_data
from flowergraph.methods.asfgnn.maths.models import fgnn_arrays, load_fgnn_arrays
from flowergraph.methods.asfgnn.maths.reference import run_centralized, run_clients
from flowergraph.methods.asfgnn.maths.search import client_hyperparams
from flowergraph.methods.asfgnn.maths.training import (
    derive_seed,
    local_round,
    make_model,
    make_optimizer,
    round_generator,
)
from flowergraph.methods.asfgnn import wire as aw
from flowergraph.wire.secure import EncryptedUpdate
from records import assert_same_rounds, untimed

# One trial of 5 training rounds and its closing evaluation round; per-client hyper-parameters (Table 4's shape:
# the clients' depths and learning rates differ) so that a mix-up between the clients would show.
BASE = {
    "method": "asfgnn",
    "dataset": "Cora",
    "num-clients": 2,
    "seed": 3,
    "asfgnn.trial-rounds": 5,
    "rounds": 6,
    "asfgnn.hidden": 64,
    "asfgnn.depth": "3,2",
    "asfgnn.lr": "0.01,0.005",
    "asfgnn.dropout": "0.5,0.3",
}
T = 5
# SMAC: 3 trials of 2 rounds (+ 1 closing round each)
SMAC = {**BASE, "asfgnn.search": "smac", "asfgnn.trials": 3, "asfgnn.trial-rounds": 2, "rounds": 9}
# what depends on the machine, not on the computation
COSTS = ("time_s", "elapsed_s", "ended_at", "phases")
FGNN = ["fgnn.lin1.weight", "fgnn.lin1.bias", "fgnn.lin2.weight", "fgnn.lin2.bias"]
STATS = [aw.UNIT, aw.COUNTS, aw.METRICS]


def default_config(s):
    # imported here, not at the top: importing a method's module before the registry has loaded the built-in
    # methods registers it first, which reorders every method list (docs/configuration.md's check would fail)
    from flowergraph.methods.asfgnn import default_config

    return default_config(s)


def split_spec(s):
    from flowergraph.methods.asfgnn import split_spec

    return split_spec(s)


def _config(shared_data, tmp, name, base=BASE, **extra):
    return {
        **base,
        "data-dir": str(shared_data),
        "out-dir": str(tmp / name),
        "state-dir": str(tmp / f"{name}-state"),
        **extra,
    }


def _clients(config):
    s = parse_run_config(config)
    spec = split_spec(s)
    return s, [spec.client(k) for k in range(2)], client_hyperparams(default_config(s))


def _fits(proxy):
    return [(ins, res) for kind, ins, res in proxy.messages if kind == "fit"]


def _partition(proxy):
    return int(proxy.context.node_config["partition-id"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory, shared_data):
    """The plaintext SFGNN run (a checkpoint after every round), every message recorded."""
    tmp = tmp_path_factory.mktemp("asfgnn")
    config = _config(shared_data, tmp, "full", **{"checkpoint-every": 1})
    _, proxies = run_inprocess(config, record=True)
    return config, tmp / "full", proxies


@pytest.fixture(scope="module")
def smac_run(tmp_path_factory, shared_data):
    """3 SMAC trials x 2 rounds, a checkpoint after every round."""
    tmp = tmp_path_factory.mktemp("asfgnn-smac")
    config = _config(shared_data, tmp, "full", SMAC, **{"checkpoint-every": 1})
    run_inprocess(config)
    return config, tmp / "full"


def _assert_equals_reference(out, ref, trial_rounds):
    rounds = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    assert [r["trial_round"] for r in rounds] == list(range(1, trial_rounds + 2))
    # record r holds the evaluation of the model that entered round r (the closing round: the final model)
    got_val = [r["asfgnn"]["mean_val"] for r in rounds]
    got_test = [r["asfgnn"]["mean_test"] for r in rounds]
    np.testing.assert_allclose(got_val, [h["mean_val"] for h in ref.history], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_test, [h["mean_test"] for h in ref.history], rtol=0, atol=1e-12)
    result = rounds[-1]["trial_result"]
    assert result["best_val"] == pytest.approx(ref.best_val, abs=1e-12)
    assert result["test_at_best"] == pytest.approx(ref.test_at_best, abs=1e-12)
    assert result["best_trial_round"] == ref.best_round
    return rounds


def test_flower_run_equals_the_core_reference(reference):
    """SFGNN: every round's mean validation and test accuracy, the mean training loss, each client's own
    accuracies (plaintext records), the objective and the test accuracy at the best round equal run_clients'."""
    config, out, _ = reference
    _, clients, hps = _clients(config)
    assert [hp.depth for hp in hps] == [3, 2] and [hp.lr for hp in hps] == [0.01, 0.005]
    ref = run_clients(clients, hps, method="sfgnn", rounds=T, seed=3)
    rounds = _assert_equals_reference(out, ref, T)
    for rec, want in zip(rounds, ref.history, strict=True):
        for k in range(2):
            assert rec["clients"][str(k)]["val_accuracy"] == pytest.approx(want["clients"][k]["val_acc"], abs=1e-12)
            assert rec["clients"][str(k)]["accuracy"] == pytest.approx(want["clients"][k]["test_acc"], abs=1e-12)
        if rec["trial_round"] <= T:
            assert rec["train_loss"] == pytest.approx(np.mean([c["train_loss"] for c in want["clients"]]), abs=1e-6)
        else:
            assert rec["train_loss"] is None  # the closing round only evaluates
    summary = read_run(out)["summary"]["search"]
    assert summary["best_trial"] == 0 and summary["best_val_accuracy"] == pytest.approx(ref.best_val, abs=1e-12)
    assert summary["best_config"] == default_config(parse_run_config(config))
    # the planned budget and the finished trials are two fields (one key once held both, the list overwriting the count)
    assert summary["trials_planned"] == summary["trials_finished"] == len(summary["trials"]) >= 1


@pytest.mark.parametrize(
    "label,extra,method,kwargs",
    [
        ("no-js", {"asfgnn.js": False}, "sfgnn-nojs", {}),
        ("client-init", {"asfgnn.fgnn-init": "client"}, "sfgnn", {"fgnn_init": "client"}),
        ("fl", {"asfgnn.variant": "fl", "asfgnn.depth": "2"}, "fl", {}),
        # SP sends nothing, so nothing can make the clients' discriminators start equal: each starts from its own
        # seed, which is the reference with fgnn_init="client" (its default "shared" copies client 0's discriminator)
        ("sp", {"asfgnn.variant": "sp"}, "sp", {"fgnn_init": "client"}),
        # the local-steps row of the benchmark: several full-batch steps per round
        ("local-steps", {"asfgnn.local-epochs": 3}, "sfgnn", {"local_epochs": 3}),
        # the alpha = 0.9 control: the paper's client sizes, overlapping (1,412 and 1,296 nodes)
        ("paper-sizes", {"asfgnn.alpha": 0.9, "asfgnn.sizes": "paper-independent"}, "sfgnn", {}),
    ],
    ids=["no-js", "client-init", "fl", "sp", "local-steps", "paper-sizes"],
)
def test_variants_equal_the_core_reference(shared_data, tmp_path, label, extra, method, kwargs):
    config = _config(shared_data, tmp_path, label, **{"asfgnn.trial-rounds": 3, "rounds": 4, **extra})
    run_inprocess(config)
    _, clients, hps = _clients(config)
    if label == "paper-sizes":
        assert [c.num_nodes for c in clients] == [1412, 1296]
        assert np.intersect1d(clients[0].global_ids.numpy(), clients[1].global_ids.numpy()).size > 0
    _assert_equals_reference(tmp_path / label, run_clients(clients, hps, method=method, rounds=3, seed=3, **kwargs), 3)


def test_centralized_baseline_equals_run_centralized(shared_data, tmp_path):
    """asfgnn-cm: one client holds the union of the two owners' graphs; its accuracies over all the union's
    validation / test nodes equal run_centralized's."""
    config = _config(
        shared_data,
        tmp_path,
        "cm",
        **{
            "method": "asfgnn-cm",
            "asfgnn.trial-rounds": 3,
            "rounds": 4,
            "asfgnn.depth": "2",
            "asfgnn.lr": "0.01",
            "asfgnn.dropout": "0.5",
        },
    )
    run_inprocess(config)
    s = parse_run_config(config)
    union = centralized_data("Cora", "label", 1.0, 0, num_clients=2, data_dir=str(shared_data))
    ref = run_centralized(union, client_hyperparams(default_config(s))[0], rounds=3, seed=3)
    rounds = [r for r in read_run(tmp_path / "cm")["rounds"]]
    assert [r["num_fit"] for r in rounds] == [1] * 4
    np.testing.assert_allclose(
        [r["asfgnn"]["pooled_val"] for r in rounds], [h["mean_val"] for h in ref.history], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        [r["asfgnn"]["pooled_test"] for r in rounds], [h["mean_test"] for h in ref.history], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        [r["asfgnn"]["owner_mean_test"] for r in rounds],
        [h["client_mean_test"] for h in ref.history],
        rtol=0,
        atol=1e-12,
    )


def test_what_each_client_sends_and_receives(reference):
    """SFGNN, checked on the messages: every client gets its own hyper-parameters; it sends back exactly the
    discriminator (no ``sgnn.*`` array) and its statistics; round 1's reply equals an independent replay of that
    client's first round (the seeded model with client 0's initial discriminator); round 2 sends each client the
    plain mean of the round-1 discriminators and the summed label counts N_s, and no metric (with two clients
    the mean would give away the other's accuracy); only client 0 is asked for the
    trial's initial discriminator; metrics carry nothing but the partition id and the array names."""
    config, _, proxies = reference
    s, clients, hps = _clients(config)
    initial = fgnn_arrays(make_model(clients[0], hps[0], derive_seed(3, 0x1417, 0)))
    replies = {}
    inits = {}
    for proxy in proxies:
        k = _partition(proxy)
        fits = _fits(proxy)
        assert len(fits) == T + 1
        inits[k] = sum(
            1 for kind, ins, _ in proxy.messages if kind == "get_properties" and ins.config.get(wire.PHASE) == aw.INIT
        )
        for p, (ins, res) in enumerate(fits, start=1):
            instruction = aw.TrialInstruction.decode(ins.config)
            assert (instruction.trial, instruction.trial_round, instruction.train) == (0, p, p <= T)
            assert dict(instruction.hyperparams) == hps[k].to_dict()
            keys = wire.decode_keys(ins.config)
            assert keys == FGNN + STATS and wire.decode_keys(res.metrics) == keys
            assert not [key for key in keys if key.startswith("sgnn.")]
            assert set(res.metrics) == {wire.PARTITION_ID, wire.KEYS} and res.metrics[wire.PARTITION_ID] == k
            assert res.num_examples == 1
            reply = dict(zip(keys, parameters_to_ndarrays(res.parameters)))
            np.testing.assert_array_equal(reply[aw.COUNTS] * aw.COUNT_SCALE, clients[k].train_label_counts())
            replies[k, p] = reply
        # round 1: the client's own first round, replayed here
        ins, _ = fits[0]
        sent = dict(zip(wire.decode_keys(ins.config), parameters_to_ndarrays(ins.parameters)))
        for key in FGNN:
            np.testing.assert_array_equal(sent[key], initial[key])
        assert not sent[aw.COUNTS].any()  # nothing aggregated yet
        model = make_model(clients[k], hps[k], derive_seed(3, 0x1417, k))
        load_fgnn_arrays(model, initial)
        r = local_round(model, make_optimizer(model, hps[k]), clients[k], hps[k], generator=round_generator(3, k, 1))
        for key, value in fgnn_arrays(model).items():
            np.testing.assert_array_equal(replies[k, 1][key], value, err_msg=key)
        metrics = dict(zip(aw.METRIC_NAMES, replies[k, 1][aw.METRICS] * np.array([sc for _, sc in aw.METRIC_FIELDS])))
        assert metrics["val_accuracy"] == pytest.approx(r.val_acc, abs=1e-12)
        assert metrics["train_loss"] == pytest.approx(r.train_loss, abs=1e-6)
    assert inits == {0: 1, 1: 0}
    for proxy in proxies:  # round 2's downstream: W_s = the plain mean, N_s = the sum of the clients' counts
        ins, _ = _fits(proxy)[1]
        sent = dict(zip(wire.decode_keys(ins.config), parameters_to_ndarrays(ins.parameters)))
        for key in FGNN:
            np.testing.assert_allclose(sent[key], (replies[0, 1][key] + replies[1, 1][key]) / 2, rtol=0, atol=1e-7)
        np.testing.assert_array_equal(
            aw.global_counts(sent), clients[0].train_label_counts() + clients[1].train_label_counts()
        )
        assert not sent[aw.METRICS].any()  # the round's mean accuracies stay with the server


@pytest.mark.parametrize("variant", ["sp", "fl"])
def test_sp_sends_only_statistics_and_fl_the_whole_model(shared_data, tmp_path, variant):
    """SP: no model array leaves a client (only the statistics); FL: the whole GraphSAGE + discriminator."""
    config = _config(
        shared_data,
        tmp_path,
        variant,
        **{"asfgnn.variant": variant, "asfgnn.trial-rounds": 1, "rounds": 2, "asfgnn.depth": "2"},
    )
    _, proxies = run_inprocess(config, record=True)
    for proxy in proxies:
        for ins, res in _fits(proxy):
            keys = wire.decode_keys(res.metrics)
            if variant == "sp":
                assert keys == STATS
            else:
                assert [k for k in keys if k.startswith("sgnn.")] and set(FGNN) <= set(keys)
            assert len(parameters_to_ndarrays(res.parameters)) == len(keys)


@pytest.mark.parametrize("at", [3, 5], ids=["between-trials", "mid-trial"])
def test_smac_resumed_from_a_checkpoint_equals_uninterrupted(smac_run, tmp_path, at):
    """A SMAC tuning run resumed after trial 0 closed (round 3: the driver holds one told trial), inside trial 1
    (round 5: its configuration asked, not told; the clients' SGNNs and Adam states in their checkpoints): the
    same proposals, records, trial results and search summary as uninterrupted."""
    config, out = smac_run
    full = read_run(out)
    driver = load_checkpoint(out / "checkpoints" / f"round-{at:06d}.npz").strategy_state["asfgnn"]["driver"]
    assert sum(1 for e in driver["history"] if e[0] == "tell") == 1
    assert sum(1 for e in driver["history"] if e[0] == "ask") == (1 if at == 3 else 2)
    # the clients' checkpoints are in the run's state-dir (each data owner keeps its own)
    resumed = {
        **config,
        "out-dir": str(tmp_path / "resumed"),
        "resume-from": str(out / "checkpoints" / f"round-{at:06d}.npz"),
    }
    run_inprocess(resumed)
    got = read_run(tmp_path / "resumed")
    assert [r["round"] for r in got["rounds"]] == list(range(1, 10))
    assert_same_rounds(full["rounds"][at:], got["rounds"][at:], COSTS)
    assert untimed(got["summary"]["search"], COSTS) == untimed(full["summary"]["search"], COSTS)
    started = [r["trial_started"]["config"] for r in got["rounds"] if "trial_started" in r]
    assert len({json.dumps(c, sort_keys=True) for c in started}) == 3  # three different proposals
    final = load_checkpoint(tmp_path / "resumed").strategy_state["asfgnn"]["driver"]
    assert final["history"] == load_checkpoint(out).strategy_state["asfgnn"]["driver"]["history"]


def test_sfgnn_resumed_mid_trial_equals_uninterrupted(reference, tmp_path):
    """Resumed after round 3 of the one trial: the clients' SGNNs, discriminators and Adam come from their
    checkpoints; every later record and the final global discriminator as uninterrupted."""
    config, out, _ = reference
    resumed = {
        **config,
        "out-dir": str(tmp_path / "resumed"),
        "resume-from": str(out / "checkpoints" / "round-000003.npz"),
    }
    run_inprocess(resumed)
    want, got = read_run(out)["rounds"][3:], read_run(tmp_path / "resumed")["rounds"][3:]
    assert [untimed(r, COSTS) for r in got] == [untimed(r, COSTS) for r in want]
    for a, b in zip(load_checkpoint(out).arrays, load_checkpoint(tmp_path / "resumed").arrays, strict=True):
        np.testing.assert_array_equal(a, b)


def test_secure_mode_the_server_receives_only_ciphertexts(reference, tmp_path):
    """secure-agg=ckks: every fit reply is CKKS ciphertexts (no float array, no metric in clear); decrypted with
    the owners' key, round 1's reply of each client is its plaintext reply (discriminator and statistics); the
    server's records hold no per-client accuracy; the run agrees with the plaintext one to 1e-5."""
    config, out, plain_proxies = reference
    key_file = str(ckks.write_key_file(tmp_path / "owners.key"))
    secure = {
        **config,
        "out-dir": str(tmp_path / "secure"),
        "secure-agg": "ckks",
        "key-file": key_file,
        "checkpoint-every": 0,
        "state-dir": str(tmp_path / "state"),
    }
    _, proxies = run_inprocess(secure, record=True)
    ctx = ckks.load_key_file(key_file)
    plain = {_partition(p): _fits(p)[0][1] for p in plain_proxies}
    for proxy in proxies:
        k = _partition(proxy)
        fits = _fits(proxy)
        assert len(fits) == T + 1
        for ins, res in fits:
            assert [a.dtype for a in parameters_to_ndarrays(res.parameters)] == [np.int64, np.uint8]
            assert not [key for key, v in res.metrics.items() if isinstance(v, float)]
        ins, res = fits[0]
        enc = EncryptedUpdate.decode(parameters_to_ndarrays(res.parameters), res.metrics)
        got = ckks.decrypt_checked(
            ctx, enc.chunks, enc.length, ckks.check_key(ctx), int(ins.config[wire.SERVER_ROUND]), [k]
        )
        want = ckks.flatten_arrays(parameters_to_ndarrays(plain[k].parameters))
        assert enc.length == want.size + 1 and got[-1] == pytest.approx(1.0, abs=1e-5)  # weight 1
        np.testing.assert_allclose(got[:-1], want, rtol=0, atol=1e-5)
    plain_rounds = read_run(out)["rounds"]
    enc_rounds = [r for r in read_run(tmp_path / "secure")["rounds"] if r["round"] >= 1]
    assert read_run(tmp_path / "secure")["rounds"][0]["phase"] == "secure-ckks-setup"
    for a, b in zip(plain_rounds, enc_rounds, strict=True):
        assert not any("val_accuracy" in c or "accuracy" in c for c in b["clients"].values())
        assert b["asfgnn"]["clients"] == 2 and b["asfgnn"]["label_counts"] == a["asfgnn"]["label_counts"]
        for key in ("mean_val", "mean_test", "train_loss"):
            if a["asfgnn"][key] is None:
                assert b["asfgnn"][key] is None
            else:
                assert b["asfgnn"][key] == pytest.approx(a["asfgnn"][key], abs=1e-5), (a["round"], key)


def test_a_failed_or_rejected_client_is_left_out_of_its_round(shared_data, tmp_path):
    """inject-faults: client 1 raises in round 2, client 0 sends NaN in round 4: each is left out of that round
    (named in the record), the round aggregates the other (N_s = its counts only), the failed client goes on from
    its own state in the next round, and the trial completes."""
    config = _config(shared_data, tmp_path, "faults", **{"inject-faults": "raise:1@2,nan:0@4", "checkpoint-every": 6})
    summary, _ = run_inprocess(config)
    rounds = read_run(tmp_path / "faults")["rounds"]
    _, clients, _ = _clients(config)
    counts = [c.train_label_counts().tolist() for c in clients]
    assert summary["status"] == "completed"
    assert rounds[1]["failures"] == [{"client": "1", "reason": "injected fault 'raise' at partition 1 in round 2"}]
    assert rounds[3]["rejected"][0]["client"] == "0" and "NaN" in rounds[3]["rejected"][0]["reason"]
    assert [r["num_fit"] for r in rounds] == [2, 1, 2, 1, 2, 2]
    assert [r["asfgnn"]["clients"] for r in rounds] == [2, 1, 2, 1, 2, 2]
    assert rounds[1]["asfgnn"]["label_counts"] == counts[0] and rounds[3]["asfgnn"]["label_counts"] == counts[1]
    assert rounds[2]["asfgnn"]["label_counts"] == (np.array(counts[0]) + counts[1]).tolist()
    assert rounds[-1]["trial_result"]["evaluations"] == T + 1
    assert all(np.isfinite(a).all() for a in load_checkpoint(tmp_path / "faults").arrays)


BAD = [
    ({"asfgnn.variant": "fedavg"}, "unknown asfgnn.variant 'fedavg'; valid choices: sfgnn, fl, sp"),
    ({"asfgnn.js": "maybe"}, "asfgnn.js='maybe': expected true or false"),
    ({"asfgnn.fgnn-init": "random"}, "unknown asfgnn.fgnn-init 'random'; valid choices: shared, client"),
    (
        {"asfgnn.setting": "labels"},
        "unknown asfgnn.setting 'labels'; valid choices: label, graph, disjoint; did you mean 'label'?",
    ),
    ({"asfgnn.alpha": 1.5}, "asfgnn.alpha=1.5: must be in [0.0, 1.0]"),
    ({"asfgnn.split-seed": -1}, "asfgnn.split-seed=-1: must be >= 0"),
    ({"asfgnn.sizes": "literal"}, "unknown asfgnn.sizes 'literal'; valid choices: disjoint, paper, paper-independent"),
    (
        {"asfgnn.setting": "graph", "asfgnn.sizes": "paper"},
        "asfgnn.sizes='paper' applies to asfgnn.setting='label' only; setting 'graph' needs asfgnn.sizes='disjoint'",
    ),
    (
        {"method": "asfgnn-cm", "asfgnn.sizes": "paper-independent", "asfgnn.alpha": 0.9},
        "asfgnn.sizes='paper-independent': asfgnn-cm needs each node in one owner's graph",
    ),
    ({"asfgnn.degree-threshold": -1}, "asfgnn.degree-threshold=-1: must be >= 0"),
    ({"asfgnn.search": "bayes"}, "unknown asfgnn.search 'bayes'; valid choices: none, smac, grid, random"),
    ({"asfgnn.trials": 0}, "asfgnn.trials=0: must be >= 1"),
    ({"asfgnn.trial-rounds": 0}, "asfgnn.trial-rounds=0: must be >= 1"),
    ({"asfgnn.smac-facade": "gp"}, "unknown asfgnn.smac-facade 'gp'; valid choices: hpo, blackbox"),
    ({"asfgnn.smac-initial-configs": -1}, "asfgnn.smac-initial-configs=-1: must be >= 0"),
    ({"asfgnn.grid-order": "random"}, "unknown asfgnn.grid-order 'random'; valid choices: shuffled, ordered"),
    ({"asfgnn.hidden": 100}, "unknown asfgnn.hidden 100; valid choices: 64, 128, 256, 512"),
    ({"asfgnn.depth": "6"}, "asfgnn.depth='6': 6 is invalid: valid: 1..5"),
    (
        {"asfgnn.depth": "2,x"},
        "asfgnn.depth='2,x': expected one int or a comma-separated list (one per client), valid: 1..5",
    ),
    ({"asfgnn.dropout": "1.0"}, "asfgnn.dropout='1.0': 1.0 is invalid: valid: [0, 1)"),
    ({"asfgnn.l2": "-0.1"}, "asfgnn.l2='-0.1': -0.1 is invalid: valid: >= 0"),
    ({"asfgnn.lr": "0"}, "asfgnn.lr='0': 0.0 is invalid: valid: > 0"),
    ({"asfgnn.local-epochs": 0}, "asfgnn.local-epochs=0: must be >= 1"),
    ({"asfgnn.depth": "2,2,2"}, "asfgnn.depth='2,2,2' gives 3 values; give one, or one per client (2)"),
    (
        {"rounds": 7},
        "rounds=7 exceeds asfgnn.trials x (asfgnn.trial-rounds + 1) = 1 x (5 + 1) = 6 (each trial ends "
        "with one evaluation round); set rounds=6",
    ),
    (
        {"asfgnn.trials": 2},
        "asfgnn.search='none' runs one trial with the given hyper-parameters; asfgnn.trials=2 "
        "needs asfgnn.search='smac', 'grid' or 'random'",
    ),
    (
        {"asfgnn.search": "grid", "asfgnn.trials": 200000},
        "asfgnn.trials=200000 exceeds the grid's 160000 points; valid: 1..160000",
    ),
    (
        {"asfgnn.variant": "fl", "asfgnn.js": False},
        "asfgnn.js=false switches SFGNN's mixing off; asfgnn.variant="
        "'fl' mixes nothing (valid: asfgnn.variant='sfgnn')",
    ),
    (
        {"asfgnn.variant": "sp", "asfgnn.fgnn-init": "client"},
        "asfgnn.fgnn-init='client' applies to asfgnn.variant='sfgnn' only (valid with asfgnn.variant='sp': 'shared')",
    ),
    (
        {"asfgnn.variant": "fl"},
        "asfgnn.variant='fl' averages the whole model, so every client needs the same depth; asfgnn.depth='3,2'",
    ),
    (
        {"asfgnn.setting": "graph", "asfgnn.alpha": 0.8},
        "asfgnn.alpha=0.8 applies to asfgnn.setting='label' only; setting 'graph' needs asfgnn.alpha=1.0",
    ),
    (
        {"num-clients": 3},
        "asfgnn.setting='label' has exactly 2 clients, got num-clients=3; use asfgnn.setting='disjoint' for more",
    ),
    (
        {"aggregator": "median"},
        "aggregator='median': ASFGNN averages the discriminators (and the label counts and "
        "metrics travelling with them); valid: aggregator='mean'",
    ),
    (
        {"dp": "central-client", "weighting": "uniform"},
        "dp='central-client': ASFGNN's updates carry the clients' label counts and metrics",
    ),
    (
        {"dataset": "PubMed"},
        "ASFGNN runs on the paper's splits of Cora and CiteSeer; dataset 'PubMed' has none; "
        "valid choices: Cora, CiteSeer",
    ),
    (
        {"secure-agg": "secagg+"},
        "secure-agg='secagg+' needs at least 3 clients per round (Flower's SecAgg+ "
        "protocol), this run has 2; use secure-agg='ckks', which works with 2",
    ),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[",".join(f"{k}={v}" for k, v in e.items()) for e, _ in BAD])
def test_bad_settings_name_the_value_and_the_valid_choices(extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_run_config({**BASE, **extra})


def test_presets_hold_the_paper_setting_and_budget():
    from pathlib import Path

    from flowergraph.settings import load_preset

    conf = Path(__file__).resolve().parents[1] / "conf"
    paper = parse_run_config(load_preset(conf / "asfgnn-cora-paper.toml"))
    quick = parse_run_config(load_preset(conf / "asfgnn-cora.toml"))
    for s in (paper, quick):  # the paper's data: Cora's two-client label split, alpha = 1, SMAC over its space
        o = s.of("asfgnn")
        assert (s.method, s.dataset, s.num_clients, o.setting, o.alpha, o.variant, o.js, o.search) == (
            "asfgnn",
            "Cora",
            2,
            "label",
            1.0,
            "sfgnn",
            True,
            "smac",
        )
        assert s.rounds == o.trials * (o.trial_rounds + 1)
    assert paper.of("asfgnn").trial_rounds == 200 and paper.of("asfgnn").trials >= 50
    assert quick.rounds <= 200  # a few minutes on 2 cores


@pytest.mark.simulation
def test_smac_under_secagg_through_flowers_simulation_equals_the_plaintext_run(shared_data, tmp_path):
    """Flower's simulation engine, inline (3 SuperNodes, messages serialised, client state in
    context.state) with SecAgg+ (the disjoint-label setting: SecAgg+ needs >= 3 clients) and 2 SMAC trials: the
    server is handed only the masked aggregate (one distinct payload per round, no per-client accuracy in the
    records), and the run equals the plaintext in-process run: the same proposals, label counts, and accuracies to
    SecAgg+'s quantisation."""
    from flowergraph.simulation import run_simulation

    torch.set_num_threads(1)
    config = _config(
        shared_data,
        tmp_path,
        "plain",
        SMAC,
        **{
            "asfgnn.setting": "disjoint",
            "num-clients": 3,
            "asfgnn.trials": 2,
            "rounds": 6,
            "asfgnn.depth": "3,2,1",
            "asfgnn.lr": "0.01",
            "asfgnn.dropout": "0.5",
        },
    )
    run_inprocess(config)
    overrides = {k: v for k, v in config.items() if k not in ("method", "num-clients", "rounds", "state-dir")}
    overrides.update({"out-dir": str(tmp_path / "sim"), "secure-agg": "secagg+", "simulation-engine": "inline"})
    result = run_simulation("asfgnn", num_clients=3, rounds=6, overrides=overrides, timeout=600)
    assert result.ok, result.log_file.read_text()[-3000:]
    want, got = read_run(tmp_path / "plain"), read_run(tmp_path / "sim")
    assert [r["round"] for r in got["rounds"]] == list(range(1, 7))
    for a, b in zip(want["rounds"], got["rounds"], strict=True):
        assert b["secure_agg"]["distinct_payloads"] == 1 and b["asfgnn"]["clients"] == 3
        assert not any("val_accuracy" in c for c in b["clients"].values())
        assert a.get("trial_started") == b.get("trial_started")
        assert b["asfgnn"]["label_counts"] == a["asfgnn"]["label_counts"]
        assert b["asfgnn"]["mean_val"] == pytest.approx(a["asfgnn"]["mean_val"], abs=1e-5)
        assert b["asfgnn"]["mean_test"] == pytest.approx(a["asfgnn"]["mean_test"], abs=1e-5)
    assert got["summary"]["search"]["best_config"] == want["summary"]["search"]["best_config"]
