"""FedGraph on Flower (issue 24): the Flower run against the core's in-process composition (exchange_in_process +
train_round + aggregate + the DDPG agent, composed here by hand), what each client actually sent (the recorded
messages, decoded as the server decodes them: never raw features, never layer-1 inputs), the one-round-stale
exchange, checkpoint/resume of the agent, bad keys, the presets, and one run through Flower's simulation.
In-process federations run the real ServerApp and ClientApp code (:mod:`flowergraph.app.inprocess`)."""

import re

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from flowergraph import wire
from flowergraph.app.inprocess import run_inprocess
from flowergraph.methods.fedgraph.client import sample_seed
from flowergraph.clients.node import round_seed
from flowergraph.errors import ConfigError
from flowergraph.methods.fedgraph import client_graph_of, train_config_of
from flowergraph.methods.node import node_server_evaluate
from flowergraph.settings import parse_run_config
from flowergraph.storage import load_checkpoint, read_run
from flowergraph.strategies.aggregation import Update
from flowergraph.methods.fedgraph.server import FedGraphStrategy
from flowergraph.strategies.policy import FederationPolicy
from flowergraph.methods.fedgraph.maths import (
    ActionSpace,
    DDPGAgent,
    DDPGConfig,
    Rows,
    SamplingPolicy,
    aggregate,
    boundary_nodes,
    build_model,
    build_view,
    exchange_degrees,
    exchange_in_process,
    owner_rows,
    reward,
    train_round,
)
from flowergraph.tasks.torch_state import load_module_arrays, module_arrays
from flowergraph.methods.fedgraph import wire as msg
from fedgraph_replay import replay
from records import assert_same_rounds

K = 3
# Cora, the paper's synthesis over 3 clients; alpha = 0 (no time penalty) makes the agent's rewards, hence the
# whole run, a pure function of the settings
BASE = {
    "method": "fedgraph",
    "dataset": "Cora",
    "num-clients": K,
    "rounds": 3,
    "seed": 5,
    "fedgraph.alpha": 0.0,
    "fedgraph.episode-rounds": 2,
}
COSTS = ("time_s", "elapsed_s", "ended_at", "round_time", "_s", "fedgraph_local_s", "fedgraph_sample_s")


def _config(shared_data, tmp, name, **extra):
    return {**BASE, "data-dir": str(shared_data), "out-dir": str(tmp / name), "state-dir": str(tmp / "state"), **extra}


def compose(config, rounds):
    """The core's in-process composition of ``rounds`` rounds (same-round exchange), as the package docstring of
    :mod:`flowergraph.methods.fedgraph.maths` lays it out: per-round records and the final weights."""
    s = parse_run_config(config)
    o, n = s.of("fedgraph"), s.of("node")
    graphs = [client_graph_of(s, k) for k in range(K)]
    degrees = exchange_degrees(graphs)
    views = [build_view(g, degrees[g.client_id], o.cut_norm) for g in graphs]
    model = build_model(
        graphs[0].num_features,
        graphs[0].num_classes,
        hidden=n.hidden,
        num_convs=n.layers,
        dropout=n.dropout,
        seed=s.seed,
    )
    weights = module_arrays(model)
    test = node_server_evaluate(s)
    agent = None
    if o.agent == "ddpg":
        agent = DDPGAgent(
            ActionSpace(K, n.layers, o.kappa_min, o.kappa_max, o.p_min, 1.0),
            DDPGConfig(episode_rounds=o.episode_rounds, pca_components=o.pca_components),
            seed=s.seed,
        )
        policies = agent.policies(agent.start_episode(agent.observe(weights, [weights] * K)))
    else:
        policies = [SamplingPolicy(o.batch_size, (o.prob,) * n.layers)] * K
    records = []
    for r in range(1, rounds + 1):
        load_module_arrays(model, weights)
        tables = exchange_in_process([model] * K, views, o.sharing)
        updates = []
        for k in range(K):
            local = build_model(
                graphs[0].num_features,
                graphs[0].num_classes,
                hidden=n.hidden,
                num_convs=n.layers,
                dropout=n.dropout,
                seed=s.seed,
            )
            load_module_arrays(local, weights)
            generator = torch.Generator().manual_seed(sample_seed(s.seed, r, k))
            torch.manual_seed(round_seed(s.seed, r, k))
            res = train_round(
                local, views[k], policies[k], o.sharing, tables[k], train_config_of(s), generator=generator
            )
            updates.append((module_arrays(local), res.num_samples))
        rec = {"round": r, "policies": [[p.kappa, list(p.probs)] for p in policies]}
        weights = aggregate(updates)
        rec["server_accuracy"] = test(r, list(weights.values()))[1]["accuracy"]
        if agent is not None:
            rec["reward"] = reward(rec["server_accuracy"], 0.0, o.target_accuracy, o.omega, 0.0, o.beta)
            step = agent.record(rec["reward"], agent.observe(weights, [u[0] for u in updates]))
            if step.action is not None:  # None: the episode ended
                policies = agent.policies(step.action)
        records.append(rec)
    return records, weights


