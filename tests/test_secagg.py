"""FedGCN inside a stock Flower app that uses Flower's secure aggregation, written as a Flower user would write it
with flowergraph's public API: a ``ClientApp`` with ``secaggplus_mod`` and an ``@app.main()`` ServerApp whose
training rounds run through ``SecAggPlusWorkflow`` (``LegacyContext`` + ``DefaultWorkflow``).

FedGCN's communication phase travels as phase messages (``get_properties``), which the SecAgg+ mod leaves alone;
before the phase mechanism it was sent as ``fit`` messages and every client failed with
``KeyError: 'secaggplus_configs'``. The accuracy must equal FedGCN without SecAgg+ (same seeds), and the strategy
must never see an individual client's update. The core strategy runs on the legacy stack through flowergraph's
adapter (``flowergraph.app.loop.LegacyStrategy``). The app runs on the inline engine (its pyproject's components,
Flower's grid, link state and mods, every message serialised)."""

import textwrap

import pytest

from flowergraph.storage.results import read_run
from flowergraph.simulation import run_inline_app

from flowergraph.app.inprocess import run_inprocess

pytestmark = pytest.mark.simulation


APP = '''
"""A user's Flower app: flowergraph's FedGCN under Flower's SecAgg+."""

import torch
from flwr.app import Context
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.server import LegacyContext, ServerConfig
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.serverapp import Grid, ServerApp

from flowergraph.app.legacy import legacy_client
from flowergraph.app.loop import LegacyStrategy
from flowergraph.clients import ClientState, TrainConfig
from flowergraph.data import GraphSpec, PartitionSpec, client_graph
from flowergraph.storage.results import RunRecorder
from flowergraph.methods.fedgcn.client import FedGCNClient
from flowergraph.methods.fedgcn.server import FedGCNStrategy
from flowergraph.strategies import FederationPolicy

MODEL = {"kind": "gcn", "hidden": 16, "layers": 2, "dropout": 0.5, "heads": 8, "input_dropout": 0.0}


def client_fn(context: Context):
    torch.set_num_threads(1)
    seed = int(context.run_config["seed"])
    k, n = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    graph = client_graph(GraphSpec(dataset="synthetic", seed=seed), PartitionSpec(num_clients=n, seed=seed), k)
    return legacy_client(FedGCNClient(graph, TrainConfig(), MODEL, seed=seed, hops=2,
                                      state=ClientState(context.state)))


client = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])


class WatchedFedGCN(FedGCNStrategy):
    """Records whether every result it is handed carries the same arrays (SecAgg+ hands it only the sum)."""

    def aggregate_fit(self, server_round, results, failures):
        payloads = {b"".join(a.tobytes() for a in res.arrays) for _, res in results}
        self.book.start(server_round)["distinct_updates_seen"] = len(payloads)
        return super().aggregate_fit(server_round, results, failures)


server = ServerApp()


@server.main()
def main(grid: Grid, context: Context) -> None:
    rounds = int(context.run_config["rounds"])
    recorder = RunRecorder(context.run_config["out-dir"], dict(context.run_config), total_rounds=rounds)
    policy = FederationPolicy(num_clients=3, num_rounds=rounds, fused_eval=True, seed=int(context.run_config["seed"]),
                              init_timeout=300, round_timeout=300)
    strategy = WatchedFedGCN(policy=policy, hops=2, weighting="train-size", recorder=recorder)
    legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=rounds, round_timeout=300),
                           strategy=LegacyStrategy(strategy))
    DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(num_shares=3, reconstruction_threshold=2))(grid, legacy)
    strategy.finish()
    recorder.finish("completed")
'''


def test_fedgcn_two_hop_under_secaggplus_equals_plain_fedgcn(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "secagg_app.py").write_text(APP)
    (app / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "secagg-app"
        version = "0.1.0"
        license = "Apache-2.0"
        dependencies = []

        [tool.flwr.app]
        publisher = "test"

        [tool.flwr.app.components]
        serverapp = "secagg_app:server"
        clientapp = "secagg_app:client"

        [tool.flwr.app.config]
        rounds = 3
        seed = 5
        out-dir = ""
        """)
    )
    out = tmp_path / "out"
    run = run_inline_app(
        app, num_supernodes=3, run_config={"out-dir": str(out)}, log_dir=tmp_path / "logs", timeout=600
    )  # the user's app folder on the inline engine: Flower's grid, mods, serde
    log = run.log_file.read_text()
    assert run.status == "completed", log[-4000:]
    assert "secaggplus_configs" not in log
    got = read_run(out)["rounds"]
    phase, training = got[0], got[1:]
    assert phase["phase"] == "fedgcn-communication" and phase["rows"] > 0
    assert [r["round"] for r in training] == [1, 2, 3]
    assert all(r["distinct_updates_seen"] == 1 for r in training)  # only the secure sum reached the strategy
    assert all(r["num_fit"] == 3 for r in training)
    reference, _ = run_inprocess(
        {
            "method": "fedgcn",
            "num-clients": 3,
            "rounds": 3,
            "seed": 5,
            "weighting": "train-size",
            "out-dir": str(tmp_path / "plain"),
        }
    )
    want = [r["accuracy"] for r in read_run(tmp_path / "plain")["rounds"] if r["round"] >= 1]
    assert [r["accuracy"] for r in training] == pytest.approx(want, abs=0.003)  # SecAgg+ quantises to ~4e-6
    assert want[-1] > want[0] + 0.1 and reference["final_accuracy"] == want[-1]  # it learns
