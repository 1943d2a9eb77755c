"""Fault injection, failures named by client, and bad input (run config and node config), without Flower's
processes: unit tests and in-process federations (flowergraph/inprocess.py). Through Flower's Ray simulation:
test_reliability_simulation.py; on a real deployment: test_deployment.py."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, RecordDict
from flwr.common import Code, GetPropertiesRes, Status
from flwr.server.client_manager import SimpleClientManager

from flowergraph.app.loop import LegacyNodes  # the legacy face: a ClientManager as the core's nodes
from flwr.server.client_proxy import ClientProxy

from flowergraph import wire as protocol
from flowergraph.app import node_client as client_app
from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.clients.faults import FaultInjectingClient, InjectedFault
from flowergraph.clients.node import NodeClassificationClient
from flowergraph.settings import parse_run_config
from flowergraph.errors import ConfigError, DatasetUnavailableError, KeyFileError
from flowergraph.settings.faults import Fault, parse_faults
from flowergraph.storage.results import read_run
from flowergraph.strategies.common import weighted_average
from flowergraph.strategies.weighted import WeightedAveraging, failure_reason
from flowergraph.tasks.federated_graph import GraphSpec, PartitionSpec, client_graph
from flowergraph.tasks.training import TrainConfig

from flowergraph.app.inprocess import run_inprocess
from flowergraph.strategies import FederationPolicy

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ the plan
def test_fault_plan_parses():
    assert parse_faults("raise:1@2, nan:0@3,shape:2@1,EXIT:1@4", num_clients=3, rounds=4) == (
        Fault(1, 2, "shape"),
        Fault(2, 1, "raise"),
        Fault(3, 0, "nan"),
        Fault(4, 1, "exit"),
    )
    assert parse_faults("") == () and parse_faults("  ") == ()


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            "boom:1@2",
            "inject-faults: unknown fault kind 'boom' in 'boom:1@2'; valid choices: raise, nan, shape, exit, hang",
        ),
        (
            "raise:1",
            "inject-faults: entry 'raise:1' is not kind:partition@round (e.g. 'raise:1@2'); valid kinds: raise, "
            "nan, shape, exit, hang",
        ),
        ("raise:x@2", "inject-faults: partition 'x' in 'raise:x@2' is not an integer"),
        ("raise:1@two", "inject-faults: round 'two' in 'raise:1@two' is not an integer"),
        (
            "raise:3@2",
            "inject-faults: partition 3 in 'raise:3@2' is out of range; valid partitions: [0, 2] (num-clients=3)",
        ),
        ("nan:0@5", "inject-faults: round 5 in 'nan:0@5' is out of range; valid rounds: [1, 4] (rounds=4)"),
        ("nan:0@0", "inject-faults: round 0 in 'nan:0@0' is out of range; valid rounds: [1, 4] (rounds=4)"),
        (
            "nan:0@1,raise:0@1",
            "inject-faults: partition 0 has two faults in round 1 ('nan:0@1' and 'raise:0@1'); give "
            "one per partition and round",
        ),
        (
            "nan:0@1,,raise:1@2",
            "inject-faults='nan:0@1,,raise:1@2': empty entry; expected kind:partition@round entries",
        ),
    ],
)
def test_bad_fault_plans_are_named(spec, message):
    with pytest.raises(ConfigError) as info:
        parse_run_config({"num-clients": 3, "rounds": 4, "inject-faults": spec})
    assert message in str(info.value)


# ------------------------------------------------------------------------------------------------ the wrapper
SYN = GraphSpec(dataset="synthetic", seed=1)
PART = PartitionSpec(partitioner="louvain", num_clients=3, seed=1)


def _inner(pid=1):
    return NodeClassificationClient(client_graph(SYN, PART, pid), TrainConfig(), {"kind": "gcn"}, seed=2)


def test_wrapper_misbehaves_only_in_its_rounds():
    inner = _inner()
    params = inner.get_parameters({})
    wrapped = FaultInjectingClient(_inner(), {2: "raise", 3: "nan", 4: "shape", 5: "hang"}, 1, hang_seconds=0.01)
    assert wrapped.get_properties({})["partition_id"] == 1
    for a, b in zip(wrapped.get_parameters({}), params):
        np.testing.assert_array_equal(a, b)
    # round 1: exactly what the inner client does
    ref, n_ref, m_ref = inner.fit(params, {"server_round": 1})
    got, n, m = wrapped.fit(params, {"server_round": 1})
    assert n == n_ref and m == m_ref
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(InjectedFault, match="injected fault 'raise' at partition 1 in round 2"):
        wrapped.fit(params, {"server_round": 2})
    nan, _, _ = wrapped.fit(params, {"server_round": 3})
    assert [a.shape for a in nan] == [a.shape for a in params] and all(np.isnan(a).all() for a in nan)
    bad, _, _ = wrapped.fit(params, {"server_round": 4})
    shapes = [a.shape for a in params]
    assert [a.shape for a in bad] == [(shapes[0][0] - 1, *shapes[0][1:]), *shapes[1:]]
    slow, _, _ = wrapped.fit(params, {"server_round": 5})  # hang: late, then a normal answer
    ref5, _, _ = inner.fit(params, {"server_round": 5})
    for a, b in zip(slow, ref5):
        np.testing.assert_array_equal(a, b)
    loss, n_test, metrics = wrapped.evaluate(params, {"server_round": 2})  # evaluation is never faulted
    assert (loss, n_test, metrics) == inner.evaluate(params, {"server_round": 2})


def test_method_phase_messages_are_never_faulted():
    from flowergraph.methods.fedgcn.client import FedGCNClient

    inner = FedGCNClient(client_graph(SYN, PART, 0), TrainConfig(), seed=0, hops=2, state=RecordDict())
    wrapped = FaultInjectingClient(inner, {1: "raise"}, 0)
    # phases travel as get_properties messages, which are never faulted
    reply = wrapped.get_properties(protocol.phase_message("fedgcn.upload", server_round=1, hops=2))
    assert reply["partition_id"] == 0 and len(protocol.unpack_arrays(reply)) >= 3


def test_exit_fault_kills_the_process_without_a_reply():
    code = (
        "from flowergraph.clients.faults import FaultInjectingClient\n"
        "from flowergraph.clients.node import NoOpClient\n"
        "c = FaultInjectingClient(NoOpClient([], 0), {2: 'exit'}, 0)\n"
        "c.fit([], {'server_round': 1}); print('round 1 ok', flush=True)\n"
        "c.fit([], {'server_round': 2}); print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 17 and proc.stdout == "round 1 ok\n", proc.stderr
    assert "injecting fault 'exit' at partition 0 in round 2" in proc.stderr


# ------------------------------------------------------------------------------------------------ failures named


class Silent(ClientProxy):
    def __init__(self, cid, pid=None, error=None):
        super().__init__(cid)
        self.pid, self.error = pid, error

    def get_properties(self, ins, timeout, group_id):
        if self.error:
            raise ValueError(self.error)
        return GetPropertiesRes(
            status=Status(Code.OK, ""), properties={} if self.pid is None else {"partition_id": self.pid}
        )

    get_parameters = fit = evaluate = reconnect = None


def test_identity_names_partitions_and_refuses_duplicates():
    s = WeightedAveraging(FederationPolicy(num_clients=3))
    manager = SimpleClientManager()
    for proxy in (Silent("9", 0), Silent("4", 2), Silent("7")):
        manager.register(proxy)
    assert s.identify_clients(LegacyNodes(manager)) == {"9": 0, "4": 2}
    assert s.client_label(Silent("9")) == "0" and s.client_label(Silent("7")) == "node 7"
    manager.register(Silent("5", 2))
    with pytest.raises(
        RuntimeError,
        match=r"nodes 4, 5 all hold partition-id=2; give each SuperNode its own "
        r"partition-id in 0..2",
    ):
        WeightedAveraging(FederationPolicy(num_clients=3)).identify_clients(LegacyNodes(manager))


def test_a_client_refusing_the_run_fails_it_with_its_reason():
    s = WeightedAveraging(FederationPolicy(num_clients=2))
    manager = SimpleClientManager()
    manager.register(Silent("1", 0))
    manager.register(
        Silent(
            "2",
            error="Message contains an Error (reason: <class 'X'>:<'\nException "
            "ClientAppException occurred. Message: flowergraph refused the run: node "
            "config partition-id='abc': expected an integer'>). It originated during "
            "client-side execution of a message.",
        )
    )
    with pytest.raises(
        RuntimeError,
        match=r"^client node 2 flowergraph refused the run: node config "
        r"partition-id='abc': expected an integer$",
    ):
        s.identify_clients(LegacyNodes(manager))


@pytest.mark.parametrize(
    "text,reason",
    [
        (
            "Message contains an Error (reason: Error: Message Unavailable - The requested message could not be found "
            "in the database. It may have expired due to its TTL ...).",
            "no reply in time (the message expired after round-timeout, or its node left the federation)",
        ),
        (
            "Message contains an Error (reason: <class 'ray.exceptions.ActorDiedError'>:<'The actor died ...'>)",
            "the client's process died (Ray: ActorDiedError)",
        ),
        (
            "Error: Node Unavailable — The destination node failed to report a heartbeat",
            "the node went offline (no heartbeat: its SuperNode stopped or lost its connection)",
        ),
    ],
)
def test_flower_failure_texts_become_short_reasons(text, reason):
    assert failure_reason(text) == reason


# ------------------------------------------------------------------------------------------------ in one process
def _replay(rounds, num_clients, excluded, seed=0):
    """FedAvg by hand: round r averages (by training-node count) the updates of the clients not in excluded[r]."""
    gspec, pspec = GraphSpec(dataset="synthetic", seed=seed), PartitionSpec(num_clients=num_clients, seed=seed)
    clients = [
        NodeClassificationClient(
            client_graph(gspec, pspec, k),
            TrainConfig(),
            {"kind": "gcn", "hidden": 16, "layers": 2, "dropout": 0.5, "heads": 8, "input_dropout": 0.0},
            seed=seed,
        )
        for k in range(num_clients)
    ]
    params = clients[0].get_parameters({})
    for r in range(1, rounds + 1):
        results = [c.fit(params, {"server_round": r}) for k, c in enumerate(clients) if k not in excluded.get(r, ())]
        if len(results) >= 2:
            params = weighted_average([res[0] for res in results], [float(res[1]) for res in results])
    return params


def test_faults_in_one_process_every_kind_but_exit(tmp_path, caplog):
    plan = "shape:2@1,raise:1@2,nan:0@3"
    with caplog.at_level("WARNING", logger="flwr"):
        summary, _ = run_inprocess(
            {
                "method": "fedavg",
                "num-clients": 3,
                "rounds": 4,
                "min-clients": 2,
                "checkpoint-every": 4,
                "inject-faults": plan,
                "out-dir": str(tmp_path),
            }
        )
    rounds = read_run(tmp_path)["rounds"]
    assert summary["status"] == "completed" and [r["num_fit"] for r in rounds] == [2, 2, 2, 3]
    assert rounds[0]["rejected"] == [{"client": "2", "reason": "array 0 has shape (15,), expected (16,)"}]
    assert rounds[1]["failures"] == [{"client": "1", "reason": "injected fault 'raise' at partition 1 in round 2"}]
    assert rounds[2]["rejected"] == [{"client": "0", "reason": "array 0 holds NaN or infinite values"}]
    assert (
        "round 2: client 1 (node 1002) failed to train: injected fault 'raise' at partition 1 in round 2" in caplog.text
    )
    final = load_checkpoint(tmp_path).arrays
    expected = _replay(4, 3, {1: {2}, 2: {1}, 3: {0}})
    for a, b in zip(final, expected, strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_faults_work_for_fedgcn_too(tmp_path):
    summary, _ = run_inprocess(
        {
            "method": "fedgcn",
            "num-clients": 3,
            "rounds": 3,
            "min-clients": 2,
            "inject-faults": "nan:1@1,raise:2@2,shape:0@3",
            "out-dir": str(tmp_path),
            "checkpoint-every": 3,
        }
    )
    rounds = read_run(tmp_path)["rounds"]
    assert rounds[0]["phase"] == "fedgcn-communication"  # the phase is never faulted
    assert [(r["num_fit"], len(r["rejected"]), r["num_failures"]) for r in rounds[1:]] == [
        (2, 1, 0),
        (2, 0, 1),
        (2, 1, 0),
    ]
    assert all(np.isfinite(a).all() for a in load_checkpoint(tmp_path).arrays)
    assert summary["status"] == "completed" and summary["final_accuracy"] > 0.3


def test_too_few_valid_updates_keep_the_model_for_that_round(tmp_path):
    run_inprocess(
        {
            "method": "fedavg",
            "num-clients": 2,
            "rounds": 2,
            "min-clients": 2,
            "fused-eval": False,
            "inject-faults": "raise:0@2",
            "out-dir": str(tmp_path),
            "checkpoint-every": 1,
        }
    )
    rounds = read_run(tmp_path)["rounds"]
    assert [r["aggregated"] for r in rounds] == [True, False]
    r1 = load_checkpoint(tmp_path / "checkpoints" / "round-000001.npz").arrays
    for a, b in zip(r1, load_checkpoint(tmp_path).arrays):
        np.testing.assert_array_equal(a, b)  # round 2 left the model as round 1 made it
    assert rounds[1]["accuracy"] == rounds[0]["accuracy"]


# ------------------------------------------------------------------------------------------------ node config
def _context(node_config, **run):
    return Context(
        run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config={"num-clients": 3, **run}
    )


@pytest.mark.parametrize(
    "node_config,message",
    [
        ({"partition-id": "abc", "num-partitions": 3}, "node config partition-id='abc': expected an integer"),
        ({"partition-id": 0, "num-partitions": "three"}, "node config num-partitions='three': expected an integer"),
        ({"partition-id": 1.5, "num-partitions": 3}, "node config partition-id=1.5: expected an integer"),
        ({"partition-id": 3, "num-partitions": 3}, "partition-id=3 out of range [0, 2]"),
        ({"partition-id": -1, "num-partitions": 3}, "partition-id=-1 out of range [0, 2]"),
        (
            {"partition-id": 0, "num-partitions": 4},
            "num-partitions=4 in the node config but num-clients=3 in the run config; they must be equal",
        ),
        ({"partition-id": 0}, "node config lacks num-partitions; start the SuperNode with --node-config"),
        (
            {"partition-id": 0, "num-partitions": 3, "data_dir": "/x"},
            "unknown node-config key 'data_dir'; did you mean 'data-dir'?; valid keys: partition-id, num-partitions, "
            "data-dir, dataset, key-file",
        ),
        (
            {"partition-id": 0, "num-partitions": 3, "data-dir": "/no/such/folder"},
            "data-dir '/no/such/folder' does not exist or is not a directory",
        ),
        ({"partition-id": 0, "num-partitions": 3, "dataset": "Coraa"}, "unknown dataset 'Coraa'; valid choices"),
    ],
)
def test_bad_node_config_is_refused_with_the_value(node_config, message):
    with pytest.raises(ConfigError) as info:
        client_app.build_client(_context(node_config))
    assert message in str(info.value)
    with pytest.raises(ConfigError) as info:  # what the server sees: the same text behind the marker
        client_app.client_fn(_context(node_config))
    assert str(info.value).startswith("flowergraph refused the run: ") and message in str(info.value)


def test_missing_or_corrupt_key_file_is_named(tmp_path):
    run = {"method": "fedgcn", "fedgcn.he": True}
    with pytest.raises(KeyFileError, match=r"key-file '/no/key.bin' does not exist; create one with"):
        client_app.build_client(_context({"partition-id": 0, "num-partitions": 3, "key-file": "/no/key.bin"}, **run))
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(KeyFileError, match=rf"key-file '{junk}' is not a TenSEAL CKKS context"):
        client_app.build_client(_context({"partition-id": 0, "num-partitions": 3, "key-file": str(junk)}, **run))


def test_corrupt_data_dir_is_named(tmp_path, shared_data, monkeypatch):
    import shutil

    raw = tmp_path / "data" / "Planetoid" / "Cora" / "raw"
    shutil.copytree(shared_data / "Planetoid" / "Cora" / "raw", raw)
    (raw / "ind.cora.x").chmod(0o644)
    (raw / "ind.cora.x").write_bytes(b"\x80\x04 truncated")
    monkeypatch.setenv("FLOWERGRAPH_CACHE", str(tmp_path / "cache"))  # nothing cached: the files are read
    with pytest.raises(DatasetUnavailableError) as info:
        client_app.build_client(
            _context({"partition-id": 0, "num-partitions": 3, "data-dir": str(tmp_path / "data")}, dataset="Cora")
        )
    text = str(info.value)
    assert f"dataset 'Cora': the raw files {tmp_path / 'data'}/Planetoid/Cora/raw/ind.cora." in text
    assert "could not be read" in text and "probably corrupt or truncated" in text
    assert not (tmp_path / "cache" / "datasets" / "Planetoid" / "Cora").exists()  # the bad copy is not kept


def test_misconfigured_node_fails_the_run_before_training(tmp_path):
    with pytest.raises(
        RuntimeError,
        match=r"client node 1002 flowergraph refused the run: unknown node-config key "
        r"'partiton-id'",
    ):
        run_inprocess(
            {"method": "fedavg", "num-clients": 2, "rounds": 2, "out-dir": str(tmp_path)},
            node_configs=[{"partition-id": 0, "num-partitions": 2}, {"partiton-id": 1, "num-partitions": 2}],
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds_completed"] == 0
    assert "refused the run: unknown node-config key 'partiton-id'" in summary["error"]


def test_two_nodes_with_one_partition_fail_the_run(tmp_path):
    with pytest.raises(RuntimeError, match=r"nodes 1001, 1002 all hold partition-id=0"):
        run_inprocess(
            {"method": "fedavg", "num-clients": 2, "rounds": 1, "out-dir": str(tmp_path)},
            node_configs=[{"partition-id": 0, "num-partitions": 2}] * 2,
        )


# ------------------------------------------------------------------------------------------------ run config
@pytest.mark.parametrize(
    "raw,message",
    [
        ({"seed": -1}, "seed=-1: must be >= 0"),
        ({"fraction-fit": 0.0}, r"fraction-fit=0.0: must be in (0.0, 1.0]"),
        (
            {"num-clients": 4, "fraction-fit": 0.5, "min-clients": 3},
            "min-clients=3 but fraction-fit=0.5 samples only 2 of num-clients=4 per round, so the model would never "
            "change",
        ),
        ({"round-timeout": 0}, "round-timeout=0.0: must be > 0.0"),
        ({"init-timeout": -5}, "init-timeout=-5.0: must be > 0.0"),
        ({"checkpoint-every": "often"}, "checkpoint-every='often': expected an integer"),
        ({"resume-from": 3}, "resume-from=3: expected a string"),
    ],
)
def test_bad_run_config_values_are_named(raw, message):
    with pytest.raises(ConfigError) as info:
        parse_run_config(raw)
    assert message in str(info.value)


def test_every_default_is_valid_and_nan_timeouts_refused():
    parse_run_config({})
    with pytest.raises(ConfigError, match="round-timeout='nan': expected a finite number"):
        parse_run_config({"round-timeout": "nan"})
    assert not math.isnan(parse_run_config({"round-timeout": 1}).round_timeout)
