"""The node worker (flowergraph.app.worker): a deployment's messages run in one warm process per node (and app
code), the runs of that app one after another, with the same replies, state and errors as in their own process,
and the worker cleans up after itself."""

import os
import time

import psutil
import pytest
from flwr.app import Context, Message, RecordDict
from flwr.common import GetPropertiesIns
from flwr.compat.common import recorddict_compat as compat
from flwr.supercore.task_identity import TaskIdentity

from flowergraph import wire
from flowergraph.app import worker
from flowergraph.errors import ConfigError

RUN_CONFIG = {"method": "fedavg", "num-clients": 3, "rounds": 2, "node.synthetic-nodes": 300}


def _identity_message(node_id: int, message_id: str, run_id: int = 11) -> Message:
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, node_id
    content = compat.getpropertiesins_to_recorddict(GetPropertiesIns(config=dict(wire.IDENTITY_REQUEST)))
    message = Message(content, dst_node_id=node_id, message_type="get_properties")
    message.metadata.__dict__["_message_id"] = message_id
    return message


def _context(node_id: int, partition_id, run_id: int = 11) -> Context:
    return Context(
        run_id=run_id,
        node_id=node_id,
        node_config={"partition-id": partition_id, "num-partitions": 3},
        state=RecordDict(),
        run_config=dict(RUN_CONFIG),
    )


def test_messages_run_in_one_warm_worker_that_ends_when_idle(monkeypatch):
    monkeypatch.setenv(worker.IDLE_ENV, "3")
    monkeypatch.setenv("FLOWERGRAPH_MESSAGE_TIMES", os.devnull)  # the worker reports where its time went
    node = 4242
    pids, builds = [], []
    for k, (run_id, partition) in enumerate([(11, 1), (11, 1), (12, 2)]):  # a second run of the app: partition 2
        reply, times = worker.handle(_identity_message(node, f"m{k}", run_id), _context(node, partition, run_id))
        res = compat.recorddict_to_getpropertiesres(reply.content)
        assert res.properties[wire.PARTITION_ID] == partition
        assert reply.metadata.reply_to_message_id == f"m{k}"
        pids.append(worker.handle.last_pid)
        builds.append(times)
    assert pids[0] == pids[1] == pids[2] != os.getpid()  # one worker for the node, every run; not this process
    assert max(builds[1]["imports_s"], builds[2]["imports_s"]) < 0.05 < builds[0]["imports_s"]  # imported once
    # a message the client refuses raises here, as it would in its own process; the worker goes on
    with pytest.raises(ConfigError, match=r"flowergraph refused the run: partition-id=7 out of range \[0, 2\]"):
        worker.handle(_identity_message(node, "bad"), _context(node, 7))
    assert worker.handle.last_pid == pids[0]
    key = worker.worker_key(node)
    assert worker._connect(worker.address(key)) is not None
    deadline = time.monotonic() + 60
    while psutil.pid_exists(pids[0]) and time.monotonic() < deadline:  # idle for 3 s: it ends
        if psutil.Process(pids[0]).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.2)
    assert worker._connect(worker.address(key)) is None, "the idle worker is still listening"
    assert not [p for p in worker.workers_dir().iterdir() if p.name.startswith(key)]  # its files are gone


def test_a_worker_is_used_only_under_flowers_clientapp_process(monkeypatch):
    monkeypatch.setattr("sys.argv", ["/venv/bin/flwr-clientapp", "--token", "x"])
    assert worker.enabled()
    monkeypatch.setenv(worker.ENV, "off")
    assert not worker.enabled()
    monkeypatch.delenv(worker.ENV)
    monkeypatch.setattr("sys.argv", ["pytest"])  # the simulation's Ray actors are warm already
    assert not worker.enabled()


def test_a_message_api_clientapps_handlers_are_answered_by_the_nodes_worker(monkeypatch):
    """A user's Message-API ClientApp registering flowergraph's handlers (examples/message_api_app) gets the node
    worker too: under flwr-clientapp the handler's message is answered in the warm worker (not this process), with
    the reply the handler gives in-process; with the worker turned off it is answered here."""
    from flwr.app import ConfigRecord

    from flowergraph.app import message_client
    from flowergraph.app import message_records as rec

    monkeypatch.setenv(worker.IDLE_ENV, "3")
    node = 4343

    def identity(message_id: str) -> Message:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 11, node
        content = RecordDict({rec.CONFIG: ConfigRecord(dict(wire.IDENTITY_REQUEST))})
        message = Message(content, dst_node_id=node, message_type=rec.IDENTITY)
        message.metadata.__dict__["_message_id"] = message_id
        return message

    def properties(reply: Message) -> dict:
        return dict(reply.content.config_records[rec.CONFIG])

    here = message_client.query(identity("here"), _context(node, 2))  # pytest: no worker
    worker.handle.last_pid = None
    monkeypatch.setattr("sys.argv", ["/venv/bin/flwr-clientapp", "--token", "x"])
    there = message_client.query(identity("there"), _context(node, 2))
    assert worker.handle.last_pid not in (None, os.getpid())  # a worker answered it
    assert properties(there) == properties(here) and properties(there)[wire.PARTITION_ID] == 2
    assert there.metadata.reply_to_message_id == "there"
    monkeypatch.setenv(worker.ENV, "off")
    worker.handle.last_pid = None
    off = message_client.query(identity("off"), _context(node, 2))
    assert worker.handle.last_pid is None and properties(off) == properties(here)
