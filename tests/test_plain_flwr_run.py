"""A plain `flwr run` of flowergraph's app (no launcher in front): too few clients fail fast and say so while the
server waits; bad run-config values are refused by the ServerApp with the launcher's message; and a launcher run
leaves nothing in the temp directory. Each test starts Flower's simulation (~20-60 s)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from flowergraph.app.runtime import write_app
from flowergraph.errors import ConfigError
from flowergraph.settings import parse_run_config
from flowergraph.simulation import run_flower_app

pytestmark = pytest.mark.simulation


def _flwr_run(tmp_path, supernodes, run_config):
    app = tmp_path / "app"
    write_app(app)
    started = time.monotonic()
    run = run_flower_app(app, num_supernodes=supernodes, run_config=run_config, log_dir=tmp_path / "logs",
                         timeout=400, ray_cpus=1)
    return run, run.log_file.read_text(), time.monotonic() - started


def test_fewer_nodes_than_clients_fail_within_the_connect_timeout(tmp_path):
    run, log, seconds = _flwr_run(tmp_path, 2, {"num-clients": 3, "rounds": 1, "connect-timeout": 5.0,
                                                "out-dir": str(tmp_path / "out")})
    assert run.flwr_status == "finished:failed", log[-3000:]
    assert "flowergraph: 2 of 3 clients connected; waiting up to" in log  # reported while it waits
    assert ("only 2 of num-clients=3 clients connected within 5 s (connect-timeout); start one SuperNode per client"
            in log)
    assert "[ROUND 1]" not in log
    assert seconds < 240  # the wait, not Flower's 10 minutes


def test_a_bad_value_is_refused_by_the_serverapp_with_the_launchers_message(tmp_path):
    bad = {"num-clients": 2, "method": "fedavgg"}
    with pytest.raises(ConfigError) as refused:
        parse_run_config(bad)  # what the launcher prints after "error: "
    assert "did you mean 'fedavg'?" in str(refused.value)
    run, log, _ = _flwr_run(tmp_path, 2, bad)
    assert run.flwr_status == "finished:failed"
    assert f"flowergraph: the run was refused: {refused.value}" in log
    assert "[INIT]" not in log


def test_a_launcher_run_leaves_nothing_in_the_temp_directory(tmp_path):
    own = tempfile.mkdtemp(prefix="fgx", dir="/tmp" if os.path.isdir("/tmp") else None)  # short: Ray's sockets
    try:
        env = dict(os.environ, TMPDIR=own)
        proc = subprocess.run([sys.executable, "-m", "flowergraph.simulation", "--num-clients", "2", "--rounds", "1",
                               "--out", str(tmp_path / "run"), "--ray-cpus", "1"], env=env, capture_output=True,
                              text=True, timeout=400)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert os.listdir(own) == []  # no Ray session folder, no PyG *_propagate_*.py, no torch cache
    finally:
        shutil.rmtree(own, ignore_errors=True)
