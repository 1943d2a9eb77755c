import re
import tomllib
from pathlib import Path

import pytest

from flowergraph.settings import METHODS, OPTIONS, defaults, markdown_table, parse_run_config
from flowergraph.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_run_config_matches_the_schema():
    from flwr.common.config import flatten_dict  # how Flower reads nested tables: fedgcn.hops

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert flatten_dict(pyproject["tool"]["flwr"]["app"]["config"]) == defaults()


def test_readme_documents_every_key():
    """The configuration reference (docs/configuration.md, linked from the README) lists every key as generated."""
    reference = (REPO / "docs" / "configuration.md").read_text()
    assert markdown_table() in reference, (
        "docs/configuration.md's configuration reference is stale: "
        "python -m flowergraph.settings --update-docs docs/configuration.md"
    )


def test_defaults_parse():
    s = parse_run_config({})
    assert s.method == "fedavg" and s.num_clients == 3 and s["node.local-steps"] == 3 and s["node.weight-decay"] == 5e-4
    assert s.of("node").weight_decay == 5e-4 and s.task == "node" and s.task_info.name == "node"
    assert len(s.as_dict()) == len(OPTIONS)


def test_types_are_coerced_and_dataset_is_canonical():
    s = parse_run_config({"rounds": 5.0, "node.lr": 1, "server-eval": "true", "dataset": "cora"})
    assert s.rounds == 5 and isinstance(s["node.lr"], float) and s.server_eval is True and s.dataset == "Cora"


