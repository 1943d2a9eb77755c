"""The phase mechanism: phase messages on the wire, per-client instructions, bounded parallelism, the failure
policy, byte accounting and records (flowergraph.strategies.phases, flowergraph.wire)."""

import re
import threading
import time

import numpy as np
import pytest
from flwr.common import Code, GetPropertiesRes, Status
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy

from flowergraph import wire as protocol
from flowergraph.wire import PhaseRequest
from flowergraph.clients import FlowergraphClient
from flowergraph.strategies import (
    ClientDirectory,
    FederationPolicy,
    PhaseError,
    PhaseMessage,
    PhaseRunner,
    WeightedAveraging,
    check_update,
)
from flowergraph.strategies.common import config_bytes
from flowergraph.app.loop import LegacyNodes, LegacyStrategy, node_of


class EchoClient(FlowergraphClient):
    """Answers phase 'echo': returns its arrays doubled and a value."""

    def __init__(self, pid, delay=0.0, fail=None):
        self.partition_id, self.delay, self.fail = pid, delay, fail

    def phase_handlers(self):
        def echo(request: PhaseRequest):
            time.sleep(self.delay)
            if self.fail:
                raise RuntimeError(self.fail)
            extra = {"round": request.round}
            if request.model is not None:  # a model sent with the message: its names and the sum of its values
                extra["model"] = ",".join(request.model) + f"={sum(float(a.sum()) for a in request.model.values())}"
            return [2 * a for a in request.arrays], {"seen": request.values["x"], "pid": self.partition_id, **extra}

        return {"test.echo": echo}


class Proxy(ClientProxy):
    """Delivers get_properties to a client, counting concurrent calls."""

    active = 0
    peak = 0
    lock = threading.Lock()

    def __init__(self, cid, client):
        super().__init__(cid)
        self.client = client
        self.sent = []

    def get_properties(self, ins, timeout, group_id):
        with Proxy.lock:
            Proxy.active += 1
            Proxy.peak = max(Proxy.peak, Proxy.active)
        try:
            self.sent.append((dict(ins.config), group_id))
            props = self.client.get_properties(dict(ins.config))
            return GetPropertiesRes(Status(Code.OK, ""), props)
        finally:
            with Proxy.lock:
                Proxy.active -= 1

    get_parameters = fit = evaluate = reconnect = None


def _runner(clients, max_parallel=16):
    directory = ClientDirectory(len(clients))
    proxies = [Proxy(f"n{k}", c) for k, c in enumerate(clients)]
    manager = SimpleClientManager()
    for p, c in zip(proxies, clients):
        directory.partition_of[p.cid] = c.partition_id
        manager.register(p)
    runner = PhaseRunner(directory, max_parallel=max_parallel)
    runner.federation = LegacyNodes(manager, max_parallel)  # the legacy face: a get_properties call per client
    runner.proxies = proxies
    return runner, [node_of(p) for p in proxies]


def test_wire_format_round_trip_and_reserved_keys():
    arrays = [np.arange(5, dtype=np.int64), np.ones((2, 3), np.float16), np.zeros(0, np.float32)]
    config = protocol.phase_message("m.k", arrays, server_round=3, x=1.5, name="n", blob=b"ab")
    assert config[protocol.PHASE] == "m.k" and config[protocol.PHASE_ROUND] == 3 and config[protocol.ARRAY_COUNT] == 3
    back = protocol.unpack_arrays(config)
    assert [a.dtype for a in back] == [np.int64, np.float16, np.float32] and back[1].shape == (2, 3)
    assert protocol.scalars(config) == {"x": 1.5, "name": "n", "blob": b"ab"}
    with pytest.raises(ValueError, match="phase values may not use the reserved prefix 'fg.'"):
        protocol.phase_message("m.k", **{"fg.x": 1})
    with pytest.raises(ValueError, match="phase message announces 2 arrays but lacks 'fg.a1'"):
        protocol.unpack_arrays({protocol.ARRAY_COUNT: 2, "fg.a0": config["fg.a0"]})


def test_per_client_messages_replies_and_byte_accounting():
    clients = [EchoClient(k) for k in range(4)]
    runner, proxies = _runner(clients)
    seen = []
    phase = runner.begin("test-phase", server_round=7, timeout=5)
    replies = phase.send(
        "test.echo",
        proxies,
        lambda p: PhaseMessage([np.full(3, int(p.cid[1:]))], {"x": p.cid}),
        on_reply=lambda r: seen.append(r.client),
    )
    record = phase.end(extra=1)
    assert [r.client for r in replies] == ["0", "1", "2", "3"] and sorted(seen) == ["0", "1", "2", "3"]
    for k, r in enumerate(replies):
        np.testing.assert_array_equal(r.arrays[0], np.full(3, 2 * k))
        assert r.values == {"partition_id": k, "seen": f"n{k}", "pid": k, "round": 7}
    for p in runner.proxies:  # the round travels as the message's group and in the config
        ((config, group),) = p.sent
        assert group == 7 and config[protocol.PHASE_ROUND] == 7
    down = sum(config_bytes(c) for p in runner.proxies for c, _ in p.sent)
    up = sum(config_bytes(p.client.get_properties(c)) for p in runner.proxies for c, _ in p.sent)
    assert (record["bytes_down"], record["bytes_up"], record["messages"]) == (down, up, 4)
    assert record["phase"] == "test-phase" and record["round"] == 7 and record["extra"] == 1
    assert record["time_s"] > 0 and record["failures"] == []


