"""FL-AGCNS on Flower (issue 23): the federated search and retraining against the in-process reference
(:class:`~flowergraph.methods.flagcns.maths.InProcessSearch`, ``federated_train_architecture``) on Cora's 3-client METIS
split, what travels (each checked against an independent computation), resuming after a generation, secure mode
(what the server actually receives), ablations, faults, fixed architectures and bad keys. In-process federations
run the real ServerApp and ClientApp code (:mod:`flowergraph.app.inprocess`); one test runs Flower's simulation."""

import math
import re

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.data import node_graph
from flowergraph.errors import ConfigError
from flowergraph.methods.flagcns import schedule_of, space_of
from flowergraph.privacy import ckks
from flowergraph.wire.secure import CKKS_VALUES, EncryptedUpdate
from flowergraph.settings import parse_run_config
from flowergraph.storage import load_checkpoint, read_run
from flowergraph.methods.flagcns.maths import (
    InProcessSearch,
    SuperNet,
    baseline_code,
    client_loss_and_gradients,
    evaluate_codes,
    federated_train_architecture,
    parameter_count,
)
from flowergraph.methods.flagcns import wire as msg
from records import assert_same_rounds, untimed

# 3 epochs of 3 steps (1 warm-up epoch, then 2 FEO generations: rounds 4-6 and 7-9), then 4 retraining rounds
BASE = {
    "method": "flagcns",
    "dataset": "Cora",
    "num-clients": 3,
    "node.split": "per-class:20/500/1000",
    "node.partitioner": "metis",
    "seed": 3,
    "flagcns.layers": 2,
    "flagcns.population": 8,
    "flagcns.sample-size": 4,
    "flagcns.epochs": 3,
    "flagcns.warmup": 1,
    "flagcns.steps-per-epoch": 3,
    "flagcns.retrain-epochs": 4,
    "rounds": 13,
}
SEARCH_ROUNDS = 9
# what depends on the machine, not on the computation: wall times, and the codes a client had to evaluate anew
# (its process cache of scores may hold some already)
COSTS = ("feo_seconds", "time_s", "elapsed_s", "inference_s", "evaluations", "ended_at")


def _config(shared_data, tmp, name, **extra):
    return {**BASE, "data-dir": str(shared_data), "out-dir": str(tmp / name), "state-dir": str(tmp / "state"), **extra}


def _graphs(config):
    s = parse_run_config(config)
    return s, [node_graph(s, k) for k in range(3)]


def _generations(rounds):
    return [r["flagcns"]["generation"] for r in rounds if "generation" in (r.get("flagcns") or {})]


def _named(ckpt):
    return dict(zip(ckpt.strategy_state["bank"]["global_keys"], ckpt.arrays))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, shared_data):
    """The uninterrupted run (a checkpoint after every round), every message recorded."""
    tmp = tmp_path_factory.mktemp("flagcns")
    config = _config(shared_data, tmp, "full", **{"checkpoint-every": 1})
    _, proxies = run_inprocess(config, record=True)
    return config, tmp / "full", proxies


def _checkpoint(out, server_round):
    return load_checkpoint(out / "checkpoints" / f"round-{server_round:06d}.npz")


def test_flower_run_equals_the_in_process_reference(reference):
    """Same seed: the same training losses, FEO generations, populations, SuperNet weights and Adam state (bit for
    bit), chosen architecture, and the retraining's curve and FLACC as the in-process reference."""
    config, out, _ = reference
    s, graphs = _graphs(config)
    space = space_of(s)
    ref = InProcessSearch(space, graphs, schedule_of(s), seed=3)
    rounds = read_run(out)["rounds"]
    gens = _generations(rounds)
    assert [g["epoch"] for g in gens] == [1, 2, 3] and [g["evolved"] for g in gens] == [False, True, True]
    for epoch in (1, 2, 3):
        want, got = ref.run_epoch(), gens[epoch - 1]
        assert got["train_loss"] == want["train_loss"]
        if want["evolved"]:
            assert got["best_code"] == want["best_code"] and got["best_fll"] == want["best_fll"]
            assert got["best_val_accuracy"] == want["best_val_accuracy"] and got["gamma"] == want["gamma"]
            assert [got["from_controller"], got["from_clients"]] == [want["from_controller"], want["from_clients"]]
        state = _checkpoint(out, 3 * epoch).strategy_state["flagcns"]  # the end of the epoch
        assert [tuple(c) for c in state["population"]] == ref.population
    # the SuperNet and Adam after the last search round, bit for bit
    ckpt = _checkpoint(out, SEARCH_ROUNDS)
    weights, want = _named(ckpt), ref.supernet.arrays()
    assert list(weights) == list(want)
    for key in want:
        np.testing.assert_array_equal(weights[key], want[key], err_msg=key)
    arrays, _ = ref.optimizer.state()
    saved = ckpt.strategy_state["flagcns"]["optimizer"]["arrays"]
    assert sorted(saved) == sorted(arrays)
    for key in arrays:
        np.testing.assert_array_equal(saved[key], arrays[key], err_msg=key)
    # Algorithm 2 lines 19-22
    code, fll, val_acc = ref.final()
    selection = rounds[SEARCH_ROUNDS]["flagcns"]["selection"]
    assert tuple(selection["code"]) == code and selection["fll"] == fll and selection["val_accuracy"] == val_acc
    # retraining: the reference's federated gradient steps with the server's Adam, epoch by epoch
    trained = federated_train_architecture(space, code, graphs, epochs=4, seed=3)
    retrain = rounds[SEARCH_ROUNDS:]
    assert [r["stage"] for r in retrain] == ["retrain"] * 4
    np.testing.assert_allclose(
        [r["val_accuracy"] for r in retrain], [h["val_accuracy"] for h in trained.history], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        [r["accuracy"] for r in retrain], [h["test_accuracy"] for h in trained.history], rtol=0, atol=1e-12
    )
    result = rounds[-1]["flagcns"]["result"]
    assert result["epoch"] == trained.best_epoch and result["flacc"] == pytest.approx(trained.test_accuracy, abs=1e-12)
    assert result["parameters"] == trained.parameters == parameter_count(space, code, graphs[0].num_features, 7)
    assert result["inference_s"] > 0 and tuple(result["architecture"]) == code