@pytest.mark.parametrize(
    "raw,match",
    [
        (
            {"method": "fedprx"},
            "unknown method 'fedprx'; valid choices: " + ", ".join(METHODS) + "; did you mean 'fedprox'",
        ),
        ({"rounds": 0}, "rounds=0: must be >= 1"),
        ({"rounds": 1.5}, r"rounds=1.5: expected an integer"),
        ({"num-clients": 0}, "num-clients=0: must be >= 1"),
        (
            {"node.partitioner": "spectral"},
            "unknown node.partitioner 'spectral'; valid choices: dirichlet, louvain, metis, random, none",
        ),
        ({"dataset": "ogbn-arxiv"}, "unknown dataset 'ogbn-arxiv'; valid choices: node classification"),
        (
            {"dataset": "MUTAG", "method": "fedgcn"},
            "method 'fedgcn' does node classification and link prediction but dataset 'MUTAG' is graph "
            "classification data; valid datasets for it: node classification: "
            "Cora, CiteSeer, PubMed, synthetic; link prediction: Cora, CiteSeer, PubMed, synthetic",
        ),
        ({"data-dir": "/no/such/dir"}, "data-dir '/no/such/dir' does not exist"),
        ({"node.lr": -0.1}, r"node.lr=-0.1: must be > 0.0"),
        ({"node.lr": "fast"}, "node.lr='fast': expected a number"),
        ({"node.dropout": 1.0}, r"node.dropout=1.0: must be in \[0.0, 1.0\)"),
        ({"weighting": "size"}, "unknown weighting 'size'; valid choices: train-size, batch-size, uniform"),
        ({"min-clients": 4}, "min-clients=4 exceeds num-clients=3"),
        ({"node.optimizer": "rmsprop"}, "unknown node.optimizer 'rmsprop'; valid choices: sgd, adam"),
        ({"node.split": "public"}, "public split exists only for Planetoid"),
        ({"node.beta": 0}, r"node.beta=0.0: must be > 0"),
        (
            {"roundz": 3},
            "unknown run-config key 'roundz'; did you mean 'rounds'\\?; other close keys: round-timeout, "
            "fedgraph.round-time; all [0-9]+ keys: docs/configuration.md",
        ),
        ({"server-eval": "maybe"}, "server-eval='maybe': expected true or false"),
    ],
)
def test_bad_values_name_value_and_choices(raw, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config(raw)


def test_unknown_keys_allowed_for_user_apps():
    assert parse_run_config({"my-key": 1}, allow_unknown=True).method == "fedavg"


def test_centralized_uses_one_client_holding_everything():
    s = parse_run_config({"method": "centralized", "num-clients": 10})
    assert s.effective_num_clients == 1
    from flowergraph.data import partition_spec

    assert partition_spec(s).partitioner == "none" and partition_spec(s).num_clients == 1


def test_an_unknown_key_names_the_known_keys_with_its_last_part():
    """A key given without its namespace or under another one (an old name before the keys moved into ``node.*``,
    ``graph.*``, ``fedgcn.*``) is an unknown key; the refusal names every known key with the same last dotted part
    (no table of renamed keys), else a close match. Where unknown keys are allowed (a user's app) it is left out."""
    with pytest.raises(
        ConfigError, match=re.escape("unknown run-config key 'hops'; did you mean 'fedgcn.hops'?; all ")
    ):
        parse_run_config({"hops": 1})
    with pytest.raises(ConfigError, match=re.escape("unknown run-config key 'mu'; did you mean 'fedprox.mu'?")):
        parse_run_config({"mu": 0.1})
    with pytest.raises(
        ConfigError, match=re.escape("unknown run-config key 'lr'; did you mean 'node.lr', 'graph.lr', ")
    ):
        parse_run_config({"lr": 0.1, "node.partitioner": "louvain"})
    with pytest.raises(
        ConfigError,
        match=re.escape("unknown run-config key 'fedstar.hidden'; did you mean 'node.hidden', 'graph.hidden'"),
    ):
        parse_run_config({"method": "fedstar", "dataset": "MUTAG,BZR", "num-clients": 2, "fedstar.hidden": 32})
    with pytest.raises(
        ConfigError, match=re.escape("unknown run-config key 'num-client'; did you mean 'num-clients'?")
    ):  # no key ends in it: the close match
        parse_run_config({"num-client": 3})
    assert "hops" not in parse_run_config({"hops": 1}, allow_unknown=True).as_dict()
    s = parse_run_config({"node.lr": 0.1, "node.partitioner": "louvain"})
    assert s["node.lr"] == 0.1 and s["node.partitioner"] == "louvain"
    assert (
        parse_run_config({"method": "fedstar", "dataset": "MUTAG,BZR", "num-clients": 2, "graph.hidden": 32})[
            "graph.hidden"
        ]
        == 32
    )


def test_same_last_part_and_did_you_mean_key():
    from flowergraph.errors import did_you_mean_key, same_last_part

    keys = ["method", "node.lr", "graph.lr", "fedgcn.hops", "node.beta", "graph.beta"]
    assert same_last_part("lr", keys) == ["node.lr", "graph.lr"]
    assert same_last_part("fedstar.lr", keys) == ["node.lr", "graph.lr"]
    assert same_last_part("node.lr", keys) == ["graph.lr"]  # a known key is never its own suggestion
    assert did_you_mean_key("hops", keys) == "; did you mean 'fedgcn.hops'?"
    assert did_you_mean_key("beta", keys) == "; did you mean 'node.beta' or 'graph.beta'?"
    assert did_you_mean_key("methd", keys) == "; did you mean 'method'?"
    assert did_you_mean_key("zzz", keys) == ""


def test_old_beta_is_refused_naming_both_tasks_keys_and_node_beta_on_a_graph_run_names_graph_beta():
    """The old key ``beta`` set the Dirichlet split of either task: the refusal names both tasks' ``beta``; on
    graph classification ``node.beta`` is the other task's key (0.3 no longer reads it as ``graph.beta``): the
    refusal names the key to use."""
    with pytest.raises(
        ConfigError, match=re.escape("unknown run-config key 'beta'; did you mean 'node.beta', 'graph.beta'")
    ):
        parse_run_config({"dataset": "MUTAG", "num-clients": 2, "beta": 0.5})
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "node.beta=0.5 applies to node classification (task 'node'), but dataset 'MUTAG' makes this run graph "
            "classification (task 'graph'), which ignores it; use 'graph.beta', remove the key"
        ),
    ):
        parse_run_config({"dataset": "MUTAG", "num-clients": 2, "node.beta": 0.5})
    s = parse_run_config({"dataset": "MUTAG", "num-clients": 2, "graph.beta": 0.5})
    assert s["graph.beta"] == 0.5 and s["node.beta"] == defaults()["node.beta"]


