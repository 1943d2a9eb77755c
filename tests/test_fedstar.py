"""FedStar and its baselines as a Flower method: what travels, what stays on the client (across fresh client
objects and across checkpoint/resume), the federation against an independent replay, bad settings, and an end
to end run through Flower's simulation. The Flower-free core is tested in test_graphcls.py."""

import numpy as np
import pytest
from flwr.app import RecordDict
from flwr.common import parameters_to_ndarrays

from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.clients import ClientState
from flowergraph.methods.fedstar.client import OPTIMIZER_KEY, VARIANTS, FedStarClient, shared_keys
from flowergraph.settings import parse_run_config
from flowergraph.errors import ConfigError
from flowergraph.app.inprocess import run_inprocess
from flowergraph.storage.results import read_run
from flowergraph.tasks.graphcls.data import GraphTaskSpec, client_graph_data
from flowergraph.tasks.graphcls.models import build_graph_model, part_keys
from flowergraph.tasks.graphcls.training import GraphTrainConfig, evaluate, make_optimizer, train_epochs
from flowergraph.tasks.torch_state import load_module_arrays, module_arrays

DATASETS = "MUTAG,PTC_MR,BZR"


@pytest.fixture(scope="module")
def spec(shared_data):
    return GraphTaskSpec(datasets=DATASETS, data_dir=str(shared_data), num_clients=3)


def _run(shared_data, tmp_path, name, **extra):
    return {
        "method": "fedstar",
        "dataset": DATASETS,
        "num-clients": 3,
        "rounds": 3,
        "seed": 2,
        "data-dir": str(shared_data),
        "out-dir": str(tmp_path / name),
        **extra,
    }


def test_only_the_structure_encoder_travels(spec, shared_data, tmp_path):
    """On the wire (every message of a 3-round run): the initial model, each fit instruction and each fit reply
    carry exactly the structure encoder's arrays, in state_dict order."""
    _, proxies = run_inprocess(_run(shared_data, tmp_path, "wire"), record=True)
    model = build_graph_model("decoupled", 7, 2, 32)
    structure = part_keys(model, "structure")
    assert structure == ["struct_in.weight", "struct_in.bias"] + [
        f"struct_convs.{i}.{p}" for i in range(3) for p in ("bias", "lin.weight")
    ]
    shapes = [tuple(v.shape) for v in module_arrays(model, structure).values()]
    fits = [(ins, res) for p in proxies for kind, ins, res in p.messages if kind == "fit"]
    assert len(fits) == 9
    for ins, res in fits:
        assert [a.shape for a in parameters_to_ndarrays(ins.parameters)] == shapes
        assert [a.shape for a in parameters_to_ndarrays(res.parameters)] == shapes
    (init,) = [res for p in proxies for kind, _, res in p.messages if kind == "get_parameters"]
    assert [a.shape for a in parameters_to_ndarrays(init.parameters)] == shapes
    rounds = read_run(tmp_path / "wire")["rounds"]
    per_client_up = sum(int(np.prod(s)) * 4 for s in shapes)
    assert all(per_client_up * 3 <= r["bytes_up"] < per_client_up * 3 + 5000 for r in rounds)


@pytest.mark.parametrize(
    "variant,cross,expected",
    [
        ("fedstar", True, ["struct_in", "struct_convs"]),
        ("fedavg", True, ["feat_convs", "fc"]),
        ("fedavg", False, ["feat_in", "feat_convs", "fc", "out"]),
        ("fedper", True, ["feat_convs"]),
        ("share-all", True, ["struct_in", "feat_convs", "struct_convs", "pool_fc", "fc"]),
        ("share-feature", True, ["feat_convs"]),
        ("local", True, []),
        ("local-decoupled", False, []),
    ],
)
def test_what_each_variant_shares(variant, cross, expected):
    kind, part, _ = VARIANTS[variant]
    model = build_graph_model(kind, 7, 2, 32)
    keys = shared_keys(model, part, cross)
    assert sorted({k.split(".")[0] for k in keys}) == sorted(expected)
    assert keys == [k for k in model.state_dict() if k in keys]  # state_dict order


