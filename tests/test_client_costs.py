"""What a client message costs besides its training maths (issue 91: per-client fixed costs at 1,000 clients): each
shortcut gives what the long way gives, and a changed input takes the long way again."""

import math

import numpy as np
import pytest
import torch

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, RecordDict

from flowergraph.app.inline import RunConfigMemo, wire_context
from flowergraph.tasks.compute import seed_torch


# ------------------------------------------------------------------------------------------------ seed_torch
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, 2**63 - 1])
def test_seed_torch_draws_what_manual_seed_draws(seed):
    torch.manual_seed(seed)
    want = (torch.rand(5), torch.randn(3, 2), torch.nn.functional.dropout(torch.ones(16), 0.5, True))
    torch.manual_seed(12345)  # something else first: seed_torch must reset it
    torch.rand(3)
    seed_torch(seed)
    got = (torch.rand(5), torch.randn(3, 2), torch.nn.functional.dropout(torch.ones(16), 0.5, True))
    for a, b in zip(want, got):
        assert torch.equal(a, b)


def test_seed_torch_leaves_the_same_generator_state():
    torch.manual_seed(99)
    want = torch.get_rng_state()
    seed_torch(99)
    assert torch.equal(torch.get_rng_state(), want)


# ------------------------------------------------------------------------------------- the inline context trip
def _context(run_config, state=None, series_id=0):
    state = state if state is not None else RecordDict({"c": ConfigRecord({"n": 3})})
    return Context(
        run_id=5,
        node_id=11,
        node_config={"partition-id": 1, "num-partitions": 4},
        state=state,
        run_config=run_config,
        series_id=series_id,
    )


def _same(a: Context, b: Context) -> None:
    assert (a.run_id, a.node_id, a.series_id) == (b.run_id, b.node_id, b.series_id)
    assert a.node_config == b.node_config
    assert list(a.run_config.items()) == list(b.run_config.items())
    assert [type(v) for v in a.run_config.values()] == [type(v) for v in b.run_config.values()]
    assert list(a.state.keys()) == list(b.state.keys())


def test_wire_context_with_memo_equals_the_full_trip():
    memo = RunConfigMemo()
    state = RecordDict({"c": ConfigRecord({"n": 3}), "w": ArrayRecord({"a": Array(np.arange(4.0))})})
    ctx = _context({"rounds": 3, "lr": 0.5, "name": "x", "flag": True}, state, series_id=2)
    full = wire_context(ctx, None)
    first = wire_context(ctx, memo)  # stores the config
    second = wire_context(ctx, memo)  # from the memo
    for got in (first, second):
        _same(full, got)
        assert got.run_config is not ctx.run_config and got.state is not ctx.state
        np.testing.assert_array_equal(got.state["w"]["a"].numpy(), np.arange(4.0))
        assert int(got.state["c"]["n"]) == 3
    second.run_config["rounds"] = 99  # a client's (forbidden) write reaches neither the memo nor the next trip
    assert wire_context(ctx, memo).run_config["rounds"] == 3


def test_wire_context_memo_keys_on_value_and_type():
    memo = RunConfigMemo()
    for value in (1, True, 1.0, "1", 2):
        got = wire_context(_context({"k": value}), memo)
        assert got.run_config["k"] == value and type(got.run_config["k"]) is type(value)
    nan = wire_context(_context({"k": math.nan}), memo).run_config["k"]
    assert math.isnan(nan)


def test_wire_context_memo_is_bounded_and_skips_unkeyable_configs():
    memo = RunConfigMemo(size=2)
    for i in range(5):
        wire_context(_context({"k": i}), memo)
    assert len(memo._wired) == 2
    with pytest.raises(Exception):  # protobuf refuses a list: refused every time, never memoised
        wire_context(_context({"k": [1, 2]}), memo)
    assert RunConfigMemo.key({"k": [1, 2]}) is None


# ------------------------------------------------------------------------------------ .npy bytes, header memo
ARRAYS = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array(3.5),
    np.array(7, dtype=np.int64),
    np.zeros((0,), dtype=np.float64),
    np.zeros((2, 0, 3), dtype=np.float32),
    np.array([True, False, True]),
    np.arange(6, dtype=np.int32).reshape(2, 3).T,  # Fortran order: Flower's own path
    np.arange(10, dtype=np.float64)[::2],  # not contiguous: Flower's own path
    np.arange(4, dtype=">f4"),  # big-endian
    np.array([1 + 2j], dtype=np.complex64),
    np.array(["ab", "c"]),  # a string dtype: Flower's own path
    np.random.default_rng(0).normal(size=(5, 7, 2)).astype(np.float16),
]


