"""Per-client persistent state (flowergraph.clients.ClientState) and its files at checkpoints."""

import numpy as np
import pytest
import torch
from flwr.app import RecordDict

from flowergraph import wire as protocol
from flowergraph.clients import ClientState, NoOpClient, StateCheckpoints
from flowergraph.clients.state import state_file
from flowergraph.errors import CheckpointError


def test_arrays_and_values_of_one_name_live_side_by_side():
    state = ClientState(RecordDict())
    state.set_arrays("w", {"a": np.arange(3, dtype=np.int64), "b": np.eye(2, dtype=np.float32)})
    state.set_values("w", {"step": 3, "name": "x", "betas": [0.9, 0.999], "nested": {"k": [1, 2]}, "raw": b"\x00\x01"})
    arrays, values = state.get_arrays("w"), state.get_values("w")
    np.testing.assert_array_equal(arrays["a"], [0, 1, 2])
    assert arrays["b"].dtype == np.float32
    assert values == {"step": 3, "name": "x", "betas": [0.9, 0.999], "nested": {"k": [1, 2]}, "raw": b"\x00\x01"}
    assert state.names() == ["w"] and "w" in state and state.get_arrays("nothing") is None
    state.delete("w")
    assert state.names() == [] and state.get_values("w") is None


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def _step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()