def test_a_phase_message_carries_a_model_to_the_handler():
    """The server may send each client a model with a phase message (its current model, by name); the handler
    receives exactly those arrays under those names."""
    runner, proxies = _runner([EchoClient(0), EchoClient(1)])
    models = {"n0": {"w": np.ones((2, 2), np.float32), "b": np.arange(3.0)}, "n1": {"w": np.full(4, 0.5)}}
    replies = runner.begin("m", server_round=2).send(
        "test.echo", proxies, lambda p: PhaseMessage(values={"x": 1}, model=models[p.cid])
    )
    assert [r.values["model"] for r in replies] == ["w,b=7.0", "w=2.0"]
    config = protocol.phase_message("k", [], 1, model={"a.b": np.zeros(2), "c": np.ones(1)})
    request = protocol.decode_phase(config)
    assert list(request.model) == ["a.b", "c"] and request.round == 1 and request.values == {}
    assert protocol.decode_phase(protocol.phase_message("k")).model is None


def test_old_style_handlers_are_refused_naming_the_phase_request():
    """0.3 removed the phase-handler signature ``(arrays, values)``: such a handler is refused with a TypeError
    naming the one it must have (one PhaseRequest), instead of being called with the wrong arguments."""

    class Old(FlowergraphClient):
        partition_id = 3

        def phase_handlers(self):
            return {
                "old.k": lambda arrays, values: ([a + 1 for a in arrays], {"got": values["v"]}),
                "new.k": lambda request: ([a + 1 for a in request.arrays], {"got": request.values["v"]}),
            }

    with pytest.raises(
        TypeError,
        match=re.escape(
            "phase handler for 'old.k' takes (arrays, values); a phase handler takes one flowergraph.wire.PhaseRequest "
            "(its .arrays, .values, .round, .model): def handler(request) -> (arrays, values) (0.3 removed the old "
            "signature)"
        ),
    ):
        Old().get_properties(protocol.phase_message("old.k", [np.zeros(2)], 4, v=9))
    props = Old().get_properties(protocol.phase_message("new.k", [np.zeros(2)], 4, v=9))
    assert props["got"] == 9 and props[protocol.PARTITION_ID] == 3
    np.testing.assert_array_equal(protocol.unpack_arrays(props)[0], np.ones(2))


def test_parallelism_is_bounded():
    Proxy.peak = 0
    runner, proxies = _runner([EchoClient(k, delay=0.05) for k in range(6)], max_parallel=2)
    runner.begin("p").send("test.echo", proxies, PhaseMessage(values={"x": 1}))
    assert Proxy.peak == 2
    Proxy.peak = 0
    runner.begin("p").send("test.echo", proxies, PhaseMessage(values={"x": 1}), max_parallel=6)
    assert Proxy.peak > 2


def test_failure_policy():
    clients = [EchoClient(0), EchoClient(1, fail="disk on fire"), EchoClient(2)]
    runner, proxies = _runner(clients)
    with pytest.raises(PhaseError, match=r"^p \(test.echo\): client 1 \(node n1\) failed: disk on fire$"):
        runner.begin("p").send("test.echo", proxies, PhaseMessage(values={"x": 1}))
    phase = runner.begin("p")
    replies = phase.send("test.echo", proxies, PhaseMessage(values={"x": 1}), require_all=False)
    assert [r.client for r in replies] == ["0", "2"]
    assert phase.end()["failures"] == [{"client": "1", "message": "test.echo", "reason": "disk on fire"}]
    refusing = [EchoClient(0, fail="flowergraph refused the run: node config x='y': bad")]
    runner, proxies = _runner(refusing)
    with pytest.raises(RuntimeError, match=r"^p: client 0 \(node n0\) flowergraph refused the run: node config"):
        runner.begin("p").send("test.echo", proxies, PhaseMessage(values={"x": 1}), require_all=False)


def test_client_side_answers_name_unknown_phases():
    with pytest.raises(ValueError, match=r"this client does not answer phase 'test.nope'; valid phases: test.echo"):
        EchoClient(0).get_properties(protocol.phase_message("test.nope"))
    with pytest.raises(ValueError, match="this client does not answer phase 'x'; valid phases: none"):
        FlowergraphClient().get_properties(protocol.phase_message("x"))