def _client(spec, state, variant="fedstar", pid=0, seed=2):
    return FedStarClient(client_graph_data(spec, pid), partition_id=pid, variant=variant, seed=seed, state=state)


def test_received_arrays_land_in_the_real_parameters(spec):
    """The bug of a well-known port (rebinding .data on a state_dict() copy): after the global structure encoder
    arrives, the model's own parameters hold exactly those values and the private parts are untouched."""
    client = _client(spec, ClientState(RecordDict()))
    private = module_arrays(client.model, part_keys(client.model, "feature"))
    received = [
        np.random.default_rng(i).normal(size=a.shape).astype(np.float32)
        for i, a in enumerate(client.get_parameters({}))
    ]
    client.evaluate(received, {})
    params = dict(client.model.named_parameters())
    for key, value in zip(client.shared, received):
        np.testing.assert_array_equal(params[key].detach().numpy(), value)
    for key, value in module_arrays(client.model, part_keys(client.model, "feature")).items():
        np.testing.assert_array_equal(value, private[key])
    with pytest.raises(ValueError, match="the server sent 2 arrays; variant 'fedstar' shares 8"):
        client.evaluate(received[:2], {})


def test_private_parts_and_adam_moments_survive_fresh_client_objects(spec):
    """Flower re-creates the client for every message: two fits by two client objects over one node state
    equal one model and one Adam trained twice (the reference is computed directly with the core)."""
    state = ClientState(RecordDict())
    glob = _client(spec, ClientState()).get_parameters({})
    arrays1, n, _ = _client(spec, state).fit(glob, {"server_round": 1})
    assert n == client_graph_data(spec, 0).num_train
    assert "step" in str(sorted(state.get_arrays(OPTIMIZER_KEY)))  # Adam's step counts were stored
    arrays2, _, _ = _client(spec, state).fit(arrays1, {"server_round": 2})
    data = client_graph_data(spec, 0)
    model = build_graph_model("decoupled", data.num_features, data.num_classes, data.structure_dim, seed=2)
    structure = part_keys(model, "structure")
    opt = make_optimizer(model, GraphTrainConfig())
    for r, incoming in ((1, glob), (2, arrays1)):
        load_module_arrays(model, dict(zip(structure, incoming)))
        train_epochs(model, opt, data.train, GraphTrainConfig(), seed=2, round=r, client=0)
    for key, value in zip(structure, arrays2):
        np.testing.assert_array_equal(value, model.state_dict()[key].numpy())
    stored = state.get_arrays("fedstar-model")
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(stored[key], value.numpy())


def _replay(spec, rounds, seed, variant="fedstar"):
    """FedStar by hand with the core functions: each client keeps its model and Adam; the server averages the
    shared arrays weighted by training-graph counts; the last round's models are evaluated."""
    kind, part, _ = VARIANTS[variant]
    clients = []
    for k in range(spec.client_count):
        data = client_graph_data(spec, k)
        model = build_graph_model(kind, data.num_features, data.num_classes, data.structure_dim, seed=seed)
        clients.append((data, model, make_optimizer(model, GraphTrainConfig())))
    keys = shared_keys(clients[0][1], part, cross_dataset=True)
    glob = list(module_arrays(clients[0][1], keys).values())
    for r in range(1, rounds + 1):
        ups, weights = [], []
        for k, (data, model, opt) in enumerate(clients):
            load_module_arrays(model, dict(zip(keys, glob)))
            train_epochs(model, opt, data.train, GraphTrainConfig(), seed=seed, round=r, client=k)
            ups.append(list(module_arrays(model, keys).values()))
            weights.append(data.num_train)
        glob = [sum(w * u[i].astype(np.float64) for w, u in zip(weights, ups)) / sum(weights) for i in range(len(keys))]
        glob = [g.astype(np.float32) for g in glob]
    accs = []
    for data, model, _ in clients:
        load_module_arrays(model, dict(zip(keys, glob)))
        accs.append(evaluate(model, data, splits=("test",))["test_accuracy"])
    return accs


