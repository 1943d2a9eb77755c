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
    readme = (REPO / "README.md").read_text()
    assert markdown_table() in readme, "README's configuration table is stale: python -m flowergraph.settings --markdown"


def test_defaults_parse():
    s = parse_run_config({})
    assert s.method == "fedavg" and s.num_clients == 3 and s.local_steps == 3 and s.weight_decay == 5e-4
    assert len(s.as_dict()) == len(OPTIONS)


def test_types_are_coerced_and_dataset_is_canonical():
    s = parse_run_config({"rounds": 5.0, "lr": 1, "server-eval": "true", "dataset": "cora"})
    assert s.rounds == 5 and isinstance(s.lr, float) and s.server_eval is True and s.dataset == "Cora"


@pytest.mark.parametrize("raw,match", [
    ({"method": "fedprox"}, "unknown method 'fedprox'; valid choices: " + ", ".join(METHODS)),
    ({"rounds": 0}, "rounds=0: must be >= 1"),
    ({"rounds": 1.5}, r"rounds=1.5: expected an integer"),
    ({"num-clients": 0}, "num-clients=0: must be >= 1"),
    ({"partitioner": "spectral"}, "unknown partitioner 'spectral'; valid choices: dirichlet, louvain, metis, random, none"),
    ({"dataset": "ogbn-arxiv"}, "unknown dataset 'ogbn-arxiv'; valid choices: node classification"),
    ({"dataset": "MUTAG"}, "method 'fedavg' does node classification but dataset 'MUTAG' is graph-classification data"),
    ({"data-dir": "/no/such/dir"}, "data-dir '/no/such/dir' does not exist"),
    ({"lr": -0.1}, r"lr=-0.1: must be > 0.0"),
    ({"lr": "fast"}, "lr='fast': expected a number"),
    ({"dropout": 1.0}, r"dropout=1.0: must be in \[0.0, 1.0\)"),
    ({"weighting": "size"}, "unknown weighting 'size'; valid choices: train-size, batch-size, uniform"),
    ({"min-clients": 4}, "min-clients=4 exceeds num-clients=3"),
    ({"optimizer": "rmsprop"}, "unknown optimizer 'rmsprop'; valid choices: sgd, adam"),
    ({"split": "public"}, "public split exists only for Planetoid"),
    ({"beta": 0}, r"beta=0.0: must be > 0"),
    ({"roundz": 3}, "unknown run-config key 'roundz'; valid keys: method, dataset"),
    ({"server-eval": "maybe"}, "server-eval='maybe': expected true or false"),
])
def test_bad_values_name_value_and_choices(raw, match):
    with pytest.raises(ConfigError, match=match):
        parse_run_config(raw)


def test_unknown_keys_allowed_for_user_apps():
    assert parse_run_config({"my-key": 1}, allow_unknown=True).method == "fedavg"


def test_centralized_uses_one_client_holding_everything():
    s = parse_run_config({"method": "centralized", "num-clients": 10})
    assert s.effective_num_clients == 1
    assert s.partition_spec().partitioner == "none" and s.partition_spec().num_clients == 1