CODE2021 = {
    "flagcns.warmup": 0,
    "flagcns.fitness": "accuracy",
    "flagcns.final-pick": "accuracy",
    "flagcns.controller-crossover": 0.5,
    "flagcns.adam-scope": "once-touched",
    "flagcns.gamma0": 0.5050505050505051,
}


def test_the_2021_codes_settings_on_flower_equal_the_in_process_reference(shared_data, tmp_path):
    """The 2021 code's choices through Flower (no warm-up, accuracy fitness, crossover 0.5, Adam on every parameter
    trained once, the pick by federated validation accuracy) compute what InProcessSearch computes with them: the
    same generations, populations and SuperNet weights, and the chosen architecture is the final population's
    highest federated validation accuracy (the record lists every member's scores), not its lowest FLL's by rule."""
    config = _config(shared_data, tmp_path, "code2021", **CODE2021, **{"checkpoint-every": SEARCH_ROUNDS})
    run_inprocess(config)
    s, graphs = _graphs(config)
    space, schedule = space_of(s), schedule_of(s)
    assert schedule.warmup_epochs == 0 and schedule.controller_crossover == 0.5
    assert schedule.gamma(1) == pytest.approx(0.5)
    ref = InProcessSearch(
        space, graphs, schedule, seed=3, fitness="accuracy", final_pick="accuracy", adam_scope="once-touched"
    )
    rounds = read_run(tmp_path / "code2021")["rounds"]
    gens = _generations(rounds)
    assert [g["evolved"] for g in gens] == [True, True, True]
    for got in gens:
        want = ref.run_epoch()
        assert (got["train_loss"], got["best_code"], got["gamma"]) == (
            want["train_loss"],
            want["best_code"],
            want["gamma"],
        )
    want = ref.supernet.arrays()  # the server's SuperNet after the search, bit for bit (the bank holds every
    weights = _named(_checkpoint(tmp_path / "code2021", SEARCH_ROUNDS))  # parameter Adam moved, sent or not)
    assert list(weights) == list(want)
    for key in want:
        np.testing.assert_array_equal(weights[key], want[key], err_msg=key)
    this_step = InProcessSearch(space, graphs, schedule, seed=3, fitness="accuracy", final_pick="accuracy")
    this_step.run()  # the scope matters: today's Adam ends elsewhere
    assert any(not np.array_equal(this_step.supernet.arrays()[k], v) for k, v in want.items())
    selection = rounds[SEARCH_ROUNDS]["flagcns"]["selection"]
    code, fll, val_acc = ref.final()
    assert tuple(selection["code"]) == code and selection["fll"] == fll and selection["val_accuracy"] == val_acc
    assert selection["pick"] == "accuracy"
    members = selection["final_population"]
    assert [tuple(m["code"]) for m in members] == ref.population
    accs = [m["val_accuracy"] for m in members]
    assert members[accs.index(max(accs))]["code"] == list(code)
    assert rounds[-1]["flagcns"]["result"]["architecture"] == list(code)