@pytest.mark.parametrize("values", ARRAYS, ids=range(len(ARRAYS)))
def test_npy_fast_paths_equal_flowers(values):
    from flowergraph.wire.npy import from_numpy, to_numpy

    want = Array(values)
    got = from_numpy(values)
    assert (got.dtype, tuple(got.shape), got.stype, got.data) == (want.dtype, tuple(want.shape), want.stype, want.data)
    for _ in range(2):  # the second time from the header memo
        back = to_numpy(want)
        ref = want.numpy()
        assert back.dtype == ref.dtype and back.shape == ref.shape
        np.testing.assert_array_equal(back, ref)
        assert back.flags.writeable
    back[...] = 0 if back.size else back  # the copy is the caller's: the record's bytes stay as they were
    np.testing.assert_array_equal(want.numpy(), values)


def test_npy_fast_path_falls_back_on_odd_bytes():
    from flowergraph.wire.npy import to_numpy

    good = Array(np.arange(4, dtype=np.float32))
    short = Array(dtype=good.dtype, shape=good.shape, stype=good.stype, data=good.data[:-4])
    with pytest.raises(Exception):  # what numpy.load says about a truncated array, as before
        to_numpy(short)
    longer = Array(dtype=good.dtype, shape=good.shape, stype=good.stype, data=good.data + b"\0" * 4)
    np.testing.assert_array_equal(to_numpy(longer), longer.numpy())
    other = Array(dtype="float32", shape=(4,), stype="torch.raw", data=b"\0" * 16)
    with pytest.raises(TypeError):
        to_numpy(other)


# ------------------------------------------------------------------------------- graph task: evaluation batches
def _graph_data(seed: int, n: int = 9):
    from torch_geometric.data import Data

    from flowergraph.tasks.graphcls.data import ClientGraphData

    g = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(n):
        nodes = 3 + i % 4
        src = torch.arange(nodes - 1)
        edge_index = torch.stack([torch.cat([src, src + 1]), torch.cat([src + 1, src])])
        x, s = torch.randn(nodes, 5, generator=g), torch.randn(nodes, 4, generator=g)
        graphs.append(Data(x=x, s=s, edge_index=edge_index, y=torch.tensor([i % 2])))
    return ClientGraphData(0, "t", "t", tuple(graphs[:3]), tuple(graphs[3:6]), tuple(graphs[6:]), 5, 2, 4)


def test_eval_batches_equal_the_loaders_and_are_rebuilt_for_new_data():
    from torch_geometric.loader import DataLoader

    from flowergraph.tasks.graphcls.training import eval_batches

    data = _graph_data(0)
    first = eval_batches(data, "val", 2)
    assert eval_batches(data, "val", 2) is first  # kept
    assert eval_batches(data, "val", 3) is not first  # another batch size: its own
    want = list(DataLoader(list(data.val), batch_size=2, shuffle=False))
    assert len(first) == len(want)
    for a, b in zip(first, want):
        for key in ("x", "s", "edge_index", "y", "batch"):
            assert torch.equal(a[key], b[key])
    other = _graph_data(1)  # other data: never the first one's batches
    assert not torch.equal(eval_batches(other, "val", 2)[0].x, first[0].x)


def test_evaluate_with_kept_batches_equals_a_fresh_process():
    from flowergraph.tasks.graphcls import training
    from flowergraph.tasks.graphcls.models import build_graph_model

    data = _graph_data(2)
    model = build_graph_model("decoupled", 5, 2, 4, hidden=8, layers=2, seed=0)
    training._EVAL_BATCHES.clear()
    fresh = training.evaluate(model, data)
    again = training.evaluate(model, data)  # from the kept batches
    assert fresh == again
    assert id(data) in training._EVAL_BATCHES
    key = id(data)
    del data
    import gc

    gc.collect()
    assert key not in training._EVAL_BATCHES  # dropped with the data


# ----------------------------------------------------------------------------------------- RunSettings.of memo
def test_settings_of_is_found_once_and_handed_out_fresh():
    from flowergraph.settings import parse_run_config

    s = parse_run_config({"method": "fedavg", "num-clients": 4, "node.hidden": 24}, allow_unknown=True)
    first = s.of("node")
    assert first.hidden == 24
    first.hidden = 99  # a caller's change stays its own
    again = s.of("node")
    assert again.hidden == 24 and again is not first
    assert vars(again) == {k[5:].replace("-", "_"): v for k, v in s.as_dict().items() if k.startswith("node.")}
    other = parse_run_config({"method": "fedavg", "num-clients": 4, "node.hidden": 8}, allow_unknown=True)
    assert other.of("node").hidden == 8  # per settings object