def test_the_federation_equals_an_independent_replay(spec, shared_data, tmp_path):
    run_inprocess(_run(shared_data, tmp_path, "fed"))
    last = read_run(tmp_path / "fed")["rounds"][-1]
    got = [last["clients"][str(k)]["accuracy"] for k in range(3)]
    want = _replay(spec, 3, seed=2)
    assert got == pytest.approx(want, abs=1e-9)
    assert last["mean_client_accuracy"] == pytest.approx(np.mean(want))
    summary = read_run(tmp_path / "fed")["summary"]
    assert summary["final_mean_client_accuracy"] == pytest.approx(np.mean(want))


def test_resumed_equals_uninterrupted_private_state_included(shared_data, tmp_path):
    base = _run(shared_data, tmp_path, "full", rounds=4, **{"checkpoint-every": 2})
    run_inprocess(base)
    run_inprocess(
        {
            **base,
            "resume-from": str(tmp_path / "full" / "checkpoints" / "round-000002.npz"),
            "out-dir": str(tmp_path / "again"),
        }
    )
    a, b = read_run(tmp_path / "full")["rounds"], read_run(tmp_path / "again")["rounds"]
    assert [r["accuracy"] for r in a] == [r["accuracy"] for r in b]
    assert [r["clients"] for r in a] == [r["clients"] for r in b]
    for x, y in zip(load_checkpoint(tmp_path / "full").arrays, load_checkpoint(tmp_path / "again").arrays):
        np.testing.assert_array_equal(x, y)


def test_faults_then_resume_with_private_state(shared_data, tmp_path):
    """Fault injection on FedStar's training rounds (a NaN update, a crash, a wrong shape) is rejected or dropped
    by client, never takes the run down, and a run resumed from the checkpoint before the last fault, private
    layers and Adam moments included, ends exactly where the uninterrupted faulty run ends."""
    base = _run(
        shared_data,
        tmp_path,
        "faulty",
        rounds=4,
        **{"checkpoint-every": 2, "min-clients": 2, "inject-faults": "nan:1@1,raise:2@2,shape:0@3"},
    )
    summary, _ = run_inprocess(base)
    a = read_run(tmp_path / "faulty")["rounds"]
    assert [(r["num_fit"], len(r["rejected"]), r["num_failures"]) for r in a] == [
        (2, 1, 0),
        (2, 0, 1),
        (2, 1, 0),
        (3, 0, 0),
    ]
    assert [x["client"] for x in a[0]["rejected"]] == ["1"] and [x["client"] for x in a[2]["rejected"]] == ["0"]
    assert summary["status"] == "completed" and all(
        np.isfinite(x).all() for x in load_checkpoint(tmp_path / "faulty").arrays
    )
    run_inprocess(
        {
            **base,
            "resume-from": str(tmp_path / "faulty" / "checkpoints" / "round-000002.npz"),
            "out-dir": str(tmp_path / "resumed"),
        }
    )
    b = read_run(tmp_path / "resumed")["rounds"]
    assert [r["clients"] for r in a] == [r["clients"] for r in b]
    assert [r["mean_client_accuracy"] for r in a] == [r["mean_client_accuracy"] for r in b]
    for x, y in zip(load_checkpoint(tmp_path / "faulty").arrays, load_checkpoint(tmp_path / "resumed").arrays):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("variant", ["local", "local-decoupled", "fedprox"])
def test_baselines_run_and_local_ones_send_nothing(variant, shared_data, tmp_path):
    extra = {"method": "fedprox"} if variant == "fedprox" else {"fedstar.variant": variant}
    summary, proxies = run_inprocess(_run(shared_data, tmp_path, variant, rounds=2, **extra), record=True)
    assert summary["status"] == "completed" and summary["final_mean_client_accuracy"] > 0.4
    fits = [res for p in proxies for kind, _, res in p.messages if kind == "fit"]
    if variant.startswith("local"):
        assert all(res.parameters.tensors == [] for res in fits)
        assert "get_parameters" not in [kind for p in proxies for kind, _, _ in p.messages]
    else:  # FedProx shares the GIN layers (the authors' server model: 2 Linear + the fixed eps buffer each)
        keys = shared_keys(build_graph_model("gin", 7, 2), "convs", cross_dataset=True)
        assert len(keys) == 3 * 5 and all(len(res.parameters.tensors) == len(keys) for res in fits)
        # graph.baseline-share=all (flowergraph's choice before): the hidden fc too
        _, proxies = run_inprocess(
            _run(shared_data, tmp_path, "all", rounds=1, method="fedprox", **{"graph.baseline-share": "all"}),
            record=True,
        )
        fits = [res for p in proxies for kind, _, res in p.messages if kind == "fit"]
        assert all(len(res.parameters.tensors) == 3 * 5 + 2 for res in fits)