def test_what_travels_in_a_search_round(reference):
    """Round 1: every client is sent the parameters the sampled codes train (the seeded SuperNet's, by name) and
    returns exactly its own gradients of the training loss averaged over those codes."""
    config, _, proxies = reference
    s, graphs = _graphs(config)
    space = space_of(s)
    initial = SuperNet(space, graphs[0].num_features, 7, seed=3)
    for proxy in proxies:
        k = int(proxy.context.node_config["partition-id"])
        kind, ins, res = next(m for m in proxy.messages if m[0] == "fit")
        codes = msg.SearchStep.from_config(ins.config).codes
        assert len(codes) == 4 and ins.config[msg.EPOCH] == 1 and ins.config[msg.STEP] == 1
        keys = wire.decode_keys(ins.config)
        assert keys == initial.gradient_keys(codes)
        sent = dict(zip(keys, parameters_to_ndarrays(ins.parameters)))
        for key in keys:
            np.testing.assert_array_equal(sent[key], initial.state_dict()[key].numpy())
        reply = parameters_to_ndarrays(res.parameters)
        loss, grads = client_loss_and_gradients(initial, graphs[k], codes)
        assert wire.decode_keys(res.metrics) == keys and res.num_examples == graphs[k].num_train
        assert res.metrics[wire.TRAIN_LOSS] == loss
        for key, value in zip(keys, reply):
            np.testing.assert_array_equal(value, grads[key])