@pytest.fixture(scope="module")
def reference(tmp_path_factory, shared_data):
    """3 rounds of FedGraph with the DDPG agent, a checkpoint after every round, every message recorded."""
    tmp = tmp_path_factory.mktemp("fedgraph")
    config = _config(shared_data, tmp, "full", **{"checkpoint-every": 1, "rounds": 4})
    _, proxies = run_inprocess(config, record=True)
    return config, tmp / "full", proxies


def test_flower_run_equals_the_in_process_composition(reference):
    """Same seed: the policies the agent chose for every client, the server's test accuracy, the rewards and the
    global weights after round 2 (the end of the first DDPG episode) equal the core composed by hand."""
    config, out, _ = reference
    want, weights = compose(config, 2)
    got = [r for r in read_run(out)["rounds"] if r["round"] >= 1]
    for a, b in zip(want, got[:2], strict=True):
        assert b["fedgraph"]["policies"] == a["policies"]
        assert b["fedgraph"]["server_accuracy"] == a["server_accuracy"]
        assert b["fedgraph"]["reward"] == a["reward"]
    assert got[1]["fedgraph"]["episode_return"] == pytest.approx(want[0]["reward"] + want[1]["reward"], abs=1e-12)
    ckpt = load_checkpoint(out / "checkpoints" / "round-000002.npz")
    saved = dict(zip(ckpt.strategy_state["bank"]["global_keys"], ckpt.arrays))
    assert list(saved) == list(weights)
    for key in weights:
        np.testing.assert_array_equal(saved[key], weights[key], err_msg=key)
    # round 3 starts a new episode from the initial model (Algorithm 4), and round 2 was evaluated separately
    assert got[2]["fedgraph"]["restarted"] is True and got[2]["fedgraph"]["episode"] == 2
    assert "fedgraph-exchange-eval" in got[1]["phases"]


@pytest.mark.parametrize("sharing", ["fedgraph", "nonshare"])
def test_fixed_policy_baselines_equal_the_composition(shared_data, tmp_path, sharing):
    """The fixed policy (kappa 64, p 0.5): the Flower run's policies and its weights after 2 rounds equal the
    composition's."""
    config = _config(
        shared_data,
        tmp_path,
        sharing,
        **{
            "fedgraph.agent": "fixed",
            "fedgraph.sharing": sharing,
            "fedgraph.batch-size": 64,
            "fedgraph.prob": 0.5,
            "rounds": 2,
            "checkpoint-every": 2,
        },
    )
    run_inprocess(config)
    want, weights = compose(config, 2)
    got = [r for r in read_run(tmp_path / sharing)["rounds"] if r["round"] >= 1]
    assert [r["fedgraph"]["policies"] for r in got] == [r["policies"] for r in want]
    assert all("server_accuracy" not in r["fedgraph"] for r in got)  # no agent: the server loads no test set
    ckpt = load_checkpoint(tmp_path / sharing)
    for key, value in zip(ckpt.strategy_state["bank"]["global_keys"], ckpt.arrays):
        np.testing.assert_array_equal(value, weights[key], err_msg=key)
    assert ("phases" in got[0]) == (sharing != "nonshare")  # nonShare exchanges nothing


def _sent_arrays(proxy):
    """Every array client ``proxy`` sent, decoded as the server decodes it: (message, array) pairs."""
    out = []
    for kind, ins, res in proxy.messages:
        if kind == "get_properties":
            props = dict(res.properties)
            out += [(f"phase {ins.config.get(wire.PHASE)}", a) for a in wire.unpack_arrays(props)]
            out += [
                (f"phase {ins.config.get(wire.PHASE)} value", np.frombuffer(v, np.uint8))
                for k, v in props.items()
                if isinstance(v, bytes) and not k.startswith("fg.")
            ]
        elif kind in ("fit", "get_parameters"):
            out += [(kind, a) for a in parameters_to_ndarrays(res.parameters)]
            for key, value in (getattr(res, "metrics", None) or {}).items():
                if key == msg.UPLOAD:
                    out += [("fit upload", a) for a in msg.parts_arrays(msg.unpack_parts(value))]
                elif isinstance(value, bytes):
                    out.append((f"fit metric {key}", np.frombuffer(value, np.uint8)))
    return out