def test_fedprox_pulls_only_the_shared_arrays(spec):
    """With mu > 0 the proximal term covers the shared arrays only (the private input/output layers of a
    cross-dataset GIN are free)."""
    data = client_graph_data(spec, 0)
    # Adam steps are ~lr long whatever the gradient: 20 epochs (40 steps) let the free model drift far
    client = FedStarClient(data, partition_id=0, seed=2, variant="fedprox", train=GraphTrainConfig(20, mu=1e6))
    free = FedStarClient(data, partition_id=0, seed=2, variant="fedprox", train=GraphTrainConfig(20, mu=0.0))
    glob = client.get_parameters({})
    pulled, _, _ = client.fit(glob, {"server_round": 1})
    moved, _, _ = free.fit(glob, {"server_round": 1})
    drift = lambda arrays: max(float(np.abs(a - g).max()) for a, g in zip(arrays, glob))  # noqa: E731
    assert drift(pulled) < 0.25 * drift(moved)
    out_bias = client.model.state_dict()["out.bias"].numpy()
    initial = build_graph_model("gin", client.data.num_features, client.data.num_classes, seed=2).state_dict()
    assert not np.allclose(out_bias, initial["out.bias"].numpy())  # the private output layer trained freely


def test_fedprox_differs_from_fedavg_by_the_proximal_term_alone(shared_data, tmp_path):
    """The benchmark's FedProx and FedAvg rows are paired by seed: with mu = 0 FedProx is FedAvg to the last bit
    (same data order, dropout and initialisation), so what separates the rows is mu's term (here it moves the
    model)."""
    base = {"method": "fedavg", "rounds": 2, "checkpoint-every": 1}
    run_inprocess(_run(shared_data, tmp_path, "avg", **base))
    run_inprocess(_run(shared_data, tmp_path, "prox0", **{**base, "method": "fedprox", "fedprox.mu": 0.0}))
    run_inprocess(_run(shared_data, tmp_path, "prox", **{**base, "method": "fedprox", "fedprox.mu": 0.01}))
    for r in (1, 2):
        avg, prox0, prox = (
            load_checkpoint(tmp_path / name / "checkpoints" / f"round-{r:06d}.npz").arrays
            for name in ("avg", "prox0", "prox")
        )
        assert len(avg) == len(prox0) == len(prox)
        assert all(np.array_equal(a, b) for a, b in zip(avg, prox0))
        assert max(float(np.abs(a - b).max()) for a, b in zip(avg, prox)) > 1e-3