def _decoupled_forward_as_before(model, data):
    """DecoupledGIN.forward with every GCN layer normalising the adjacency itself (the code before the shortcut)."""
    import torch.nn.functional as F
    from torch_geometric.nn import global_add_pool

    from flowergraph.tasks.graphcls.models import adjacency

    edge_index = adjacency(data)
    h, g = model.feat_in(data.x), model.struct_in(data.s)
    for gin, gcn in zip(model.feat_convs, model.struct_convs):
        h = F.dropout(F.relu(gin(torch.cat([h, g], dim=-1), edge_index)), model.dropout, model.training)
        g = torch.tanh(gcn(g, edge_index))
    z = global_add_pool(model.pool_fc(torch.cat([h, g], dim=-1)), data.batch)
    z = F.dropout(F.relu(model.fc(z)), model.dropout, model.training)
    return F.log_softmax(model.out(z), dim=-1)


@pytest.mark.parametrize("train", [False, True])
def test_decoupled_gin_shared_normalisation_is_exact(train):
    from torch_geometric.loader import DataLoader

    from flowergraph.tasks.graphcls.models import _shared_gcn_norm, build_graph_model

    data = _graph_data(3, n=12)
    batch = next(iter(DataLoader(list(data.train + data.val + data.test), batch_size=12)))
    model = build_graph_model("decoupled", 5, 2, 4, hidden=8, layers=3, seed=0)
    model.train(train)
    outs, grads = [], []
    for forward in (model, lambda b: _decoupled_forward_as_before(model, b)):
        model.zero_grad()
        seed_torch(4)
        out = forward(batch)
        out.sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.equal(outs[0], outs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    handle = model.struct_convs[1].register_forward_hook(lambda *a: None)  # a hook: every layer called as before
    assert _shared_gcn_norm(model.struct_convs, batch.edge_index, torch.zeros(batch.num_nodes, 8)) is None
    handle.remove()
    assert _shared_gcn_norm(model.struct_convs, batch.edge_index, torch.zeros(batch.num_nodes, 8)) is not None


# ------------------------------------------------------------------------------------------- polling's share
def test_an_expensive_poll_is_followed_by_a_proportionally_longer_pause(monkeypatch):
    import time

    from flowergraph.app import polling
    from flowergraph.app.polling import PollingGrid, poll_pause

    assert poll_pause(0.01, 0.05) == pytest.approx(0.19)
    assert poll_pause(0.0) == 0.0

    class Meta:
        def __init__(self, i):
            self.reply_to_message_id = i

    class Reply:
        def __init__(self, i):
            self.metadata = Meta(i)

        def has_error(self):
            return False

    class SlowGrid:  # every pull burns ~5 ms of CPU; the reply comes on the third
        pulls = 0

        def push_messages(self, messages):
            return ["m0"]

        def pull_messages(self, ids):
            SlowGrid.pulls += 1
            end = time.thread_time() + 0.005
            while time.thread_time() < end:
                pass
            return [Reply("m0")] if SlowGrid.pulls >= 3 else []

    sleeps = []
    monkeypatch.setattr(polling.time, "sleep", sleeps.append)
    replies = PollingGrid(SlowGrid(), min_interval=0.002, max_interval=0.01).send_and_receive(["x"])
    assert len(replies) == 1 and len(sleeps) == 2
    assert all(s >= 19 * 0.005 * 0.99 for s in sleeps)  # polling kept to 5 % of the wait, above max_interval
    with pytest.raises(ValueError):
        PollingGrid(SlowGrid(), poll_share=0)


def test_state_keys_are_the_state_dicts_listed_once_per_model(monkeypatch):
    from flowergraph.clients.node import state_keys
    from flowergraph.tasks.models import build_node_model

    model = build_node_model(in_dim=5, num_classes=3, seed=0, kind="gcn")
    other = build_node_model(in_dim=5, num_classes=3, seed=0, kind="gcn", layers=3)
    calls = []
    real = torch.nn.Module.state_dict

    def counted(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    want = list(real(model))
    monkeypatch.setattr(torch.nn.Module, "state_dict", counted)
    assert list(state_keys(model)) == want and list(state_keys(model)) == want
    assert list(state_keys(other)) == list(real(other)) and len(state_keys(other)) > len(want)
    assert [c for c in calls if c is model or c is other] == [model, other]  # once per model object