def _contains_rows(array, rows, tol=1e-9):
    """Whether some row of a float array equals some row of ``rows`` (squared distance <= ``tol``: float32 rounding
    of the same product)."""
    a = np.asarray(array)
    if a.dtype.kind != "f" or a.ndim != 2 or a.shape[1] != rows.shape[1] or not len(a) or not len(rows):
        return False
    a, b = a.astype(np.float64), rows.astype(np.float64)
    for start in range(0, len(a), 256):
        chunk = a[start : start + 256]
        dist = (chunk**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2.0 * chunk @ b.T
        if (dist <= tol).any():
            return True
    return False


def _has_feature_row(array, x):
    """Whether some row of ``array`` is bit for bit a row of the features ``x`` (float32)."""
    a = np.asarray(array)
    if a.ndim != 2 or a.shape[1] != x.shape[1]:
        return False
    known = {row.tobytes() for row in np.ascontiguousarray(x, dtype=np.float32)}
    return any(row.tobytes() in known for row in np.ascontiguousarray(a, dtype=np.float32))


@pytest.mark.parametrize(
    "sharing,staleness,exchange",
    [
        ("fedgraph", "same-round", "round"),
        ("fedgraph", "one-round", "round"),
        ("fedgraph", "same-round", "iteration"),
        ("allshare", "same-round", "round"),
    ],
)
def test_what_clients_send_holds_no_raw_features_or_layer_1_inputs(
    reference, shared_data, tmp_path, sharing, staleness, exchange
):
    """Every array in every recorded client reply (phase replies, fit weights, the one-round rows in fit metrics; with
    the per-iteration exchange the requested ids and the rows of every iteration): no row of the client's features,
    no row of x W^(0) of its boundary nodes under any model it was sent or held during its local iterations
    (replayed from its messages); the rows it sent are exactly owner_rows of the model they were computed with.
    allShare is the control: there the check must find x W^(0)."""
    if (sharing, staleness, exchange) == ("fedgraph", "same-round", "round"):
        config, _, proxies = reference
    else:
        extra = {"fedgraph.sharing": sharing, "fedgraph.staleness": staleness, "fedgraph.exchange": exchange}
        config = _config(shared_data, tmp_path, "run", **extra, rounds=2)
        _, proxies = run_inprocess(config, record=True)
    s = parse_run_config(config)
    graphs = [client_graph_of(s, k) for k in range(K)]
    degrees = exchange_degrees(graphs)
    found_layer1 = checked_rows = 0
    for proxy in proxies:
        k = int(proxy.context.node_config["partition-id"])
        g = graphs[k]
        view = build_view(g, degrees[k])
        x = g.x.numpy()
        boundary = boundary_nodes(g)
        keys = list(build_model(g.num_features, g.num_classes).state_dict())
        models = [
            dict(zip(keys, parameters_to_ndarrays(ins.parameters))) for kind, ins, _ in proxy.messages if kind == "fit"
        ]
        requests = [
            wire.decode_phase(ins.config)
            for kind, ins, _ in proxy.messages
            if kind == "get_properties" and wire.PHASE in ins.config
        ]
        phase_models = [r.model for r in requests if r.model is not None]
        if exchange == "iteration":  # the weights it held between its local iterations, rebuilt by hand
            phase_models += [w for r in (1, 2) for w in replay(config, proxies, k, r)["weights"]]
        w0s = [m["convs.0.lin.weight"] for m in models + phase_models]
        layer1 = np.concatenate([x[boundary.numpy()] @ w.T for w in w0s])
        for where, array in _sent_arrays(proxy):
            assert not _has_feature_row(array, x), f"client {k} sent a feature row in {where}"
            if _contains_rows(array, layer1):
                assert sharing == "allshare", f"client {k} sent x W^(0) in {where}"
                found_layer1 += 1
        # the rows each owner sent are exactly h^(k) W^(k) of the model that came with the request
        for kind, ins, res in proxy.messages:
            if kind != "get_properties" or ins.config.get(wire.PHASE) != msg.ROWS:
                continue
            request = wire.decode_phase(ins.config)
            ask = msg.RowsRequest.decode(request.arrays, request.values)
            assert ask.sharing == sharing and (ask.conv == 1 or sharing == "allshare")
            if ask.conv > 0 and sharing == "allshare":
                continue  # needs the received conv-0 rows: covered by the composition tests
            model = build_model(g.num_features, g.num_classes)
            load_module_arrays(model, request.model)
            want = owner_rows(model, view, sharing, ask.conv, {})
            up = msg.RowsUpload.decode(wire.unpack_arrays(dict(res.properties)), wire.scalars(dict(res.properties)))
            for j, (ids, values) in up.parts.items():
                expect = want.select(ids)
                np.testing.assert_array_equal(values, expect.values)
                checked_rows += len(ids)
        # one-round: the rows riding on a fit reply are h^(1) W^(1) of the model the client just trained
        for kind, ins, res in proxy.messages:
            if kind != "fit" or msg.UPLOAD not in res.metrics:
                continue
            model = build_model(g.num_features, g.num_classes)
            load_module_arrays(model, dict(zip(module_arrays(model), parameters_to_ndarrays(res.parameters))))
            want = owner_rows(model, view, sharing, 1, {})
            for (conv, _j), (ids, values) in msg.unpack_parts(res.metrics[msg.UPLOAD]).items():
                assert conv == 1
                np.testing.assert_array_equal(values, want.select(ids).values)
                checked_rows += len(ids)
    assert checked_rows > 0
    assert (found_layer1 > 0) == (sharing == "allshare")


def test_one_round_staleness_delivers_last_rounds_rows(shared_data, tmp_path):
    """staleness=one-round: round 1 exchanges same-round; round 2 has no exchange phase, and every client's fit
    config carries exactly the rows the owners uploaded with their round-1 fit replies, routed to it."""
    config = _config(shared_data, tmp_path, "stale", **{"fedgraph.staleness": "one-round", "rounds": 2})
    _, proxies = run_inprocess(config, record=True)
    rounds = [r for r in read_run(tmp_path / "stale")["rounds"] if r["round"] >= 1]
    assert "fedgraph-exchange" in rounds[0]["phases"] and "fedgraph-exchange" not in rounds[1].get("phases", {})
    fits = {
        int(p.context.node_config["partition-id"]): [(i, r) for kind, i, r in p.messages if kind == "fit"]
        for p in proxies
    }
    for me in range(K):
        ins = fits[me][1][0]
        got = msg.unpack_parts(ins.config[msg.INBOX])
        sent = [msg.unpack_parts(fits[o][0][1].metrics[msg.UPLOAD]).get((1, me)) for o in range(K) if o != me]
        sent = [Rows(ids=i, values=v) for i, v in (p for p in sent if p is not None)]
        ids = np.concatenate([r.ids for r in sent])
        order = np.argsort(ids)
        np.testing.assert_array_equal(got[(1,)][0], ids[order])
        np.testing.assert_array_equal(got[(1,)][1], np.concatenate([r.values for r in sent])[order])
        assert msg.INBOX not in fits[me][0][0].config  # round 1: same-round rows from the exchange phase


@pytest.mark.parametrize("at", [2, 3], ids=["episode-boundary", "mid-episode"])
def test_resume_restores_the_agent_and_equals_uninterrupted(reference, tmp_path, at):
    """Resumed after round 2 (the first episode just ended: the next round restarts from the initial model) and
    after round 3 (mid-episode): the agent comes back whole (networks, targets, optimizers, replay buffer, noise,
    PCA), so every later record (policies, rewards, critic and actor losses) and the final model are the
    uninterrupted run's."""
    config, out, _ = reference
    ckpt = load_checkpoint(out / "checkpoints" / f"round-{at:06d}.npz")
    agent_state = ckpt.strategy_state["fedgraph"]["agent"]
    agent = DDPGAgent.from_state(agent_state["arrays"], agent_state["values"])
    assert len(agent.buffer) == at and agent.updates == at and agent.pca.fitted
    assert agent.episode == (1 if at == 2 else 2)
    resumed = {**config, "out-dir": str(tmp_path / "resumed"), "resume-from": str(ckpt.path)}
    run_inprocess(resumed)
    want = [r for r in read_run(out)["rounds"] if r["round"] > at]
    got = [r for r in read_run(tmp_path / "resumed")["rounds"] if r["round"] > at]
    assert [r["round"] for r in got] == list(range(at + 1, 5))
    assert_same_rounds(want, got, COSTS)
    for a, b in zip(load_checkpoint(out).arrays, load_checkpoint(tmp_path / "resumed").arrays, strict=True):
        np.testing.assert_array_equal(a, b)
    final = load_checkpoint(tmp_path / "resumed").strategy_state["fedgraph"]["agent"]["values"]
    assert final["updates"] == 4 and final["buffer"]["size"] == 4


def _fit_metrics(proxies, server_round):
    """What every client's fit reply of ``server_round`` carried, as the server received it: {partition: metrics}."""
    out = {}
    for proxy in proxies:
        for kind, ins, res in proxy.messages:
            if kind == "fit" and int(ins.config.get(wire.SERVER_ROUND, -1)) == server_round:
                out[int(proxy.context.node_config["partition-id"])] = dict(res.metrics)
    return out


def test_work_round_time_is_the_largest_reported_work_and_repeats_exactly(shared_data, tmp_path):
    """fedgraph.round-time=work: each round's delta is the largest forward multiply-adds (in billions) a client
    reported in its fit reply (read from the replies the server received), alpha is profiled from round 1's, and the
    reward is eq. 9 of them; with no clock in the reward, a second run chooses the same policies and earns the same
    rewards (with round-time=server, alpha profiled, it would not)."""
    runs = []
    for name in ("a", "b"):
        config = _config(
            shared_data, tmp_path, name, **{"fedgraph.alpha": -1.0, "fedgraph.round-time": "work", "rounds": 3}
        )
        _, proxies = run_inprocess(config, record=True)
        runs.append(([r for r in read_run(tmp_path / name)["rounds"] if r["round"] >= 1], proxies))
    rounds, proxies = runs[0]
    alpha = None
    for rec in rounds:
        info = rec["fedgraph"]
        reported = _fit_metrics(proxies, rec["round"])
        assert sorted(reported) == list(range(K))
        work = max(m[msg.FORWARD_MACS] for m in reported.values()) / 1e9
        assert 0 < work < 1 and info["max_gmacs"] == work
        assert info["slowest_client_s"] == max(m[msg.LOCAL_SECONDS] for m in reported.values())
        alpha = alpha if alpha is not None else 1.0 / work  # profiled on round 1: penalty 1 there (beta = 0)
        assert info["alpha"] == pytest.approx(alpha, rel=1e-12)
        assert info["reward"] == pytest.approx(reward(info["server_accuracy"], work, 0.8, 128.0, alpha, 0.0), abs=1e-12)
    # the policies differ between clients (the agent acts per client), so do the reported costs
    assert len({m[msg.FORWARD_MACS] for m in _fit_metrics(proxies, 1).values()}) == K
    again, _ = runs[1]
    assert [r["fedgraph"]["policies"] for r in again] == [r["fedgraph"]["policies"] for r in rounds]
    assert [r["fedgraph"]["reward"] for r in again] == [r["fedgraph"]["reward"] for r in rounds]


def test_agent_keys_reach_the_agent(shared_data, tmp_path):
    """fedgraph.agent-update=td3 and fedgraph.noise-min arrive in the server's agent (read back from the run's
    checkpoint), whose second critic is saved with it and restores."""
    config = _config(
        shared_data,
        tmp_path,
        "td3",
        **{"rounds": 2, "checkpoint-every": 1, "fedgraph.agent-update": "td3", "fedgraph.noise-min": 0.15},
    )
    run_inprocess(config)
    state = load_checkpoint(tmp_path / "td3" / "checkpoints" / "round-000002.npz").strategy_state["fedgraph"]["agent"]
    cfg = state["values"]["config"]
    assert (cfg["twin_critics"], cfg["policy_delay"], cfg["target_noise"], cfg["noise_min"]) == (True, 2, 0.2, 0.15)
    assert state["values"]["noise_std"] == pytest.approx(0.196)  # 0.2 x 0.98 after episode 1; the floor not yet
    agent = DDPGAgent.from_state(state["arrays"], state["values"])
    assert agent.critic2 is not None and agent.updates == 2
    assert any(k.startswith("critic2_target.") for k in state["arrays"])


@pytest.mark.parametrize("round_time,metric", [("work", msg.FORWARD_MACS), ("slowest-client", msg.LOCAL_SECONDS)])
def test_a_client_that_does_not_report_its_cost_is_an_error(round_time, metric):
    """The reward's time term comes from the clients' fit replies: one without the metric (a client that is not
    ours) is a clear error naming the client and the metric, not a silent 0 that drops eq. 9's time term."""
    strategy = FedGraphStrategy(
        FederationPolicy(num_clients=2, num_rounds=2),
        round_time=round_time,
        test_fn=lambda r, arrays: (0.0, {"accuracy": 0.5}),
    )
    strategy.agent = DDPGAgent(ActionSpace(num_clients=2), DDPGConfig(), seed=0)
    updates = [
        Update("0", [], 10, {msg.FORWARD_MACS: 5_000_000, msg.LOCAL_SECONDS: 0.1}),
        Update("1", [], 10, {msg.LOCAL_SECONDS: 0.1} if metric == msg.FORWARD_MACS else {msg.FORWARD_MACS: 5_000_000}),
    ]
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"fedgraph.round-time={round_time!r} needs every client's "
            f"{metric!r} metric in its fit reply; client(s) 1 sent none in "
            f"round 1"
        ),
    ):
        strategy.after_fit(1, updates)