@pytest.mark.parametrize(
    "raw,match",
    [
        ({"dataset": "CHEM", "num-clients": 3}, "num-clients=3 but dataset='CHEM' has 7 datasets .* set num-clients=7"),
        (
            {"dataset": "Cora"},
            "method 'fedstar' does graph classification but dataset 'Cora' is node classification "
            "data; valid datasets for it: graph classification: settings CHEM",
        ),
        ({"dataset": "MUTAG,MUTAG", "num-clients": 2}, "dataset 'MUTAG' appears twice"),
        ({"dataset": "MUTAG", "num-clients": 1}, "splits its graphs across num-clients >= 2 clients"),
        (
            {"dataset": "CHEMX"},
            "unknown dataset 'CHEMX'; valid choices: node classification: Cora, CiteSeer, PubMed, "
            "synthetic; graph classification: settings CHEM, BIO-CHEM, BIO-CHEM-SN, BIO-SN-CV, .*; "
            "did you mean 'CHEM'\\?",
        ),
        ({"dataset": "MUTAG,BZR", "num-clients": 2, "fedstar.variant": "fedsage"}, "unknown fedstar.variant 'fedsage'"),
        ({"dataset": "MUTAG,BZR", "num-clients": 2, "fedstar.structure": "pe"}, "unknown fedstar.structure 'pe'"),
        ({"dataset": "MUTAG,BZR", "num-clients": 2, "partition-dir": "/tmp"}, "partition files hold node-level data"),
        ({"dataset": "MUTAG,BZR", "num-clients": 2, "graph.hidden": 0}, "graph.hidden=0: must be >= 1"),
        (
            {"dataset": "MUTAG,BZR", "num-clients": 2, "fedstar.variant": "local", "secure-agg": "ckks"},
            "fedstar.variant='local' shares nothing, so secure-agg='ckks' / dp='none' have no update to protect",
        ),
    ],
)
def test_bad_fedstar_settings(raw, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config({"method": "fedstar", **raw})


def test_settings_and_lists_are_normalised_and_give_the_number_of_clients():
    from flowergraph.settings import natural_num_clients

    s = parse_run_config({"method": "fedstar", "dataset": "bio-chem", "num-clients": 10})
    assert s.dataset == "BIO-CHEM" and natural_num_clients("fedstar", "bio-chem") == 10
    assert (
        parse_run_config({"method": "fedstar", "dataset": "mutag, ptc_mr", "num-clients": 2}).dataset == "MUTAG,PTC_MR"
    )
    assert natural_num_clients("fedstar", "MUTAG") == 3 and natural_num_clients("fedavg", "Cora") == 3


@pytest.mark.simulation
@pytest.mark.ray
def test_three_datasets_two_rounds_through_flowers_simulation(shared_data, tmp_path):
    from flowergraph.simulation import run_simulation

    result = run_simulation(
        "fedstar",
        dataset=DATASETS,
        rounds=2,
        out=tmp_path / "sim",
        timeout=400,
        ray_cpus=1,
        overrides={"data-dir": str(shared_data), "seed": 2, "checkpoint-every": 2},
    )
    assert result.ok, result.log_file.read_text()[-3000:]
    run = read_run(tmp_path / "sim")
    assert run["config"]["num-clients"] == 3  # one client per dataset, chosen by the launcher
    assert [r["round"] for r in run["rounds"]] == [1, 2] and run["rounds"][-1]["num_fit"] == 3
    run_inprocess(_run(shared_data, tmp_path, "ref", rounds=2))
    want = read_run(tmp_path / "ref")["rounds"]
    assert [r["accuracy"] for r in run["rounds"]] == pytest.approx([r["accuracy"] for r in want], abs=1e-6)
    assert len(list((tmp_path / "sim" / "client-state").rglob("round-000002.npz"))) == 3


def test_the_baselines_that_were_variants_are_methods_and_the_old_spelling_is_refused_naming_the_method():
    """fedstar.variant=fedavg|fedprox|fedper|gcfl became method=<baseline> (on every task) and 0.3 removed the old
    spelling: it is refused naming the method (FedStar's old names of the graph task's keys: the keys with their
    last part)."""
    for variant in ("fedavg", "fedprox", "fedper", "gcfl"):
        with pytest.raises(
            ConfigError,
            match=rf"fedstar.variant='{variant}': {variant} is a method of its own \(on "
            rf"every task\); use method='{variant}' without fedstar.variant",
        ):
            parse_run_config(
                {"method": "fedstar", "fedstar.variant": variant, "dataset": "MUTAG,BZR", "num-clients": 2}
            )
    with pytest.raises(ConfigError, match=r"unknown run-config key 'fedstar.lr'; did you mean 'node.lr', 'graph.lr'"):
        parse_run_config({"method": "fedper", "dataset": "MUTAG,BZR", "num-clients": 2, "fedstar.lr": 0.01})
    new = parse_run_config({"method": "fedper", "dataset": "MUTAG,BZR", "num-clients": 2, "graph.lr": 0.01})
    assert new.method == "fedper" and new["graph.lr"] == 0.01 and new.task == "graph"
    assert (
        parse_run_config({"method": "fedstar", "fedstar.variant": "local", "dataset": "MUTAG,BZR", "num-clients": 2})[
            "fedstar.variant"
        ]
        == "local"
    )  # FedStar's own variants stay