def test_a_strategy_phase_before_every_round_is_recorded_in_the_round(tmp_path):
    from flowergraph.storage.results import RunRecorder, read_run

    class WithPhase(WeightedAveraging):  # the core, run on the legacy stack by the adapter below
        def before_fit(self, server_round, clients, client_manager):
            phase = self.phases.begin("echo-phase", server_round)
            phase.send("test.echo", clients, PhaseMessage([np.ones(2)], {"x": server_round}))
            self.book.add_phase(phase.end())

    manager = SimpleClientManager()
    proxies = [Proxy(f"n{k}", EchoClient(k)) for k in range(2)]
    for p in proxies:
        manager.register(p)
    recorder = RunRecorder(tmp_path, {}, log=None)
    s = LegacyStrategy(
        WithPhase(
            FederationPolicy(num_clients=2, num_rounds=1),
            initial_parameters=[np.zeros(2, np.float32)],
            recorder=recorder,
        )
    )
    from flwr.common import ndarrays_to_parameters

    ins = s.configure_fit(1, ndarrays_to_parameters([np.zeros(2, np.float32)]), manager)
    assert len(ins) == 2
    s.finish()
    (row,) = read_run(tmp_path)["rounds"]
    phase = row["phases"]["echo-phase"]
    assert phase["messages"] == 2 and phase["bytes_up"] > 0
    assert row["bytes_up"] == phase["bytes_up"]  # the phase's bytes count in the round's totals
    assert row["bytes_down"] > phase["bytes_down"]  # plus the fit instructions
    assert check_update([np.zeros(2, np.float32)], [np.zeros(2, np.float32)]) is None


class WindowGrid:
    """A Message-API grid whose nodes answer a query by echoing its values, one reply per pull: it records the
    most messages ever awaiting a reply and how many a pull may still return."""

    def __init__(self, stall: set[int] = frozenset()):
        self.waiting: dict[str, object] = {}
        self.peak = 0
        self.pushed = 0
        self.stall = stall  # node ids that never answer

    def push_messages(self, messages):
        ids = []
        for m in messages:
            mid = f"m{self.pushed}"
            self.pushed += 1
            self.waiting[mid] = m
            ids.append(mid)
        self.peak = max(self.peak, len(self.waiting))
        return ids

    def pull_messages(self, ids):
        from flowergraph.app import message_records as rec

        for mid in ids:
            m = self.waiting.get(mid)
            if m is not None and m.metadata.dst_node_id not in self.stall:
                del self.waiting[mid]
                reply = type("Reply", (), {})()
                reply.metadata = type("M", (), {"reply_to_message_id": mid})()
                reply.content = rec.values_content({"echo": int(m.metadata.dst_node_id)})
                reply.has_error = lambda: False
                return [reply]
        return []


def test_the_message_api_keeps_at_most_max_parallel_queries_in_flight_and_builds_each_when_a_place_frees(monkeypatch):
    """GridNodes.query (the Message-API face of a phase): with max_parallel=3, never more than 3 messages await a
    reply, and a lazy request is built only when one of them has been answered, so the server holds at most 3
    large messages (FedGCN's downloads at 1M nodes); every node still gets its reply, in arrival order. With
    None, all are pushed at once. A node that never answers fails with NoReply after ``timeout``."""
    from flwr.supercore.task_identity import TaskIdentity

    from flowergraph.app.message_server import GridNodes, NoReply
    from flowergraph.strategies import Node

    for attribute, value in (("_task_id", 1), ("_run_id", 1), ("_node_id", 0)):  # what a ServerApp process has set
        monkeypatch.setattr(TaskIdentity, attribute, value)
    grid = WindowGrid()
    built, answered = [], []

    def requests():
        for k in range(1, 11):
            assert len(built) - len(answered) < 3, (built, answered)  # a place is free before the next is built
            built.append(k)
            yield Node(k), {"x": np.full(4, k, dtype=np.float32)}

    for node, values in GridNodes(grid).query(requests(), timeout=5.0, group_id=1, max_parallel=3):
        answered.append(node.node_id)
        assert values["echo"] == node.node_id
    assert sorted(answered) == list(range(1, 11)) and grid.peak == 3

    grid = WindowGrid()
    out = list(GridNodes(grid).query(((Node(k), {"x": 1}) for k in range(1, 11)), 5.0, 1, None))
    assert len(out) == 10 and grid.peak == 10

    grid = WindowGrid(stall={2})
    started = time.monotonic()
    out = dict((n.node_id, v) for n, v in GridNodes(grid).query([(Node(k), {"x": 1}) for k in (1, 2, 3)], 0.3, 1, 2))
    assert isinstance(out[2], NoReply) and str(out[2]) == "node 2 sent no reply within 0.3 s"
    assert out[1] == {"echo": 1} and out[3] == {"echo": 3} and time.monotonic() - started < 3


def test_the_legacy_face_builds_a_lazy_request_only_when_a_worker_frees():
    """LegacyNodes.query draws a lazy request list as its thread pool frees: at most max_parallel built and not
    yet answered (the same bound as the Message API's)."""
    Proxy.peak = 0
    runner, proxies = _runner([EchoClient(k, delay=0.05) for k in range(6)], max_parallel=2)
    built, done = [], []

    def requests():
        for p in proxies:
            assert len(built) - len(done) < 2
            built.append(p.cid)
            yield p, protocol.phase_message("test.echo", x=1)

    for node, props in runner.federation.query(requests(), None, 0, 2):
        done.append(node.cid)
        assert props["seen"] == 1
    assert len(done) == 6 and Proxy.peak == 2