def test_a_checkpoint_written_under_an_old_key_name_is_refused_naming_the_new_name():
    """A checkpoint written before the keys were renamed holds their old names, which this version does not know:
    it refuses to resume it, naming the keys each may mean (before, it was read under the new names)."""
    from flowergraph.errors import CheckpointError
    from flowergraph.storage.checkpoint import Checkpoint, check_resumable

    old = Checkpoint(
        server_round=1,
        arrays=[],
        config={"method": "fedgcn", "hops": 2, "rounds": 2},
        path=Path("/runs/r/checkpoints/round-000001.npz"),
    )
    with pytest.raises(
        CheckpointError,
        match=re.escape(
            "resume-from '/runs/r/checkpoints/round-000001.npz' was written with run-config keys this version does "
            "not know: 'hops' (did you mean 'fedgcn.hops'?); this version cannot resume it"
        ),
    ):
        check_resumable(old, {"method": "fedgcn", "fedgcn.hops": 2, "rounds": 3})


def test_a_task_key_of_the_other_task_is_refused_naming_the_runs_task(launcher_main, capsys):
    """`--dataset MUTAG --set node.partitioner=metis` trains graph classification, which has no node partitioner:
    refused before anything starts (exit status 2) instead of ignored. The key at its default passes (a plain
    `flwr run` hands the ServerApp every key of the app), and so does the key in a run of its own task."""
    from flowergraph.settings import option_by_key

    with pytest.raises(
        ConfigError,
        match=re.escape(
            "node.partitioner='metis' applies to node classification (task 'node'), but dataset 'MUTAG' makes this "
            "run graph classification (task 'graph'), which ignores it; remove the key, or choose a dataset of task "
            "'node': Cora, CiteSeer, PubMed, synthetic"
        ),
    ):
        parse_run_config({"dataset": "MUTAG", "node.partitioner": "metis"})
    with pytest.raises(
        ConfigError,
        match=r"graph\.lr=0\.5 applies to graph classification \(task 'graph'\), but "
        r"dataset 'Cora' makes this run node classification",
    ):
        parse_run_config({"dataset": "Cora", "graph.lr": 0.5})
    default = option_by_key()["node.partitioner"].default
    assert parse_run_config({"dataset": "MUTAG", "node.partitioner": default}).dataset == "MUTAG"
    assert parse_run_config({"dataset": "Cora", "node.partitioner": "metis"})["node.partitioner"] == "metis"
    assert launcher_main(["--dataset", "MUTAG", "--set", "node.partitioner=metis"]) == 2
    assert "node.partitioner='metis' applies to node classification" in capsys.readouterr().err


def test_ray_cpus_on_an_existing_ray_cluster_is_refused(launcher_main, capsys, monkeypatch):
    """With RAY_ADDRESS set, Ray joins that cluster and refuses a CPU count: the launcher says so before anything
    starts (docs/ray_cluster.md) instead of failing inside Flower's simulation process."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert launcher_main(["--method", "fedavg", "--ray-cpus", "2"]) == 2
    assert "ray-cpus=2 with RAY_ADDRESS='127.0.0.1:6379': Ray refuses a CPU count" in capsys.readouterr().err


def test_an_unknown_key_names_a_few_close_keys_and_where_all_are_listed_not_all_of_them():
    """A Flower app's own key (``num-server-rounds``, Flower's quickstart) refused by the launcher: the message names
    at most a handful of known keys and where the whole list lives, never the ~200 keys themselves."""
    from flowergraph.settings import option_by_key

    with pytest.raises(ConfigError) as refused:
        parse_run_config({"num-server-rounds": 3})
    message = str(refused.value)
    assert message.startswith("unknown run-config key 'num-server-rounds'; close keys: rounds, ")
    assert message.endswith(
        f"; all {len(option_by_key())} keys: docs/configuration.md, or `python -m flowergraph.settings`"
    )
    named = [k for k in option_by_key() if re.search(rf"(?<![\w.-]){re.escape(k)}(?![\w.-])", message)]
    assert 1 <= len(named) <= 8 and "rounds" in named, named
    assert len(message) < 300