@pytest.mark.parametrize("at", [6, 4, 11], ids=["after-generation-1", "mid-epoch", "mid-retraining"])
def test_resumed_from_a_checkpoint_equals_uninterrupted(reference, tmp_path, at):
    """Resumed after generation 1 (round 6), in the middle of a generation's epoch (round 4: the training
    population and epoch losses are state) and during retraining (round 11: Adam's state, the best epoch so far,
    the record waiting for its fused evaluation): every later record and the final model as uninterrupted."""
    config, out, _ = reference
    resumed = {
        **config,
        "out-dir": str(tmp_path / "resumed"),
        "resume-from": str(out / "checkpoints" / f"round-{at:06d}.npz"),
    }
    run_inprocess(resumed)
    want = [r for r in read_run(out)["rounds"] if r["round"] >= at]
    got = [r for r in read_run(tmp_path / "resumed")["rounds"] if r["round"] >= at]
    assert [r["round"] for r in got] == list(range(at, 14))
    assert_same_rounds(want, got, COSTS)
    for a, b in zip(load_checkpoint(out).arrays, load_checkpoint(tmp_path / "resumed").arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    if at == 6:  # the clients' EAs came back from their state files (else generation 2 would differ)
        assert _generations(got)[1]["from_clients"] == _generations(want)[1]["from_clients"]


def test_secure_mode_the_server_receives_only_ciphertexts(reference, tmp_path):
    """secure-agg=ckks: every fit reply is CKKS ciphertexts of [n_k x gradient, n_k] (no loss in clear), every
    score reply is the ciphertext of the client's score vector (checked by decrypting with the owners' key against
    the client's own scores, computed here), and the search chooses what the plaintext run chose."""
    config, out, _ = reference
    key_file = str(ckks.write_key_file(tmp_path / "owners.key"))
    secure = {
        **config,
        "out-dir": str(tmp_path / "secure"),
        "secure-agg": "ckks",
        "key-file": key_file,
        "checkpoint-every": 0,
    }
    _, proxies = run_inprocess(secure, record=True)
    s, graphs = _graphs(config)
    space, ctx = space_of(s), ckks.load_key_file(key_file)
    initial = SuperNet(space, graphs[0].num_features, 7, seed=3)
    scored = 0
    for proxy in proxies:
        k = int(proxy.context.node_config["partition-id"])
        fits = [(ins, res) for kind, ins, res in proxy.messages if kind == "fit"]
        assert len(fits) == 13
        for ins, res in fits:
            reply = parameters_to_ndarrays(res.parameters)
            assert [a.dtype for a in reply] == [np.int64, np.uint8] and reply[0].sum() == reply[1].size
            # no training loss; the only numbers in clear are the retraining's evaluation metrics (fused)
            assert wire.TRAIN_LOSS not in res.metrics
            assert all(k.startswith(wire.EVAL_PREFIX) for k, v in res.metrics.items() if isinstance(v, float))
        ins, res = fits[0]  # round 1: decrypt with the owners' key and compare with the client's own gradients
        codes = msg.SearchStep.from_config(ins.config).codes
        keys = wire.decode_keys(ins.config)
        _, grads = client_loss_and_gradients(initial, graphs[k], codes)
        flat = np.concatenate([grads[key].ravel() for key in keys]).astype(np.float64)
        enc = EncryptedUpdate.decode(parameters_to_ndarrays(res.parameters), res.metrics)
        assert enc.length == flat.size + 1
        plain = ckks.decrypt_checked(
            ctx, enc.chunks, enc.length, ckks.check_key(ctx), int(ins.config[wire.SERVER_ROUND]), [k]
        )
        np.testing.assert_allclose(plain[:-1], graphs[k].num_train * flat, rtol=0, atol=1e-4)
        assert plain[-1] == pytest.approx(graphs[k].num_train, abs=1e-4)
        for kind, ins, res in proxy.messages:
            if kind != "get_properties" or ins.config.get(wire.PHASE) != msg.EVALUATE:
                continue
            props = dict(res.properties)
            # in clear: the vector's length and the validation-set size (as in plaintext mode's Scores)
            assert set(wire.scalars(props)) == {wire.PARTITION_ID, CKKS_VALUES, "num_val", "encrypted"}
            assert props["num_val"] == graphs[k].num_val
            arrays = wire.unpack_arrays(props)
            assert [a.dtype for a in arrays] == [np.int64, np.uint8]  # no float leaves the client
            request = wire.decode_phase(ins.config)
            asked = msg.EvaluateRequest.decode(request.arrays, request.values).codes
            net = SuperNet(space, graphs[0].num_features, 7)
            net.load_arrays(request.model)
            rows = evaluate_codes(net, graphs[k], asked)
            want = msg.score_vector([r["val_loss"] for r in rows], [r["val_accuracy"] for r in rows], graphs[k].num_val)
            enc = EncryptedUpdate.decode(arrays, props)
            got = ckks.decrypt_checked(
                ctx, enc.chunks, enc.length, ckks.check_key(ctx), request.round, [k], msg.SCORES_PURPOSE
            )
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
            scored += 1
    assert scored == 3 * 3  # 2 FEO generations and the final selection, on every client
    plain_rounds, enc_rounds = read_run(out)["rounds"], read_run(tmp_path / "secure")["rounds"]
    assert enc_rounds[0]["phase"] == "secure-ckks-setup"
    # The decrypted sums carry the decrypting client's flooding noise (2^-20 per value from the OS's entropy,
    # privacy/ckks.py: flood), which Adam's normalised steps carry into the SuperNet: the secure search is not the
    # plaintext one bit for bit (FLL differed by 3e-5 to 7e-4 after 13 rounds in repeated runs on the machine that
    # wrote this test; on 2026-11-26's machine by up to 7.3e-3, 2 of 4 runs above the old bound of 5e-3: a flaky
    # failure). What each client sent was checked exactly above; here the search only has to stay close to the
    # plaintext one: within 0.02 of an FLL of ~1.2 (a wrong scale or a lost client moves it by far more).
    for a, b in zip(_generations(plain_rounds), _generations(enc_rounds), strict=True):
        assert (a.get("best_fll") is None) == (b.get("best_fll") is None)
        if a.get("best_fll") is not None:
            assert b["best_fll"] == pytest.approx(a["best_fll"], abs=2e-2)
        assert b["train_loss"] is None  # no client's training loss reached the server
    assert enc_rounds[-1]["flagcns"]["result"]["flacc"] == pytest.approx(
        plain_rounds[-1]["flagcns"]["result"]["flacc"], abs=0.05
    )


@pytest.mark.parametrize("ablation,gamma", [("controller-eo", 0.0), ("client-eo", 1.0)])
def test_ablations_fix_gamma_and_who_fills_the_population(shared_data, tmp_path, ablation, gamma):
    config = {
        **_config(shared_data, tmp_path, "run"),
        "flagcns.ablation": ablation,
        "flagcns.epochs": 2,
        "flagcns.warmup": 0,
        "flagcns.steps-per-epoch": 1,
        "flagcns.retrain-epochs": 1,
        "rounds": 3,
    }
    _, proxies = run_inprocess(config, record=True)
    gens = _generations(read_run(tmp_path / "run")["rounds"])
    assert [g["gamma"] for g in gens] == [gamma, gamma]
    evolves = sum(
        1
        for p in proxies
        for kind, ins, _ in p.messages
        if kind == "get_properties" and ins.config.get(wire.PHASE) == msg.EVOLVE
    )
    if gamma == 0.0:  # only the controller's EA fills P: the clients are not asked to evolve
        assert [g["from_controller"] for g in gens] == [8, 8] and evolves == 0
    else:  # only the clients' EAs fill P (their pools still include the controller's P_FL)
        assert [g["from_controller"] for g in gens] == [0, 0] and [sum(g["from_clients"]) for g in gens] == [8, 8]
        assert evolves == 3 * 2


def test_a_fixed_architecture_is_retrained_as_the_reference_does(shared_data, tmp_path):
    """flagcns.architecture=gcn: no search, 4 rounds of federated retraining = federated_train_architecture."""
    config = {**_config(shared_data, tmp_path, "gcn"), "flagcns.architecture": "gcn", "rounds": 4}
    s, graphs = _graphs(config)
    assert not s.method_info.is_stateful(s)
    run_inprocess(config)
    rounds = read_run(tmp_path / "gcn")["rounds"]
    space = space_of(s)
    trained = federated_train_architecture(space, baseline_code("gcn", space), graphs, epochs=4, seed=3)
    np.testing.assert_allclose(
        [r["accuracy"] for r in rounds], [h["test_accuracy"] for h in trained.history], rtol=0, atol=1e-12
    )
    assert rounds[-1]["flagcns"]["result"]["flacc"] == pytest.approx(trained.test_accuracy, abs=1e-12)
    assert rounds[-1]["flagcns"]["result"]["selection"] is None


def test_faults_in_search_rounds_leave_the_client_out_of_that_step(shared_data, tmp_path):
    """inject-faults: a client that fails or sends NaN gradients is left out of its round (named); the step and
    the FEO go on with the others; the run completes."""
    config = {
        **_config(shared_data, tmp_path, "faults"),
        "inject-faults": "raise:1@2,nan:0@5,shape:2@11",
        "checkpoint-every": 13,
    }
    summary, _ = run_inprocess(config)
    rounds = read_run(tmp_path / "faults")["rounds"]
    assert summary["status"] == "completed"
    assert rounds[1]["failures"] == [{"client": "1", "reason": "injected fault 'raise' at partition 1 in round 2"}]
    assert rounds[4]["rejected"][0]["client"] == "0" and "NaN" in rounds[4]["rejected"][0]["reason"]
    assert rounds[10]["rejected"][0]["client"] == "2" and "shape" in rounds[10]["rejected"][0]["reason"]
    assert [r["num_fit"] for r in rounds] == [3, 2, 3, 3, 2] + [3] * 5 + [2, 3, 3]
    assert all(g.get("best_code") for g in _generations(rounds)[1:])
    assert all(np.isfinite(a).all() for a in load_checkpoint(tmp_path / "faults").arrays)


BAD = [
    ({"flagcns.combine": "mean"}, "unknown flagcns.combine 'mean'; valid choices: weighted, sum"),
    ({"flagcns.fitness": "acc"}, "unknown flagcns.fitness 'acc'; valid choices: loss, accuracy"),
    ({"flagcns.final-pick": "val"}, "unknown flagcns.final-pick 'val'; valid choices: fll, accuracy"),
    ({"flagcns.adam-scope": "torch1"}, "unknown flagcns.adam-scope 'torch1'; valid choices: this-step, once-touched"),
    ({"flagcns.controller-crossover": 1.5}, "flagcns.controller-crossover=1.5: must be in [0.0, 1.0]"),
    ({"flagcns.client-crossover": -0.1}, "flagcns.client-crossover=-0.1: must be in [0.0, 1.0]"),
    (
        {"flagcns.ablation": "clienteo"},
        "unknown flagcns.ablation 'clienteo'; valid choices: feo, controller-eo, client-eo, random-partition",
    ),
    ({"flagcns.fusion": "sum"}, "unknown flagcns.fusion 'sum'; valid choices: all, leaves"),
    ({"flagcns.structure-fc": "one"}, "unknown flagcns.structure-fc 'one'; valid choices: per-option, shared"),
    ({"flagcns.population": 0}, "flagcns.population=0: must be >= 1"),
    ({"flagcns.gamma0": 1.5}, "flagcns.gamma0=1.5: must be in [0.0, 1.0]"),
    ({"flagcns.sample-size": 9}, "flagcns.sample-size=9 exceeds flagcns.population=8; valid: 1..8"),
    ({"flagcns.warmup": 4}, "flagcns.warmup=4 exceeds flagcns.epochs=3; valid: 0..3"),
    ({"flagcns.min-layers": 3}, "flagcns.min-layers=3 exceeds flagcns.layers=2; valid: 0..2"),
    (
        {"rounds": 12},
        "rounds=12, but an FL-AGCNS run has flagcns.epochs x flagcns.steps-per-epoch + "
        "flagcns.retrain-epochs = 3 x 3 + 4 = 13 rounds; leave rounds unset (the run takes 13) or set rounds=13",
    ),
    (
        {"flagcns.architecture": "gin"},
        "unknown flagcns.architecture 'gin'; valid choices: gcn, gat, sage, sgc, appnp, "
        "a code as a JSON list of 6 integers, or empty (search); did you mean 'gcn'?",
    ),
    (
        {"flagcns.architecture": "[2, 3, 0]"},
        "flagcns.architecture='[2, 3, 0]': code [2, 3, 0] has 3 integers; a space with L=2 layers needs 2L+2 = 6",
    ),
    (
        {"flagcns.architecture": "gcn"},
        "rounds=13, but an FL-AGCNS run has flagcns.retrain-epochs = 4 (a fixed "
        "flagcns.architecture is only retrained) = 4 rounds; leave rounds unset (the run takes 4) or set rounds=4",
    ),
    ({"flagcns.finalists": 0}, "flagcns.finalists=0: must be >= 1"),
    ({"flagcns.finalists": 9}, "flagcns.finalists=9 exceeds flagcns.population=8; valid: 1..8"),
    (
        {"flagcns.finalists": 2},
        "rounds=13, but an FL-AGCNS run has flagcns.epochs x flagcns.steps-per-epoch + "
        "flagcns.finalists x flagcns.retrain-epochs = 3 x 3 + 2 x 4 = 17 rounds; "
        "leave rounds unset (the run takes 17) or set rounds=17",
    ),
    (
        {"flagcns.finalists": 3, "flagcns.architecture": "gcn"},
        "flagcns.finalists=3 chooses among searched networks, "
        "but flagcns.architecture='gcn' skips the search; valid "
        "with a fixed architecture: flagcns.finalists=1",
    ),
    (
        {"flagcns.ablation": "random-partition"},
        "flagcns.ablation='random-partition' runs FL-AGCNS on randomly "
        "divided subgraphs: set node.partitioner='random' (got 'metis')",
    ),
    (
        {"aggregator": "median"},
        "aggregator='median': FL-AGCNS combines gradients as flagcns.combine says; valid with it: aggregator='mean'",
    ),
    ({"secure-agg": "secagg+"}, "secure-agg='secagg+' would mask the SuperNet gradients only"),
    (
        {"secure-agg": "ckks", "flagcns.combine": "sum"},
        "secure-agg='ckks' with flagcns.combine='sum': each client "
        "weighs its encrypted gradient itself, so set "
        "weighting='uniform' (got 'train-size')",
    ),
    ({"dp": "central-client", "weighting": "uniform"}, "dp='central-client' clips whole weight updates"),
    ({"server-eval": True}, "server-eval=true: FL-AGCNS's server holds a SuperNet"),
]


FINALISTS = {**BASE, "flagcns.finalists": 3, "rounds": SEARCH_ROUNDS + 3 * 4}


@pytest.fixture(scope="module")
def finalists_run(tmp_path_factory, shared_data):
    """A search whose result is chosen by retraining its 3 lowest-FLL networks (a checkpoint every round)."""
    tmp = tmp_path_factory.mktemp("flagcns-finalists")
    config = {
        **FINALISTS,
        "data-dir": str(shared_data),
        "out-dir": str(tmp / "full"),
        "state-dir": str(tmp / "state"),
        "checkpoint-every": 1,
    }
    run_inprocess(config)
    return config, tmp / "full"


def test_finalists_are_the_lowest_fll_networks_retrained_and_the_best_by_validation_is_kept(finalists_run):
    """flagcns.finalists=3 against an independent computation: the in-process search's 3 lowest-FLL distinct
    networks, each retrained by the reference retraining, the best validation accuracy kept."""
    from flowergraph.methods.flagcns.maths import choose_by_retraining

    config, out = finalists_run
    s, graphs = _graphs(config)
    space = space_of(s)
    ref = InProcessSearch(space, graphs, schedule_of(s), seed=3)
    ref.run()
    finalists = ref.finalists(3)
    assert finalists[0] == ref.final() and len({space.canonical(c) for c, _, _ in finalists}) == 3
    kept, results = choose_by_retraining(space, [c for c, _, _ in finalists], graphs, epochs=4, seed=3)
    rounds = read_run(out)["rounds"]
    retrain = [r for r in rounds if r["round"] > SEARCH_ROUNDS]
    assert [r["stage"] for r in retrain] == ["retrain-1"] * 4 + ["retrain-2"] * 4 + ["retrain-3"] * 4
    # every finalist's retraining, epoch by epoch, as the reference retrains it
    np.testing.assert_allclose(
        [r["val_accuracy"] for r in retrain],
        [h["val_accuracy"] for res in results for h in res.history],
        rtol=0,
        atol=1e-12,
    )
    np.testing.assert_allclose(
        [r["accuracy"] for r in retrain],
        [h["test_accuracy"] for res in results for h in res.history],
        rtol=0,
        atol=1e-12,
    )
    assert [retrain[4 * j]["flagcns"]["architecture"] for j in range(3)] == [list(c) for c, _, _ in finalists]
    selection = retrain[0]["flagcns"]["selection"]
    assert [c["code"] for c in selection["candidates"]] == [list(c) for c, _, _ in finalists]
    assert [c["fll"] for c in selection["candidates"]] == [f for _, f, _ in finalists]
    result = rounds[-1]["flagcns"]["result"]
    code = finalists[kept][0]
    assert result["architecture"] == list(code) and result["selection"]["kept"] == kept + 1
    assert result["flacc"] == pytest.approx(results[kept].test_accuracy, abs=1e-12)
    assert result["epoch"] == results[kept].best_epoch
    assert result["val_accuracy"] == pytest.approx(max(r.val_accuracy for r in results), abs=1e-12)
    assert result["parameters"] == parameter_count(space, code, graphs[0].num_features, 7)


@pytest.mark.parametrize("at", [13, 15], ids=["between-finalists", "inside-finalist-2"])
def test_a_finalists_run_resumed_equals_uninterrupted(finalists_run, tmp_path, at):
    config, out = finalists_run
    run_inprocess(
        {
            **config,
            "out-dir": str(tmp_path / "resumed"),
            "resume-from": str(out / "checkpoints" / f"round-{at:06d}.npz"),
        }
    )
    want = [untimed(r, COSTS) for r in read_run(out)["rounds"] if r["round"] >= at]
    got = [untimed(r, COSTS) for r in read_run(tmp_path / "resumed")["rounds"] if r["round"] >= at]
    assert [r["round"] for r in got] == list(range(at, SEARCH_ROUNDS + 13))
    assert got == want


@pytest.mark.parametrize("extra,message", BAD, ids=[next(iter(e)) + "=" + str(next(iter(e.values()))) for e, _ in BAD])
def test_bad_settings_name_the_value_and_the_valid_choices(extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        s = parse_run_config({**BASE, **extra})
        if extra.get("server-eval"):
            s.method_info.server_evaluate(s)


def test_the_schedule_sets_rounds_when_none_is_given(launcher_main, capsys):
    """An FL-AGCNS run's rounds follow from its schedule (search epochs x steps + finalists x retraining): left
    unset, or at the key's default as a plain `flwr run` passes it, the run takes that number; another explicit
    value is refused with it. The launcher starts without a `--rounds` value."""
    from flowergraph.settings import option_by_key

    base = {k: v for k, v in BASE.items() if k != "rounds"}
    assert parse_run_config(base).rounds == 3 * 3 + 4
    assert parse_run_config({**base, "rounds": option_by_key()["rounds"].default}).rounds == 13
    assert parse_run_config({**base, "flagcns.finalists": 2}).rounds == 3 * 3 + 2 * 4
    assert parse_run_config({**base, "flagcns.architecture": "gcn"}).rounds == 4
    assert parse_run_config({"method": "flagcns", "dataset": "Cora"}).rounds == 40 * 5 + 50  # the defaults
    with pytest.raises(ConfigError, match=re.escape("rounds=5, but an FL-AGCNS run has")):
        parse_run_config({**base, "rounds": 5})
    # the launcher's own parse (no --rounds): refused later for the missing data folder, not for its rounds
    assert launcher_main(["--method", "flagcns", "--dataset", "Cora", "--data-dir", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "data-dir '/nonexistent' does not exist" in err and "rounds" not in err


@pytest.mark.simulation
def test_search_through_flowers_simulation_resumed_after_generation_one(reference, tmp_path):
    """The same search through Flower's simulation engine, inline (3 SuperNodes, messages serialised, client state
    files):
    equal to the in-process run; then resumed from its checkpoint after generation 1 into a new folder: equal to
    the uninterrupted one."""
    from flowergraph.simulation import resume_config, run_simulation

    config, out, _ = reference
    overrides = {k: v for k, v in config.items() if k not in ("method", "num-clients", "rounds", "state-dir")}
    overrides.update({"out-dir": str(tmp_path / "sim"), "checkpoint-every": 3, "simulation-engine": "inline"})
    first = run_simulation("flagcns", num_clients=3, rounds=13, overrides=overrides, timeout=900)
    assert first.ok, first.log_file.read_text()[-3000:]
    second = run_simulation(
        "flagcns",
        num_clients=3,
        rounds=13,
        timeout=900,
        overrides={
            **resume_config(tmp_path / "sim" / "checkpoints" / "round-000006.npz"),
            "out-dir": str(tmp_path / "resumed"),
        },
    )
    assert second.ok, second.log_file.read_text()[-3000:]
    want = read_run(out)["rounds"]
    for name in ("sim", "resumed"):
        got = read_run(tmp_path / name)["rounds"]
        assert [r["round"] for r in got] == list(range(1, 14))  # resumed: the checkpoint's records, then its own
        for a, b in zip(want, got, strict=True):
            assert (a.get("flagcns") or {}).get("generation", {}).get("best_code") == (b.get("flagcns") or {}).get(
                "generation", {}
            ).get("best_code")
            assert b.get("accuracy") == pytest.approx(a.get("accuracy"), abs=1e-6)
            assert b.get("train_loss") == pytest.approx(a.get("train_loss"), abs=1e-6)
        assert got[-1]["flagcns"]["result"]["architecture"] == want[-1]["flagcns"]["result"]["architecture"]
        for x, y in zip(load_checkpoint(out).arrays, load_checkpoint(tmp_path / name).arrays, strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    assert math.isfinite(read_run(tmp_path / "resumed")["rounds"][-1]["flagcns"]["result"]["flacc"])


def test_by_default_every_architecture_has_a_graph_layer():
    """Random codes and mutations of the run's space never end stage 2 before layer 1 (flagcns.min-layers=1); with
    min-layers=0 (every gene uniform) layer 1's predecessor is None with probability 1/2, an MLP."""
    from flowergraph.methods.flagcns.maths import new_rng

    def no_layer_share(extra: dict) -> float:
        space = space_of(parse_run_config({**BASE, **extra}))
        rng = new_rng(7)
        codes = [space.sample(rng) for _ in range(2000)]
        codes += [space.mutate(c, rng, rate=0.5) for c in codes]
        return sum(not space.fused_layers(c) for c in codes) / len(codes)

    assert parse_run_config(BASE)["flagcns.min-layers"] == 1
    assert no_layer_share({}) == 0.0
    assert 0.45 < no_layer_share({"flagcns.min-layers": 0}) < 0.55


def test_presets_hold_the_paper_setting_and_budget():
    """`-paper` is the paper's (all of P per step, no warm-up, FLL fitness and pick), `-code2021` the authors' 2021
    code's (20 of 60 per step, no warm-up, accuracy fitness and pick, crossover 0.5, gamma 0.5 at the first
    generation), `-warmup50` what `-paper` was until 2026-12-02; reproductions/flagcns/run.py's budgets are the
    presets'."""
    import sys
    from pathlib import Path

    from flowergraph.settings import load_preset
    from flowergraph.methods.flagcns.maths import CODE2021_SCHEDULE, PAPER_SCHEDULE, WARMUP50_SCHEDULE, SearchSpace

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from reproductions.flagcns import grid as bench

    conf = repo / "conf"
    for name, dataset in (("flagcns-cora", "Cora"), ("flagcns-citeseer", "CiteSeer")):
        presets = {kind: load_preset(conf / f"{name}{kind}.toml") for kind in ("", "-paper", "-code2021", "-warmup50")}
        runs = {kind: parse_run_config(values) for kind, values in presets.items()}
        for s in runs.values():  # the paper's data: METIS into 3 clients, the public split (the 2021 code)
            assert (s.method, s.dataset, s.num_clients, s["node.partitioner"], s["node.split"]) == (
                "flagcns",
                dataset,
                3,
                "metis",
                "public",
            )
            assert space_of(s) == SearchSpace(num_layers=6, min_layers=1)
            assert s["flagcns.adam-scope"] == "this-step" and s["flagcns.finalists"] == 1
        paper, code2021, warmup50, quick = runs["-paper"], runs["-code2021"], runs["-warmup50"], runs[""]
        assert schedule_of(paper) == PAPER_SCHEDULE and paper.rounds == 250 * 5 + 50
        assert (PAPER_SCHEDULE.sample_size, PAPER_SCHEDULE.warmup_epochs) == (PAPER_SCHEDULE.population_size, 0)
        assert PAPER_SCHEDULE.evolves(1) and PAPER_SCHEDULE.gamma(1) == pytest.approx(0.5 * 0.99)  # t = 1
        assert (paper["flagcns.fitness"], paper["flagcns.final-pick"]) == ("loss", "fll")
        assert schedule_of(code2021) == CODE2021_SCHEDULE and code2021.rounds == 250 * 5 + 50
        assert (code2021["flagcns.fitness"], code2021["flagcns.final-pick"]) == ("accuracy", "accuracy")
        assert (
            CODE2021_SCHEDULE.sample_size,
            CODE2021_SCHEDULE.warmup_epochs,
            CODE2021_SCHEDULE.controller_crossover,
            CODE2021_SCHEDULE.client_crossover,
        ) == (20, 0, 0.5, 0.5)
        # federal.py: 0.5 * 0.99 ** epoch for the 0-based epoch; flowergraph's t is 1-based
        assert [CODE2021_SCHEDULE.gamma(t) for t in (1, 2, 250)] == pytest.approx([0.5, 0.5 * 0.99, 0.5 * 0.99**249])
        assert schedule_of(warmup50) == WARMUP50_SCHEDULE and warmup50.rounds == 250 * 5 + 50
        assert (WARMUP50_SCHEDULE.sample_size, WARMUP50_SCHEDULE.warmup_epochs) == (20, 50)
        assert schedule_of(quick).population_size < 60 and quick.rounds == 40 * 5 + 50
        for kind, budget in (
            ("-paper", "paper-exact"),
            ("-code2021", "code2021"),
            ("-warmup50", "paper"),
            ("", "default"),
        ):
            assert bench.BUDGETS[budget] == {k: v for k, v in presets[kind].items() if k.startswith("flagcns.")}, kind


def test_the_keys_choice_lists_are_the_cores():
    """The registration keeps its own copies of the core's choice lists (so the settings need not import torch);
    they must not drift apart."""
    from flowergraph.methods import flagcns as registration
    from flowergraph.methods.flagcns.maths import ADAM_SCOPES, FINAL_PICKS, FUSIONS, STRUCTURE_FCS

    assert registration.STRUCTURE_FC == STRUCTURE_FCS and registration.FUSION == FUSIONS
    assert registration.FINAL_PICK == FINAL_PICKS and registration.ADAM_SCOPE == ADAM_SCOPES