BAD = [
    ({"fedgraph.sharing": "all"}, "unknown fedgraph.sharing 'all'; valid choices: fedgraph, allshare, nonshare"),
    (
        {"fedgraph.sampling": "sage"},
        "unknown fedgraph.sampling 'sage'; valid choices: fedgraph, full, graphsage, fastgcn",
    ),
    ({"fedgraph.agent": "ppo"}, "unknown fedgraph.agent 'ppo'; valid choices: ddpg, fixed"),
    (
        {"fedgraph.data": "kmeans"},
        "unknown fedgraph.data 'kmeans'; valid choices: synthesis, dirichlet, louvain, metis, random",
    ),
    (
        {"fedgraph.staleness": "two-round"},
        "unknown fedgraph.staleness 'two-round'; valid choices: same-round, one-round",
    ),
    ({"fedgraph.cut-norm": "none"}, "unknown fedgraph.cut-norm 'none'; valid choices: local, global"),
    (
        {"fedgraph.round-time": "wall"},
        "unknown fedgraph.round-time 'wall'; valid choices: server, slowest-client, work, parallel",
    ),
    ({"fedgraph.agent-update": "sac"}, "unknown fedgraph.agent-update 'sac'; valid choices: ddpg, td3"),
    ({"fedgraph.noise-min": -0.1}, "fedgraph.noise-min=-0.1: must be >= 0.0"),
    ({"fedgraph.var": -0.5}, "fedgraph.var=-0.5: must be >= 0.0"),
    ({"fedgraph.prob": 0.0}, "fedgraph.prob=0.0: must be in (0.0, 1.0]"),
    ({"fedgraph.batch-size": 0}, "fedgraph.batch-size=0: must be >= 1"),
    ({"fedgraph.target-accuracy": 1.5}, "fedgraph.target-accuracy=1.5: must be in [0.0, 1.0]"),
    ({"fedgraph.omega": 1.0}, "fedgraph.omega=1.0: must be > 1.0"),
    ({"fedgraph.alpha": -2.0}, "fedgraph.alpha=-2.0: must be >= -1.0"),
    ({"fedgraph.kappa-min": 600}, "fedgraph.kappa-min=600 exceeds fedgraph.kappa-max=512"),
    (
        {"fedgraph.sampling": "full"},
        "fedgraph.agent='ddpg' chooses FedGraph sampling policies, but "
        "fedgraph.sampling='full'; set fedgraph.agent='fixed' for the full baseline",
    ),
    ({"node.model": "gat"}, "method 'fedgraph' trains a GCN; got node.model='gat' (valid: node.model='gcn')"),
    ({"fraction-fit": 0.5}, "fraction-fit=0.5: FedGraph needs every client in every round"),
    (
        {"aggregator": "median"},
        "aggregator='median': FedGraph aggregates by eq. 8 (weighted by mini-batch size); "
        "valid with it: aggregator='mean'",
    ),
    (
        {"secure-agg": "secagg+"},
        "secure-agg='secagg+' gives the server only the sum of whole updates of one global "
        "model, but method 'fedgraph' declares update_kind='weights', model_scope='global' and "
        "updates that cannot be summed; valid with this method: secure-agg='none'",
    ),
    ({"dp": "local"}, "dp='local' would cover the training updates only, not the embedding rows"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[next(iter(e)) + "=" + str(next(iter(e.values()))) for e, _ in BAD])
def test_bad_settings_name_the_value_and_the_valid_choices(extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_run_config({**BASE, **extra})


def test_presets_hold_the_paper_setting():
    from pathlib import Path

    from flowergraph.settings import load_preset

    conf = Path(__file__).resolve().parents[1] / "conf"
    quick = parse_run_config(load_preset(conf / "fedgraph-cora.toml"))
    paper = parse_run_config(load_preset(conf / "fedgraph-cora-paper.toml"))
    for s in (quick, paper):
        o, n = s.of("fedgraph"), s.of("node")
        assert (s.method, s.dataset, o.sharing, o.sampling, o.agent, o.data) == (
            "fedgraph",
            "Cora",
            "fedgraph",
            "fedgraph",
            "ddpg",
            "synthesis",
        )
        assert (n.model, n.hidden, n.layers, n.dropout, o.lr, o.omega, o.pca_components) == (
            "gcn",
            16,
            2,
            0.5,
            0.01,
            128.0,
            20,
        )
    assert paper.num_clients == 20 and paper["fedgraph.episode-rounds"] == 30 and paper.rounds >= 300
    assert quick.num_clients < 20 and quick.rounds <= 60


@pytest.mark.parametrize(
    "preset, counts",
    [
        ("fedgraph-cora.toml", [1208, 500, 1000]),
        ("fedgraph-cora-paper.toml", [1208, 500, 1000]),
        ("fedgraph-citeseer.toml", [1827, 500, 1000]),
    ],
)
def test_presets_use_fastgcns_full_supervised_split(shared_data, preset, counts):
    """The presets split as FastGCN does (the paper's batch 256 is FastGCN's): 500 validation and 1000 test nodes,
    every other node for training, disjoint, for every seed."""
    from pathlib import Path

    from flowergraph.settings import load_preset
    from flowergraph.tasks.federated_graph import GraphSpec, load_global_graph

    values = load_preset(Path(__file__).resolve().parents[1] / "conf" / preset)
    for seed in (0, 1):
        data = load_global_graph(
            GraphSpec(dataset=values["dataset"], data_dir=str(shared_data), split=values["node.split"], seed=seed)
        )
        masks = torch.stack([data.train_mask, data.val_mask, data.test_mask])
        assert masks.sum(dim=1).tolist() == counts
        assert int(masks.sum(dim=0).max()) == 1 and sum(counts) == data.num_nodes  # disjoint, every node


@pytest.mark.simulation
def test_three_clients_three_rounds_through_flowers_simulation(reference, tmp_path):
    """3 SuperNodes, 3 rounds in Flower's simulation engine, inline (messages serialised, phases as get_properties,
    client
    state in context.state): the agent's policies and the server's accuracies equal the in-process run's."""
    from flowergraph.simulation import run_simulation

    config, out, _ = reference
    overrides = {k: v for k, v in config.items() if k not in ("method", "num-clients", "rounds", "state-dir")}
    overrides.update({"out-dir": str(tmp_path / "sim"), "checkpoint-every": 0, "simulation-engine": "inline"})
    result = run_simulation("fedgraph", num_clients=K, rounds=3, overrides=overrides, timeout=600)
    assert result.ok, result.log_file.read_text()[-3000:]
    want = [r for r in read_run(out)["rounds"] if 1 <= r["round"] <= 3]
    got = [r for r in read_run(tmp_path / "sim")["rounds"] if r["round"] >= 1]
    assert [r["round"] for r in got] == [1, 2, 3]
    for a, b in zip(want, got, strict=True):
        # the ServerApp process sums the agent's float32 layers in its own thread setting: probabilities agree to
        # ~1e-8, not bit for bit (the in-process tests compare bit for bit)
        assert [k for k, _ in b["fedgraph"]["policies"]] == [k for k, _ in a["fedgraph"]["policies"]]
        np.testing.assert_allclose(
            [p for _, p in b["fedgraph"]["policies"]], [p for _, p in a["fedgraph"]["policies"]], rtol=0, atol=1e-6
        )
        assert b["fedgraph"]["server_accuracy"] == pytest.approx(a["fedgraph"]["server_accuracy"], abs=1e-6)
        assert b.get("accuracy") == pytest.approx(a.get("accuracy"), abs=1e-6)
