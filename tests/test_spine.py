"""The second spine step, through methods that exist only in the tests (tests/plugins): per-client models with
partial named updates (``toy-partial``), a run in two stages whose models differ in shape (``toy-stages``), and
the strategy hooks (per-client evaluation, after_evaluate, round_closed, the per-client table, metric
aggregation), each checked on what travelled and against independent computations; resumed runs equal
uninterrupted ones, in one process and through Flower's simulation."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.errors import ConfigError
from flowergraph.methods import unregister
from flowergraph.settings import parse_run_config
from flowergraph.storage import load_checkpoint, read_run

PLUGINS = Path(__file__).resolve().parent / "plugins"


@pytest.fixture
def plugins():
    sys.path.insert(0, str(PLUGINS))
    import toy_partial
    import toy_stages

    yield toy_partial.register_once(), toy_stages.register_once()
    for name in ("toy-partial", "toy-stages"):
        unregister(name)
    sys.path.remove(str(PLUGINS))


def _run(tmp_path, method, name, rounds, **extra):
    return {
        "method": method,
        "num-clients": 3,
        "rounds": rounds,
        "seed": 2,
        "node.local-steps": 2,
        "node.lr": 0.2,
        "node.partitioner": "louvain",
        "checkpoint-every": 2,
        "out-dir": str(tmp_path / name),
        **extra,
    }


def _within_one_rounding(got, exact):
    exact = np.asarray(exact, np.float64)
    return np.all(np.abs(np.asarray(got, np.float64) - exact) <= np.spacing(np.abs(exact).astype(np.float32)))


def _fits(proxies):
    """partition -> [(arrays it was sent, config), (its reply: names -> arrays, num_examples)] per round."""
    out = {}
    for proxy in proxies:
        rounds = []
        for kind, ins, res in proxy.messages:
            if kind == "fit":
                arrays = parameters_to_ndarrays(res.parameters)
                names = wire.decode_keys(res.metrics, len(arrays))
                rounds.append(
                    (
                        parameters_to_ndarrays(ins.parameters),
                        dict(ins.config),
                        dict(zip(names, arrays)),
                        res.num_examples,
                    )
                )
        out[int(proxy.context.node_config["partition-id"])] = rounds
    return out


def test_partial_named_updates_and_per_client_models_on_the_wire(plugins, tmp_path):
    """Each client sends one layer by name; the next round each client receives its own model: every array the
    training-count weighted mean over the clients that sent it (float64, then one float32 rounding), except the
    layer it sent, which is its own."""
    _, proxies = run_inprocess(_run(tmp_path, "toy-partial", "run", 4), record=True)
    fits = _fits(proxies)
    keys = _state_dict_order()
    for pid, rounds in fits.items():
        for sent, config, reply, _ in rounds:
            assert wire.KEYS not in config  # whole models travel in the client's own order
            assert sorted(reply) == [f"convs.{pid % 2}.bias", f"convs.{pid % 2}.lin.weight"]  # one layer, named
    for r in range(3):  # the replies of round r+1 make the models sent in round r+2
        mean = {}
        for key in keys:
            senders = [(fits[pid][r][3], fits[pid][r][2][key]) for pid in fits if key in fits[pid][r][2]]
            total = sum(w for w, _ in senders)
            mean[key] = sum(w / total * np.asarray(a, np.float64) for w, a in senders)
        for pid in fits:
            own = fits[pid][r][2]
            model = dict(zip(_state_dict_order(), fits[pid][r + 1][0]))
            for key in keys:
                want = own[key] if key in own else mean[key]
                assert _within_one_rounding(model[key], want), (r, pid, key)
    # the clients' models differ (each keeps its own layer): a server sending one model to all would fail above
    assert not all(np.array_equal(a, b) for a, b in zip(fits[0][1][0], fits[1][1][0]))


def _state_dict_order():
    return ["convs.0.bias", "convs.0.lin.weight", "convs.1.bias", "convs.1.lin.weight"]


def test_per_client_models_resume_exactly(plugins, tmp_path):
    _, ref = run_inprocess(_run(tmp_path, "toy-partial", "reference", 4), record=True)
    run_inprocess(_run(tmp_path, "toy-partial", "run", 2))
    bank = load_checkpoint(tmp_path / "run").strategy_state["bank"]
    assert sorted(bank["models"]) == ["client:0", "client:1", "client:2"]  # every client's model is kept
    assert bank["global_keys"] == _state_dict_order()
    _, got = run_inprocess(
        {**_run(tmp_path, "toy-partial", "run", 4), "resume-from": str(tmp_path / "run")}, record=True
    )
    a, b = load_checkpoint(tmp_path / "reference"), load_checkpoint(tmp_path / "run")
    for x, y in zip(a.arrays, b.arrays, strict=True):
        np.testing.assert_array_equal(x, y)
    for slot, model in a.strategy_state["bank"]["models"].items():
        for x, y in zip(model["arrays"], b.strategy_state["bank"]["models"][slot]["arrays"], strict=True):
            np.testing.assert_array_equal(x, y)
    want, have = _fits(ref), _fits(got)
    for pid in want:  # rounds 3 and 4 sent each client exactly the same model
        for (w, *_), (h, *_) in zip(want[pid][2:], have[pid]):
            for x, y in zip(w, h, strict=True):
                np.testing.assert_array_equal(x, y)


def test_a_two_stage_run_changes_the_model_and_resumes_at_the_boundary(plugins, tmp_path):
    run_inprocess(_run(tmp_path, "toy-stages", "reference", 4))
    rounds = read_run(tmp_path / "reference")["rounds"]
    assert [r.get("stage") for r in rounds] == ["wide", "wide", "narrow", "narrow"]
    assert rounds[2]["stage_started"] == "narrow" and "toy-stages.init" in rounds[2]["phases"]
    # each client trained and was evaluated on the stage's model (it reports its hidden width)
    for r in rounds:
        width = 16 if r["round"] <= 2 else 4
        assert {c["fit_hidden"] for c in r["clients"].values()} == {width}
        assert {c["hidden"] for c in r["clients"].values()} == {width}  # round 2 too: evaluated separately
    assert load_checkpoint(tmp_path / "reference").arrays[0].shape == (4,)  # the narrow model's first bias
    run_inprocess(_run(tmp_path, "toy-stages", "run", 2))  # the checkpoint after the last round of 'wide'
    assert load_checkpoint(tmp_path / "run").strategy_state["stage_index"] == 0
    run_inprocess({**_run(tmp_path, "toy-stages", "run", 4), "resume-from": str(tmp_path / "run")})
    got = read_run(tmp_path / "run")["rounds"]
    assert [r["clients"] for r in got] == [r["clients"] for r in rounds]
    for x, y in zip(
        load_checkpoint(tmp_path / "reference").arrays, load_checkpoint(tmp_path / "run").arrays, strict=True
    ):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "raw,match",
    [
        (
            {"secure-agg": "ckks"},
            "secure-agg='ckks' gives the server only the sum of whole updates of one global model, "
            "but method 'toy-partial' declares update_kind='partial', model_scope='per-client'",
        ),
        ({"dp": "central-server", "weighting": "uniform"}, "dp='central-server' clips whole weight updates"),
        ({"dp": "local"}, "dp='local' clips and noises a whole weight update"),
        ({"aggregator": "median"}, "aggregator='median' compares whole updates"),
        ({"server-eval": True}, "server-eval=true evaluates one global model"),
    ],
)
def test_what_cannot_apply_to_partial_updates_is_refused(plugins, raw, match):
    with pytest.raises(ConfigError, match=match.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        parse_run_config({"method": "toy-partial", "num-clients": 3, **raw})


@pytest.mark.simulation
def test_partial_updates_and_stages_through_flowers_simulation_with_resume(plugins, tmp_path):
    """Both test-only methods run through Flower's engine, inline (plugins found through FLOWERGRAPH_PLUGINS) to
    round 4, equal to the uninterrupted in-process runs: toy-partial (per-client models kept by the clients) in 2
    rounds with a checkpoint, then resumed to 4; toy-stages (its stage boundary at round 3) in one run. (Its
    resume at the boundary is tested in one process above.)"""
    from flowergraph.simulation import resume_config, run_simulation

    old = {k: os.environ.get(k) for k in ("PYTHONPATH", "FLOWERGRAPH_PLUGINS")}
    os.environ["PYTHONPATH"] = str(PLUGINS) + (f":{old['PYTHONPATH']}" if old["PYTHONPATH"] else "")
    os.environ["FLOWERGRAPH_PLUGINS"] = "toy_partial,toy_stages"
    try:
        for method, resumed in (("toy-partial", True), ("toy-stages", False)):
            overrides = {
                k: v
                for k, v in _run(tmp_path, method, f"sim-{method}", 2).items()
                if k not in ("method", "num-clients", "rounds")
            }
            overrides["simulation-engine"] = "inline"
            first = run_simulation(method, num_clients=3, rounds=2 if resumed else 4, overrides=overrides, timeout=400)
            assert first.ok, first.log_file.read_text()[-3000:]
            if resumed:
                second = run_simulation(
                    method,
                    num_clients=3,
                    rounds=4,
                    timeout=400,
                    overrides={**resume_config(tmp_path / f"sim-{method}"), "rounds": 4},
                )
                assert second.ok, second.log_file.read_text()[-3000:]
            run_inprocess(_run(tmp_path, method, f"ref-{method}", 4))
            got, ref = (read_run(tmp_path / f"{kind}-{method}")["rounds"] for kind in ("sim", "ref"))
            assert [r["round"] for r in got] == [1, 2, 3, 4]
            np.testing.assert_allclose([r["accuracy"] for r in got], [r["accuracy"] for r in ref], atol=1e-6)
            for x, y in zip(
                load_checkpoint(tmp_path / f"sim-{method}").arrays,
                load_checkpoint(tmp_path / f"ref-{method}").arrays,
                strict=True,
            ):
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
