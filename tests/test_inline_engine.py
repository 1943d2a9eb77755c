"""The inline simulation engine (flowergraph.app.inline): Flower's engine, grid and link state with a backend that
runs the ClientApp in this process. These tests run tiny Message-API apps in the test process (no torch, no
Ray; ~1 s each) to show that every boundary is serialised and that the run config is the run's; the guard test
that compares a flowergraph run on it with the same run through Ray is in tests/test_simulation.py."""

import numpy as np
import pytest

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from flowergraph.app.inline import InlineBackend, run_inline
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config

PYPROJECT = """[project]
name = "x"
version = "0.1.0"
license = "Apache-2.0"
dependencies = []

[tool.flwr.app]
publisher = "test"

[tool.flwr.app.components]
serverapp = "x:server"
clientapp = "x:client"

[tool.flwr.app.config]
rounds = 3
greeting = "hello"
"""


@pytest.fixture
def app_dir(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    return tmp_path


def _apps(seen: dict):
    """A ServerApp that sends every node ``rounds`` messages with an array and a counter in context.state kept by
    the client; the client doubles the array IN PLACE and replies with it."""
    server, client = ServerApp(), ClientApp()

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        arr = msg.content["arrays"]["w"]
        values = arr.numpy()  # a fresh array from the message's bytes: writable, and shared with nothing
        values *= 2.0
        msg.content["arrays"]["w"] = Array(values)  # replaces the array in the record it received
        if "count" not in context.state:
            context.state["count"] = ConfigRecord({"n": 0})
        record = context.state["count"]
        record["n"] = int(record["n"]) + 1
        seen.setdefault("client_run_config", dict(context.run_config))
        seen.setdefault("partitions", set()).add(int(context.node_config["partition-id"]))
        return Message(
            RecordDict(
                {"arrays": msg.content["arrays"], "m": ConfigRecord({"n": record["n"], "node": context.node_id})}
            ),
            reply_to=msg,
        )

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        seen["server_run_config"] = dict(context.run_config)
        nodes = sorted(grid.get_node_ids())
        seen["counts"] = {n: [] for n in nodes}
        original = np.arange(4, dtype=np.float32)
        for _ in range(int(context.run_config["rounds"])):
            record = ArrayRecord({"w": Array(original)})
            messages = [Message(RecordDict({"arrays": record}), dst_node_id=n, message_type="train") for n in nodes]
            replies = list(grid.send_and_receive(messages, timeout=60))
            for reply in replies:
                assert not reply.has_error(), reply.error
                m = reply.content["m"]
                seen["counts"][int(m["node"])].append(int(m["n"]))
                seen.setdefault("replied", []).append(reply.content["arrays"]["w"].numpy())
            seen.setdefault("server_copy", []).append(record["w"].numpy())  # what the server still holds
        seen["original_after"] = original.copy()

    return server, client


class _Unwired(InlineBackend):
    """The same backend without the serialisation: the ClientApp gets the engine's own objects."""

    def process_message(self, message, context):
        self.messages += 1
        return self.app_fn()(message=message, context=context), context


@pytest.mark.simulation
def test_every_boundary_is_serialised_and_state_persists_per_node(app_dir):
    seen: dict = {}
    server, client = _apps(seen)
    backend = InlineBackend()
    run_inline(server, client, num_supernodes=3, app_dir=app_dir, backend=backend)
    _assert_isolated(seen, backend)
    # the check fails without the serialisation: the client's change reaches the server's record
    unwired: dict = {}
    server, client = _apps(unwired)
    run_inline(server, client, num_supernodes=3, app_dir=app_dir, backend=_Unwired())
    with pytest.raises(AssertionError):
        _assert_isolated(unwired, backend)


def _assert_isolated(seen, backend):
    assert backend.messages == 9  # 3 nodes x 3 rounds, each through the ClientApp once
    # the client doubled its copy in place; the server's record and array are untouched
    for got in seen["replied"]:
        np.testing.assert_array_equal(got, np.arange(4, dtype=np.float32) * 2)
    for held in seen["server_copy"]:
        np.testing.assert_array_equal(held, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(seen["original_after"], np.arange(4, dtype=np.float32))
    # context.state: each node has its own counter, carried from message to message (1, 2, 3)
    assert len(seen["counts"]) == 3 and all(c == [1, 2, 3] for c in seen["counts"].values())
    assert seen["partitions"] == {0, 1, 2}


@pytest.mark.simulation
def test_the_run_config_is_the_apps_defaults_with_the_runs_overrides(app_dir):
    seen: dict = {}
    server, client = _apps(seen)
    run_inline(server, client, num_supernodes=2, app_dir=app_dir, overrides={"rounds": 1, "greeting": "hi"})
    want = {"rounds": 1, "greeting": "hi"}
    assert seen["server_run_config"] == want and seen["client_run_config"] == want
    assert all(c == [1] for c in seen["counts"].values())  # rounds=1 reached the ServerApp


@pytest.mark.simulation
def test_a_key_the_app_does_not_declare_is_refused_as_flwr_run_refuses_it(app_dir):
    seen: dict = {}
    server, client = _apps(seen)
    with pytest.raises(ValueError, match="'round' is not present"):
        run_inline(server, client, num_supernodes=2, app_dir=app_dir, overrides={"round": 1})
    assert not seen  # nothing ran


@pytest.mark.simulation
def test_a_client_that_stores_an_unserialisable_value_fails_its_message(app_dir):
    """What a deployment would refuse (a Python object in context.state) fails here too, and the server sees an
    error reply, as from a Ray actor."""
    server, client = ServerApp(), ClientApp()
    errors = []

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        context.state.__dict__.setdefault("_extra", []).append(object())  # not a record: never travels
        context.state["bad"] = ConfigRecord({"ok": 1})
        return Message(RecordDict({"m": ConfigRecord({"state_keys": ",".join(context.state.keys())})}), reply_to=msg)

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        node = sorted(grid.get_node_ids())[0]
        for _ in range(2):
            (reply,) = grid.send_and_receive(
                [Message(RecordDict(), dst_node_id=node, message_type="train")], timeout=60
            )
            errors.append(reply.error if reply.has_error() else reply.content["m"]["state_keys"])

    run_inline(server, client, num_supernodes=1, app_dir=app_dir)
    assert errors == ["bad", "bad"]  # the record persisted; the attribute did not survive serialisation


@pytest.mark.simulation
def test_the_extractor_asks_the_link_state_about_the_nodes_pushed_to_only(app_dir, monkeypatch):
    """A push wakes Flower's extractor for the nodes it pushed to, and each look-up checks only the messages pushed
    to that node: every message is checked once (by the state's own check) and the state's whole-store scan is
    never run (Flower's own extractor asked about every node on every pass, each look-up scanning the whole message
    store: a round grew with the square of the clients). Several messages to one node in one push all arrive, in
    push order per node and in node order across nodes, as Flower's passes take them."""
    from flwr.server.superlink.linkstate.in_memory_linkstate import InMemoryLinkState

    from flowergraph import _flower

    checked: list[str] = []
    scans: list[int] = []
    real_take = _flower.take_message_ins
    real_scan = InMemoryLinkState.get_message_ins

    def take(state, node_id, message_ids, limit):
        taken, rest = real_take(state, node_id, message_ids, limit)
        checked.extend(message_ids[: len(message_ids) - len(rest)])  # the ones looked at
        return taken, rest

    def scan(self, node_id, limit, **kwargs):
        scans.append(node_id)
        return real_scan(self, node_id, limit, **kwargs)

    monkeypatch.setattr(_flower, "take_message_ins", take)
    monkeypatch.setattr(InMemoryLinkState, "get_message_ins", scan)
    order: list[tuple[int, int]] = []
    server, client = ServerApp(), ClientApp()

    @client.train()
    def train(msg: Message, context: Context) -> Message:
        order.append((int(context.node_config["partition-id"]), int(msg.content["m"]["i"])))
        return Message(RecordDict(), reply_to=msg)

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        nodes = sorted(grid.get_node_ids(), key=lambda n: order_of[n])
        for _ in range(3):  # three rounds, one message to every node each
            messages = [
                Message(RecordDict({"m": ConfigRecord({"i": 0})}), dst_node_id=n, message_type="train") for n in nodes
            ]
            assert all(not r.has_error() for r in grid.send_and_receive(messages, timeout=60))
        # two messages to each of two nodes in one push, the later node first
        two = [
            Message(RecordDict({"m": ConfigRecord({"i": i})}), dst_node_id=n, message_type="train")
            for n in (nodes[4], nodes[1])
            for i in (1, 2)
        ]
        assert len(list(grid.send_and_receive(two, timeout=60))) == 4

    order_of: dict[int, int] = {}
    real_register = __import__("flwr.server.superlink.fleet.vce.vce_api", fromlist=["_"])._register_nodes

    def register(**kwargs):
        mapping = real_register(**kwargs)
        order_of.update(mapping)
        return mapping

    monkeypatch.setattr("flwr.server.superlink.fleet.vce.vce_api._register_nodes", register)
    backend = InlineBackend()
    run_inline(server, client, num_supernodes=30, app_dir=app_dir, backend=backend)
    assert backend.messages == 3 * 30 + 4
    assert not scans  # the extractor never scanned the store
    assert len(checked) == len(set(checked)) == 3 * 30 + 4  # each message pushed checked once
    assert order[:90] == [(k, 0) for k in range(30)] * 3
    assert order[-4:] == [(1, 1), (4, 1), (1, 2), (4, 2)]  # node order in a pass, push order within a node


def test_an_unknown_engine_is_refused_naming_the_valid_choices(tmp_path, capsys, launcher_main):
    with pytest.raises(
        ConfigError,
        match=r"unknown simulation-engine 'inlined'; valid choices: ray, inline; "
        r"did you mean 'inline'\?",
    ):
        parse_run_config({"simulation-engine": "inlined"})
    assert launcher_main(["--out", str(tmp_path / "x"), "--set", "simulation-engine=threads"]) == 2
    assert "error: unknown simulation-engine 'threads'; valid choices: ray, inline" in capsys.readouterr().err
    assert not (tmp_path / "x" / "flower.log").exists()


@pytest.mark.parametrize("faults", ["exit:1@1", "raise:0@1,hang:2@2"])
def test_faults_that_kill_or_stall_a_process_are_refused_inline(tmp_path, capsys, launcher_main, faults):
    bad = faults.split(",")[-1]
    assert (
        launcher_main(
            ["--out", str(tmp_path / "x"), "--set", "simulation-engine=inline", "--set", f"inject-faults={faults}"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"inject-faults={faults!r}: {bad} would kill or stall the one process" in err
    assert "use simulation-engine='ray'" in err
    assert not (tmp_path / "x" / "flower.log").exists()
    # the same plan is fine through Ray, and the faults that only break a message are fine inline
    parse_run_config({"inject-faults": faults})
    parse_run_config({"simulation-engine": "inline", "inject-faults": "raise:1@1,nan:0@2,shape:2@1"})
