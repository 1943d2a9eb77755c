"""flowergraph.serverapp: one typed Strategy class per method, run from a user's own Message-API ServerApp.

The runs go through Flower's Simulation Engine in this process with flowergraph's inline backend (every message
and context serialised through Flower's protobuf bytes, as a deployment carries them); the user's app has a run
config of its own (Flower quickstart keys, and a ``dataset`` that means something else to it), which flowergraph
must leave alone: the clients are configured by what the strategy sends.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg as FlowerFedAvg, FedProx as FlowerFedProx, Strategy

import golden_cases
from flowergraph import serverapp
from flowergraph.app import message_client
from flowergraph.app.inline import run_inline
from flowergraph.errors import ConfigError
from flowergraph.serverapp import FLAGCNS, FedAvg, FedGCN, FedProx, GraphTask, NodeTask
from flowergraph.storage.results import read_run
from records import assert_same_rounds

# A user's app: Flower's quickstart keys, and a `dataset` of its own that is no flowergraph dataset.
USER_CONFIG = {"num-server-rounds": 3, "lr": 0.1, "dataset": "my-own-mnist", "fraction-train": 0.5}


def _app_folder(folder: Path, config: dict) -> Path:
    table = "\n".join(f"{k} = {json.dumps(v)}" for k, v in config.items())
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "userapp"\nversion = "1.0.0"\n\n'
        '[tool.flwr.app]\npublisher = "me"\n\n'
        '[tool.flwr.app.components]\nserverapp = "server:app"\nclientapp = "client:app"\n\n'
        f"[tool.flwr.app.config]\n{table}\n"
    )
    return folder


@pytest.fixture(scope="module")
def user_app(tmp_path_factory) -> Path:
    """A Flower app folder whose run config holds only the user's own keys (none of flowergraph's)."""
    return _app_folder(tmp_path_factory.mktemp("user-app"), USER_CONFIG)


def _run(strategy_fn, user_app: Path, num_nodes: int, **start) -> dict:
    """Run ``strategy_fn()``'s ``start(**start)`` in a ServerApp against flowergraph's ClientApp; returns what
    the ServerApp saw (its run config, the Result)."""
    app = ServerApp()
    seen: dict = {}

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        seen["run_config"] = dict(context.run_config)
        seen["result"] = strategy_fn().start(grid=grid, **start)

    run_inline(app, message_client.client_app(), num_supernodes=num_nodes, app_dir=user_app)
    return seen


def test_one_concrete_strategy_class_per_method_typed_and_documented():
    classes = serverapp.STRATEGIES
    assert len(classes) >= 10
    methods = {c.method for c in classes}
    assert {"fedavg", "fedprox", "fedper", "gcfl", "centralized", "fedgcn", "fedstar", "asfgnn", "flagcns"} <= methods
    assert "fedgraph" in methods
    for cls in classes:
        assert issubclass(cls, Strategy) and not inspect.isabstract(cls), cls
        assert getattr(serverapp, cls.__name__) is cls  # exported from the one public place
        params = inspect.signature(cls).parameters
        assert params and all(p.kind is p.KEYWORD_ONLY for p in params.values()), cls
        assert all(p.default is not p.empty and p.annotation is not p.empty for p in params.values()), cls
        doc = inspect.getdoc(cls)
        section = doc[doc.index("Parameters\n----------") :]
        for name in params:  # every argument documented, numpydoc style: "name : type (default: ...)" + text
            assert f"\n{name} : " in section, (cls.__name__, name)
        with pytest.raises(TypeError):
            cls(1)  # keyword arguments only
    assert issubclass(FedAvg, FlowerFedAvg) and issubclass(FedProx, FlowerFedProx)
    assert FedProx(mu=0.3).proximal_mu == 0.3  # Flower's attribute, from flowergraph's argument
    federation = {f.name for f in dataclasses.fields(serverapp.GraphStrategy)}
    for cls in classes:  # a method's own field never shadows a federation field
        own = {f.name for f in dataclasses.fields(cls)} - federation
        assert not own & federation


def test_an_argument_and_its_run_config_key_are_one_setting():
    """The run-config keys derive from the classes' fields: the same defaults, the same checks and messages."""
    from flowergraph.settings import option_by_key

    keys = option_by_key()
    for name, key in (("hops", "fedgcn.hops"), ("he", "fedgcn.he")):
        field = FedGCN.__dataclass_fields__[name]
        assert field.default == keys[key].default
    assert FedGCN(hops=1).run_config()["fedgcn.hops"] == 1
    assert FedGCN(fraction_train=0.5).run_config()["fraction-fit"] == 0.5
    assert FedGCN(task=NodeTask(lr=0.2)).run_config()["node.lr"] == 0.2


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: FedGCN(hops=3), "FedGCN(hops=3): valid choices: 0, 1, 2"),
        (lambda: FedGCN(aggregator="medain"), "FedGCN(aggregator='medain'): valid choices: mean, median,"),
        (lambda: FedGCN(seed="x"), "FedGCN(seed='x'): expected an integer"),
        (lambda: FedGCN(task=NodeTask(model="gat")), "FedGCN: method 'fedgcn' trains a 2-layer GCN; got"),
        (lambda: FedGCN(task=GraphTask()), "whose task is 'node': pass a NodeTask"),
        (lambda: FedGCN(num_clients=0), "FedGCN(num_clients=0): must be >= 1"),
        (lambda: NodeTask(lr=-1.0), "NodeTask(lr=-1.0): must be > 0.0"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument_and_the_valid_values(make, message):
    with pytest.raises(ConfigError) as refused:
        make()
    assert message in str(refused.value)


class _Nodes:
    """A grid that only reports its nodes (a fixed-rounds method refuses before it sends anything)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def get_node_ids(self):
        return list(range(1, self.n + 1))


def test_a_method_whose_schedule_fixes_the_rounds_refuses_another_count_naming_its_own(shared_data):
    strategy = FLAGCNS(data_dir=str(shared_data), population=4, sample_size=2, epochs=1, warmup=0, retrain_epochs=2)
    computed = strategy.settings(num_clients=3, num_rounds=None).rounds
    with pytest.raises(ConfigError, match=f"num_rounds=99, but its schedule fixes the rounds at {computed} "):
        strategy.start(grid=_Nodes(3), num_rounds=99)


def test_start_is_not_configure_train():
    with pytest.raises(RuntimeError, match=r"call start\(grid=...\)"):
        FedGCN().configure_train(1, ArrayRecord(), ConfigRecord(), None)


@pytest.mark.simulation
def test_a_users_app_runs_the_class_for_num_rounds_with_its_own_run_config(user_app, tmp_path):
    """``start(num_rounds=3)`` in an app whose run config has no flowergraph key (and keys of its own, one named
    like flowergraph's ``dataset``) evaluates round 3, and the Result is the run's: the final model and every
    round's evaluation; flowergraph's records say the same."""
    seen = _run(lambda: FedGCN(hops=1), user_app, 3, num_rounds=3, out_dir=str(tmp_path / "run"))
    assert seen["run_config"] == USER_CONFIG
    result = seen["result"]
    assert sorted(result.evaluate_metrics_clientapp) == [1, 2, 3]
    rounds = read_run(tmp_path / "run")["rounds"]
    assert [r["round"] for r in rounds if r["round"] >= 1] == [1, 2, 3]
    assert result.evaluate_metrics_clientapp[3]["accuracy"] == pytest.approx(rounds[-1]["accuracy"])
    assert read_run(tmp_path / "run")["summary"]["status"] == "completed"


@pytest.mark.simulation
@pytest.mark.parametrize("case, make", [("fedgcn", lambda: FedGCN()), ("fedavg-dp", None)])
def test_the_class_reproduces_the_golden_records(case, make, user_app, tmp_path):
    """The class, configured by its arguments alone (the clients told by its messages, the run config the user's),
    gives the 0.3 core's golden records of the same settings (tests/golden)."""
    if make is None:  # central DP: Flower's noise draws from numpy's global generator (seeded as the golden run)
        make = lambda: FedAvg(  # noqa: E731
            dp="central-server", weighting="uniform", dp_noise_multiplier=0.3, dp_clipping_norm=5.0
        )
    golden_cases.seed_flower_dp()
    _run(make, user_app, 3, num_rounds=2, out_dir=str(tmp_path / "run"))
    want = json.loads((golden_cases.GOLDEN / f"{case}.json").read_text())["rounds"]
    assert_same_rounds(want, read_run(tmp_path / "run")["rounds"], golden_cases.COSTS)


@pytest.mark.simulation
def test_flowers_stock_fedavg_over_flowergraphs_handlers_reports_only_real_metrics(tmp_path):
    """Flower's own FedAvg averages every MetricRecord value it gets: flowergraph's handlers put their
    bookkeeping (partition id, example counts) outside the MetricRecord, so none of it is averaged into
    nonsense; ``initial_arrays`` needs no run config. (A stock strategy tells the clients nothing, so they read
    the flowergraph keys of the run config: here the quickstart's keys only, which they leave alone.)"""
    quickstart = {k: v for k, v in USER_CONFIG.items() if k != "dataset"}
    seen = _run(
        lambda: FlowerFedAvg(min_train_nodes=3, min_available_nodes=3, min_evaluate_nodes=3),
        _app_folder(tmp_path, quickstart),
        3,
        initial_arrays=message_client.initial_arrays(),
        num_rounds=2,
    )
    result = seen["result"]
    for records in (result.train_metrics_clientapp, result.evaluate_metrics_clientapp):
        assert sorted(records) == [1, 2]
        for metrics in records.values():
            names = set(metrics)
            assert not names & {"partition_id", "num_test", "num_train", "num_val", "batch_size"}, names
            assert not any(n.startswith("eval_num_") or n == "eval_partition_id" for n in names), names
    assert "accuracy" in result.evaluate_metrics_clientapp[2]


def test_a_reply_keeps_its_bookkeeping_in_fg_info_and_the_core_reads_it_back():
    from flowergraph.app import message_records as rec

    content = rec.reply_content([], None, 7, {"partition_id": 2, "num_test": 30, "accuracy": 0.5, "eval_num_val": 4})
    assert dict(content.metric_records["metrics"]) == {"accuracy": 0.5, "num-examples": 7}
    assert dict(content.config_records["fg.info"]) == {"partition_id": 2, "num_test": 30, "eval_num_val": 4}
    assert rec.reply_metrics(content) == (7, {"accuracy": 0.5, "partition_id": 2, "num_test": 30, "eval_num_val": 4})


def test_a_client_told_by_the_server_ignores_the_run_configs_keys(monkeypatch):
    """A message carrying ``fg.settings`` configures the client; the run config (the user's) is not read."""
    from flwr.supercore.task_identity import TaskIdentity

    for attribute, value in (("task_id", 1), ("run_id", 1), ("node_id", 3)):  # what a node's process has set
        monkeypatch.setattr(TaskIdentity, f"_{attribute}", value)
    context = Context(
        run_id=1,
        node_id=3,
        node_config={"partition-id": 0, "num-partitions": 2},
        state=RecordDict(),
        run_config={"dataset": "my-own-mnist", "num-server-rounds": 3},
    )
    msg = Message(
        RecordDict({"config": ConfigRecord({}), "fg.settings": ConfigRecord({"num-clients": 2, "method": "fedgcn"})}),
        dst_node_id=3,
        message_type="query.fg_identity",
    )
    client = message_client._client(context, msg)
    while hasattr(client, "inner"):  # the wrappers (state checkpoints, ...) around the method's client
        client = client.inner
    assert type(client).__name__ == "FedGCNClient"
    bare = Message(RecordDict({"config": ConfigRecord({})}), dst_node_id=3, message_type="query.fg_identity")
    with pytest.raises(ConfigError, match="my-own-mnist"):  # without the server's settings: the run config's
        message_client._client(context, bare)


@pytest.mark.simulation
def test_the_class_checkpoints_and_resumes_to_the_uninterrupted_runs_records(user_app, tmp_path, monkeypatch):
    """``start(out_dir=..., checkpoint_every=1)`` writes a checkpoint per round (server state, then the clients'
    FedGCN aggregations); ``start(resume_from=<round 2's>)`` into another folder continues with round 3, equal
    to the uninterrupted run's; without ``out_dir`` nothing is written."""
    from flowergraph.storage.checkpoint import checkpoint_file

    monkeypatch.chdir(tmp_path)
    full = tmp_path / "full"
    make = lambda: FedGCN(hops=2)  # noqa: E731
    _run(make, user_app, 3, num_rounds=3, out_dir=str(full), checkpoint_every=1)
    resumed = tmp_path / "resumed"
    _run(make, user_app, 3, num_rounds=3, out_dir=str(resumed), resume_from=str(checkpoint_file(full, 2)))
    want = [r for r in read_run(full)["rounds"] if r["round"] == 3]
    got = [r for r in read_run(resumed)["rounds"] if r["round"] == 3]
    assert len(got) == 1
    assert_same_rounds(want, got, golden_cases.COSTS)
    before = sorted(p.name for p in tmp_path.iterdir())
    _run(make, user_app, 3, num_rounds=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(ConfigError, match="checkpoints live in the run's folder: pass out_dir too"):
        make().start(grid=_Nodes(3), checkpoint_every=1)


@pytest.mark.simulation
def test_a_link_prediction_run_from_a_class(user_app):
    """``task=LinkTask(...)`` makes a node dataset's run link prediction; the clients learn it from the strategy's
    messages alone and report AUC and Hits@K, which reach Flower's Result for every round."""
    from flowergraph.serverapp import LinkTask, Local

    seen = _run(lambda: FedAvg(task=LinkTask(hits_k=10, hidden=32, out=16)), user_app, 3, num_rounds=2)
    evaluated = seen["result"].evaluate_metrics_clientapp
    assert sorted(evaluated) == [1, 2]
    assert 0.5 < evaluated[2]["auc"] <= 1.0 and 0.0 <= evaluated[2]["hits@10"] <= 1.0
    assert isinstance(Local().task, LinkTask)  # the link-only baseline's task
