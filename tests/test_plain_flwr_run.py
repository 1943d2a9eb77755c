"""A plain run of flowergraph's app folder (no launcher in front: the ServerApp gets the run config as given): too
few clients fail fast and say so while the server waits; bad run-config values are refused by the ServerApp with
the launcher's message. On the inline engine (the app folder's components and pyproject, the run config passed as
`flwr run --run-config FILE` passes it); a launcher run's temp folder is checked by the guard test in
tests/test_simulation.py, through Ray."""

import time

import pytest

from flowergraph.app.runtime import write_app
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config
from flowergraph.simulation import run_inline_app

pytestmark = pytest.mark.simulation


def _flwr_run(tmp_path, supernodes, run_config):
    app = tmp_path / "app"
    write_app(app)
    started = time.monotonic()
    run = run_inline_app(app, num_supernodes=supernodes, run_config=run_config, log_dir=tmp_path / "logs", timeout=400)
    return run, run.log_file.read_text(), time.monotonic() - started


def test_fewer_nodes_than_clients_fail_within_the_connect_timeout(tmp_path):
    run, log, seconds = _flwr_run(
        tmp_path, 2, {"num-clients": 3, "rounds": 1, "connect-timeout": 5.0, "out-dir": str(tmp_path / "out")}
    )
    assert run.status == "failed", log[-3000:]
    assert "flowergraph: 2 of 3 clients connected; waiting up to" in log  # reported while it waits
    assert (
        "only 2 of num-clients=3 clients connected within 5 s (connect-timeout); start one SuperNode per client" in log
    )
    assert "[ROUND 1]" not in log
    assert seconds < 240  # the wait, not Flower's 10 minutes


def test_a_bad_value_is_refused_by_the_serverapp_with_the_launchers_message(tmp_path):
    bad = {"num-clients": 2, "method": "fedavgg"}
    with pytest.raises(ConfigError) as refused:
        parse_run_config(bad)  # what the launcher prints after "error: "
    assert "did you mean 'fedavg'?" in str(refused.value)
    run, log, _ = _flwr_run(tmp_path, 2, bad)
    assert run.status == "failed"
    assert f"flowergraph: the run was refused: {refused.value}" in log
    assert "[INIT]" not in log
