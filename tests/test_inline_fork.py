"""``FLOWERGRAPH_INLINE_FORK=on`` (:mod:`flowergraph.app.inline_entry`): inline runs forked from a warm fork server
give exactly the rounds of a fresh interpreter's, run in a forked child, stop on the launcher's timeout, and the
server ends with the process that launched them."""

import json
import os
import subprocess
import sys
import time

import psutil
import pytest
from records import assert_same_rounds

from flowergraph.app import inline_entry
from flowergraph.simulation import run_simulation
from flowergraph.storage.results import read_run

INLINE = {"simulation-engine": "inline", "seed": 3}
COSTS = ("elapsed_s", "ended_at", "time_s")


def _servers(parent: int) -> list[psutil.Process]:
    """The inline fork servers started for ``parent``."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "flowergraph.app.forkserver" in cmd and inline_entry.COMMAND in cmd and f"--parent {parent} " in cmd:
            found.append(p)
    return found


def _handled(times) -> list[dict]:
    return [json.loads(line) for line in times.read_text().splitlines()]


@pytest.mark.simulation
def test_forked_runs_equal_a_fresh_interpreters_run(tmp_path, monkeypatch):
    monkeypatch.delenv(inline_entry.ENV, raising=False)
    fresh = run_simulation("fedavg", num_clients=3, rounds=2, out=tmp_path / "fresh", overrides=INLINE, timeout=300)
    monkeypatch.setenv(inline_entry.ENV, "on")
    forked, servers = [], []
    for k in range(2):  # the first starts the server (unless an earlier test did), the second finds it
        times = tmp_path / f"times-{k}.jsonl"
        monkeypatch.setenv("FLOWERGRAPH_MESSAGE_TIMES", str(times))
        result = run_simulation(
            "fedavg", num_clients=3, rounds=2, out=tmp_path / f"forked-{k}", overrides=INLINE, timeout=300
        )
        assert result.status == "completed"
        forked.append(_handled(times))
        servers.append(sorted(p.pid for p in _servers(os.getpid())))
        assert_same_rounds(read_run(tmp_path / "fresh")["rounds"], read_run(tmp_path / f"forked-{k}")["rounds"], COSTS)
    assert fresh.status == "completed"
    assert servers[0] and servers[1] == servers[0], servers  # the second run started no server
    # every message of each run was handled in one process, a child forked by that server (not the launcher's)
    for records in forked:
        assert {r["forked"] for r in records} == {True} and len({r["pid"] for r in records}) == 1
    assert forked[0][0]["pid"] != forked[1][0]["pid"]
    assert forked[0][0]["pid"] not in [p.pid for p in psutil.Process().children(recursive=True)]


@pytest.mark.simulation
def test_the_timeout_stops_a_forked_run_and_the_server_ends_with_its_launcher(tmp_path):
    """A launcher process (a fresh interpreter) runs one forked run past its timeout: the run is reported timed out,
    its forked child is gone, and once the launcher has exited its fork server ends too."""
    script = (
        "import json, sys\n"
        "from flowergraph.simulation import run_simulation\n"
        f"r = run_simulation('fedavg', num_clients=2, rounds=100000, out={str(tmp_path / 'run')!r}, "
        "overrides={'simulation-engine': 'inline'}, timeout=15)\n"
        "print('STATUS', r.status, flush=True)\n"
    )
    times = tmp_path / "times.jsonl"
    env = dict(os.environ, **{inline_entry.ENV: "on", "FLOWERGRAPH_MESSAGE_TIMES": str(times)})
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    launcher = proc.pid
    seen: list[psutil.Process] = []
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        seen = seen or _servers(launcher)
        time.sleep(0.2)
    out = proc.communicate(timeout=120)[0]
    assert "STATUS failed" in out and "stopped after the 15 s timeout" in out, out[-2000:]
    assert seen, "no fork server was started"
    child = _handled(times)[0]["pid"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (psutil.pid_exists(child) or any(p.is_running() for p in seen)):
        time.sleep(0.2)
    assert not psutil.pid_exists(child), "the forked run outlived its timeout"
    assert not any(p.is_running() for p in seen), "the fork server outlived the launcher"


def test_off_unless_switched_on(monkeypatch):
    for value, on in (("", False), ("off", False), ("0", False), ("on", True), ("1", True)):
        monkeypatch.setenv(inline_entry.ENV, value)
        assert inline_entry.enabled() is on, value
