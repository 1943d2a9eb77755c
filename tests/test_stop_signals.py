"""Launchers stop every process they started when they are told to stop (SIGTERM, SIGHUP) or die (SIGKILL).

Each test starts a launcher with a marker variable in its environment, which every process under it inherits
(SuperLink, SuperExec, flwr-simulation, Ray's GCS server, raylet and actors, SuperNodes, ClientApps), lets it run
a round, stops it, and then looks for any process on the machine that still carries the marker: there must be
none. The marker is the test's own: independent of the launchers' own bookkeeping (their process-group tag)."""

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import pytest

MARKER = "FLOWERGRAPH_TEST_MARKER"


def _marked(value: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARKER) == value:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def _start(cmd: list[str], marker: str, tmp_path) -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, MARKER: marker, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=str(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    return proc, lines


def _wait_for(lines: list[str], text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in list(lines)):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"{text!r} did not appear within {timeout:.0f} s; output:\n{''.join(lines)[-3000:]}")


def _assert_all_gone(marker: str, seen: list[int], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    left = _marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _marked(marker)
    names = []
    for p in left:
        try:
            names.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            pass
        p.kill()  # never leave them behind, even when failing
    assert not left, "still running after the launcher stopped:\n" + "\n".join(names)
    alive = [pid for pid in seen if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive or not any(psutil.Process(pid).environ().get(MARKER) == marker for pid in alive)


@pytest.mark.parametrize(
    "signum,engine",
    [
        pytest.param(signal.SIGTERM, "ray", marks=[pytest.mark.simulation, pytest.mark.ray], id="SIGTERM-ray"),
        pytest.param(signal.SIGHUP, "inline", marks=pytest.mark.simulation, id="SIGHUP-inline"),
    ],
)
def test_simulation_launcher_stops_everything_on_a_stop_signal(tmp_path, signum, engine):
    """One handler serves SIGTERM and SIGHUP (``runtime.stop_on_signals``), and the engine only changes which
    processes there are to stop, so each signal is sent once: SIGTERM to a Ray run (SuperLink, SuperExec,
    flwr-simulation, Ray's daemons and actor), SIGHUP to an inline run (its one child process)."""
    marker = uuid.uuid4().hex
    proc, lines = _start(
        [
            sys.executable,
            "-m",
            "flowergraph.simulation",
            "--method",
            "fedavg",
            "--rounds",
            "500",
            "--out",
            str(tmp_path / "run"),
            "--ray-cpus",
            "1",
            "--set",
            f"simulation-engine={engine}",
        ],
        marker,
        tmp_path,
    )  # one Ray actor
    _wait_for(lines, "[round 2/500]", proc, timeout=240)
    seen = [p.pid for p in _marked(marker)]
    # Ray: the launcher, SuperLink, SuperExec, flwr-simulation, Ray, actors...; inline: the launcher, its child
    # running the engine, the process group's watchdog
    assert len(seen) >= (5 if engine == "ray" else 3), seen
    proc.send_signal(signum)
    assert proc.wait(timeout=90) == 128 + signum
    output = "".join(lines)
    assert f"stopped by {signal.Signals(signum).name}; every process started was stopped" in output
    _assert_all_gone(marker, seen)


@pytest.mark.simulation
@pytest.mark.ray
def test_a_killed_caller_of_run_simulation_leaves_nothing_running(tmp_path):
    """SIGKILL cannot be handled: the process group's watchdog stops the federation instead (what protects the
    test suite's own Flower processes when pytest is killed by a timeout)."""
    marker = uuid.uuid4().hex
    script = (
        "from flowergraph.simulation import run_simulation\n"
        f"run_simulation('fedavg', rounds=500, out={str(tmp_path / 'run')!r}, ray_cpus=1)\n"
    )
    proc, lines = _start([sys.executable, "-c", script], marker, tmp_path)
    _wait_for(lines, "[round 2/500]", proc, timeout=240)
    seen = [p.pid for p in _marked(marker)]
    proc.kill()
    proc.wait(timeout=30)
    _assert_all_gone(marker, seen, timeout=30)


@pytest.mark.deployment
def test_deployment_launcher_stops_everything_on_sigterm(tmp_path):
    marker = uuid.uuid4().hex
    proc, lines = _start(
        [
            sys.executable,
            "-m",
            "flowergraph.deployment",
            "loopback",
            "--num-nodes",
            "2",
            "--rounds",
            "100",
            "--out",
            str(tmp_path / "run"),
        ],
        marker,
        tmp_path,
    )
    _wait_for(lines, "[round 1/100]", proc, timeout=300)
    seen = [p.pid for p in _marked(marker)]
    assert len(seen) >= 4  # the launcher, SuperLink, two SuperNodes, ...
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    assert "stopped by SIGTERM; every process started here was stopped" in "".join(lines)
    _assert_all_gone(marker, seen)


def test_stop_finds_and_stops_what_flwr_run_local_left_for_one_flwr_home(tmp_path):
    """`python -m flowergraph.app.runtime stop` stops the background SuperLink of a FLWR_HOME and everything
    under it, and nothing of another FLWR_HOME (stand-ins with Flower's command lines)."""
    import time

    import psutil

    from flowergraph.app.runtime import local_superlink_processes

    script = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; "
        "time.sleep(120)', 'flower-superexec']); time.sleep(120)"
    )
    started = []
    for home in ("mine", "other"):
        log = tmp_path / home / "local-superlink" / "superlink.log"
        started.append(
            subprocess.Popen(
                [sys.executable, "-c", script, "flower-superlink", "--log-file", str(log)], start_new_session=True
            )
        )
    mine, other = started
    try:
        deadline = time.monotonic() + 30
        while len(local_superlink_processes(tmp_path / "mine")) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the stand-in SuperExec starts
        found = sorted(p.pid for p in local_superlink_processes(tmp_path / "mine"))
        assert mine.pid in found and len(found) == 2 and other.pid not in found
        proc = subprocess.run(
            [sys.executable, "-m", "flowergraph.app.runtime", "stop", "--flwr-home", str(tmp_path / "mine")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0 and "stopped 2 process(es)" in proc.stdout, proc.stdout + proc.stderr
        mine.wait(timeout=30)
        assert not [p for p in found if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert other.poll() is None  # another FLWR_HOME's SuperLink is left alone
        again = subprocess.run(
            [sys.executable, "-m", "flowergraph.app.runtime", "stop", "--flwr-home", str(tmp_path / "mine")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "nothing running for FLWR_HOME=" in again.stdout
    finally:
        from flowergraph.app.runtime import kill_tree

        for p in started:
            kill_tree(p.pid)