def test_module_and_adam_moments_survive_a_fresh_object_exactly():
    """A client object is re-created for every message: a fresh model + Adam loaded from the state must take
    exactly the step the uninterrupted pair takes."""
    x, y = torch.randn(8, 4, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1] * 4)
    ref = _model(0)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.05, betas=(0.8, 0.95), weight_decay=1e-3)
    for _ in range(3):
        _step(ref, ref_opt, x, y)
    state = ClientState(RecordDict())
    state.save_module("m", ref)
    state.save_optimizer("adam", ref_opt)
    _step(ref, ref_opt, x, y)  # the uninterrupted fourth step

    fresh = _model(7)  # other initial weights: they must be overwritten
    opt = torch.optim.Adam(fresh.parameters(), lr=0.05, betas=(0.8, 0.95), weight_decay=1e-3)
    assert state.load_module("m", fresh) and state.load_optimizer("adam", opt)
    assert opt.param_groups[0]["betas"] == (0.8, 0.95)
    _step(fresh, opt, x, y)
    for a, b in zip(fresh.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not ClientState().load_module("m", fresh) and not ClientState().load_optimizer("adam", opt)


def test_partial_module_state_and_shape_errors():
    state = ClientState()
    model = _model(0)
    state.save_module("head", model, keys=["2.weight", "2.bias"])
    assert sorted(state.get_arrays("head")) == ["2.bias", "2.weight"]
    other = _model(1)
    before = other[0].weight.detach().clone()
    state.load_module("head", other)
    torch.testing.assert_close(other[2].weight, model[2].weight)
    torch.testing.assert_close(other[0].weight, before)  # the rest is untouched
    state.set_arrays("bad", {"2.weight": np.zeros((5, 5), np.float32)})
    with pytest.raises(ValueError, match=r"entry '2.weight' has shape \(2, 3\), got \(5, 5\)"):
        state.load_module("bad", other)
    with pytest.raises(KeyError, match="the module has no state entries"):
        state.save_module("x", model, keys=["nope"])


def test_rng_state_round_trip():
    state = ClientState()
    torch.manual_seed(5)
    state.save_rng("rng")
    a = torch.rand(3)
    state.load_rng("rng")
    torch.testing.assert_close(torch.rand(3), a)


def test_files_round_trip_and_bad_files_are_named(tmp_path):
    state = ClientState()
    state.set_arrays("w", {"a": np.arange(4.0)})
    state.set_values("w", {"k": 1, "blob": b"xyz"})
    state.records.metric_records["m"] = __import__("flwr.app", fromlist=["MetricRecord"]).MetricRecord({"acc": 0.5})
    path = state.write(tmp_path / "s.npz", partition_id=2, run_tag="t", server_round=4)
    other = ClientState()
    other.set_arrays("stale", {"x": np.zeros(1)})  # replaced, not merged
    header = other.read(path, partition_id=2, run_tag="t")
    assert header["server_round"] == 4 and other.names() == ["w"]
    np.testing.assert_array_equal(other.get_arrays("w")["a"], np.arange(4.0))
    assert other.get_values("w") == {"k": 1, "blob": b"xyz"} and dict(other.records.metric_records["m"]) == {"acc": 0.5}
    with pytest.raises(CheckpointError, match=rf"client state file '{path}' belongs to partition_id=2, not 3"):
        ClientState().read(path, partition_id=3)
    with pytest.raises(CheckpointError, match="does not exist"):
        ClientState().read(tmp_path / "missing.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"client state file '{path}' is corrupt \(BadZipFile"):
        ClientState().read(path)


def test_checkpoint_phases_write_and_read_the_node_state(tmp_path):
    records = RecordDict()
    state = ClientState(records)
    state.set_arrays("private", {"w": np.full(3, 7.0)})
    node = StateCheckpoints(NoOpClient([], 1), state, partition_id=1, state_dir=tmp_path)
    reply = node.get_properties(protocol.phase_message(protocol.STATE_SAVE, server_round=6, run_tag="abc"))
    expected = state_file(tmp_path, "abc", 1, 6)
    assert reply == {"partition_id": 1, "path": str(expected), "records": "private", protocol.ARRAY_COUNT: 0}
    assert expected == tmp_path / "abc" / "partition-1" / "round-000006.npz" and expected.is_file()
    state.set_arrays("private", {"w": np.zeros(3)})  # the run moves on ...
    node.get_properties(protocol.phase_message(protocol.STATE_LOAD, server_round=6, run_tag="abc"))
    np.testing.assert_array_equal(ClientState(records).get_arrays("private")["w"], np.full(3, 7.0))
    assert node.get_properties({}) == {"partition_id": 1}  # everything else goes to the inner client
    with pytest.raises(CheckpointError, match="round-000005.npz' does not exist"):
        node.get_properties(protocol.phase_message(protocol.STATE_LOAD, server_round=5, run_tag="abc"))


def test_the_client_checkpoints_part_saves_and_restores_clients_without_a_strategy(tmp_path):
    """flowergraph.strategies.ClientCheckpoints over a PhaseRunner alone: every client saves its state under the
    run's tag, a client that cannot is listed as missing, the record survives state_dict, and a restore brings
    every client's state back."""
    from flwr.common import Code, GetPropertiesRes, Status
    from flwr.server.client_proxy import ClientProxy

    from flwr.server.client_manager import SimpleClientManager

    from flowergraph.app.loop import LegacyNodes, node_of
    from flowergraph.strategies import ClientCheckpoints, ClientDirectory, PhaseRunner

    class Proxy(ClientProxy):
        def __init__(self, cid, node):
            super().__init__(cid)
            self.node = node

        def get_properties(self, ins, timeout, group_id):
            if self.node is None:
                raise RuntimeError("disk full")
            return GetPropertiesRes(Status(Code.OK, ""), self.node.get_properties(dict(ins.config)))

        get_parameters = fit = evaluate = reconnect = None

    states = [ClientState(RecordDict()) for _ in range(2)]
    for k, state in enumerate(states):
        state.set_arrays("private", {"w": np.full(2, float(k))})
    proxies = [
        Proxy(f"n{k}", StateCheckpoints(NoOpClient([], k), state, partition_id=k, state_dir=tmp_path))
        for k, state in enumerate(states)
    ] + [Proxy("n2", None)]
    directory = ClientDirectory(3)
    directory.partition_of.update({"n0": 0, "n1": 1, "n2": 2})
    manager = SimpleClientManager()
    for proxy in proxies:
        manager.register(proxy)
    nodes = LegacyNodes(manager)  # the legacy face: a get_properties call per client
    runner = PhaseRunner(directory)
    runner.federation = nodes
    part = ClientCheckpoints(runner, run_tag="tag")
    proxies = [node_of(p) for p in proxies]
    saved = part.save(4, proxies, timeout=None)
    assert saved == {
        "round": 4,
        "run_tag": "tag",
        "missing": ["2"],
        "files": {"0": str(state_file(tmp_path, "tag", 0, 4)), "1": str(state_file(tmp_path, "tag", 1, 4))},
    }
    resumed = ClientCheckpoints(runner)
    resumed.load_state_dict(part.state_dict())
    assert resumed.run_tag == "tag" and resumed.last == saved and not resumed.restored
    for state in states:
        state.set_arrays("private", {"w": np.zeros(2)})
    resumed.restore(proxies[:2], timeout=None)
    assert resumed.restored
    for k, state in enumerate(states):
        np.testing.assert_array_equal(state.get_arrays("private")["w"], np.full(2, float(k)))


def test_node_local_arrays_keep_context_state_small_and_checkpoints_whole(tmp_path):
    """Large arrays written once (FedGCN's received rows) live in a node-local file named by their digest; the
    node state, which simulation and deployment serialise with every message, holds only the digest and path. A
    checkpoint embeds them: restored on a node whose local file is gone, the arrays come back exactly."""
    from flwr.app import Context
    from flwr.common.serde import context_to_proto

    rng = np.random.default_rng(0)
    big = {"rows": np.arange(50_000, dtype=np.int64), "sums": rng.random((50_000, 8), dtype=np.float32)}
    state = ClientState(RecordDict(), local_dir=tmp_path / "local")
    path = state.set_local_arrays("fedgcn", big)
    assert path.parent == tmp_path / "local" and path.is_file()
    assert state.set_local_arrays("fedgcn", dict(big)) == path  # same content, same file: written once
    assert "fedgcn" in state and state.names() == ["fedgcn"] and state.get_arrays("fedgcn") is None
    got = state.get_local_arrays("fedgcn")
    assert set(got) == {"rows", "sums"} and all(np.array_equal(got[k], big[k]) for k in big)
    context = Context(run_id=1, node_id=1, node_config={}, state=state.records, run_config={})
    assert context_to_proto(context).ByteSize() < 2_000  # the arrays are 2 MB; the state carries a reference

    checkpoint = state.write(tmp_path / "ckpt.npz", partition_id=0)
    path.unlink()  # another node (or a cleaned state-dir) resumes from the checkpoint alone
    fresh = ClientState(RecordDict(), local_dir=tmp_path / "elsewhere")
    with pytest.raises(CheckpointError, match="does not exist on this machine"):
        ClientState(state.records, local_dir=tmp_path / "local").get_local_arrays("fedgcn")
    fresh.read(checkpoint, partition_id=0)
    again = fresh.get_local_arrays("fedgcn")
    assert all(np.array_equal(again[k], big[k]) for k in big)
    assert (tmp_path / "elsewhere" / path.name).is_file()

    other = ClientState(RecordDict(), local_dir=tmp_path / "local")
    other.set_local_arrays("fedgcn", {"rows": np.arange(3)})
    (tmp_path / "elsewhere" / path.name).write_bytes(
        (tmp_path / "local").joinpath(next(p.name for p in (tmp_path / "local").iterdir())).read_bytes()
    )  # another array set under this name
    with pytest.raises(CheckpointError, match="does not hold the arrays 'fedgcn' stored"):
        fresh.get_local_arrays("fedgcn")
    fresh.delete("fedgcn")
    assert fresh.names() == [] and fresh.get_local_arrays("fedgcn") is None
