"""The SuperNode's fork server (flowergraph.app.forkserver): each ``flwr-clientapp`` invocation runs in a forked
child of one warm process, with the invoking process's arguments, environment, folder and standard streams, and
its exit status, signals and death carried over. A stand-in command plays Flower's ``flwr_clientapp`` here; the
deployment tests run Flower's own through it."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from flowergraph.app import forkserver

pytestmark = pytest.mark.skipif(not forkserver.supported(), reason="fork servers need Linux")

STAND_IN = textwrap.dedent(
    """
    import os, sys, time

    def main():
        args = sys.argv[1:]
        assert sys.argv[0] == "flwr-clientapp", sys.argv
        what = args[args.index("--do") + 1]
        print(f"out pid={os.getpid()} ppid={os.getppid()} cwd={os.getcwd()} who={os.environ.get('WHO')}", flush=True)
        print("err line", file=sys.stderr, flush=True)
        if what == "sleep":
            time.sleep(60)
        if what.startswith("exit"):
            sys.exit(int(what[4:]))  # as Flower's flwr_exit ends its command

    def load():
        return main
    """
)


@pytest.fixture
def server(tmp_path):
    """A fork server with the stand-in command for the Runtime API address ``127.0.0.1:<unique>``, started as the
    entry would start it (detached); stopped (SIGTERM) after the test."""
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    address = f"127.0.0.1:{os.getpid() % 50000 + 10000}"
    key = forkserver.server_key(address)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flowergraph.app.forkserver", "serve", "--key", key, "--parent", str(os.getpid()),
         "--idle", "3", "--command", "stand_in:load"],
        env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while forkserver._connect(forkserver._address(key)) is None:
        assert proc.poll() is None and time.monotonic() < deadline, "the fork server did not start"
        time.sleep(0.05)
    yield address, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)


def _entry(address, *args, cwd, env=None, **kwargs):
    """A process that hands ``flwr-clientapp --runtime-api-address ADDRESS ARGS`` to the fork server."""
    code = "import sys; from flowergraph.app import forkserver; sys.exit(forkserver.run(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, "--runtime-api-address", address, *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
    )  # fmt: skip


def test_a_child_gets_the_entrys_arguments_streams_environment_folder_and_gives_back_its_status(server, tmp_path):
    address, proc = server
    folder = tmp_path / "here"
    folder.mkdir()
    pids = []
    for status in (0, 3):
        entry = _entry(address, "--do", f"exit{status}", cwd=folder, env=dict(os.environ, WHO=f"entry{status}"))
        out, err = entry.communicate(timeout=60)
        assert entry.returncode == status, err
        line = out.strip().splitlines()[-1]
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        assert fields["ppid"] == str(proc.pid) and fields["pid"] != str(entry.pid)  # a child of the server
        assert fields["cwd"] == str(folder) and fields["who"] == f"entry{status}"
        assert "err line" in err
        pids.append(fields["pid"])
    assert pids[0] != pids[1]  # one child per invocation, one server for both


def test_a_signal_to_the_entry_reaches_the_child_and_a_killed_entrys_child_stops(server, tmp_path):
    address, proc = server

    def child_of(entry):
        deadline = time.monotonic() + 30
        while True:
            children = [c for c in psutil.Process(proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]
            if children:
                return children[0]
            assert time.monotonic() < deadline and entry.poll() is None, "no child started"
            time.sleep(0.05)

    entry = _entry(address, "--do", "sleep", cwd=tmp_path)
    child = child_of(entry)
    entry.send_signal(signal.SIGTERM)
    assert entry.wait(timeout=30) == 128 + signal.SIGTERM  # the child's end, reported as a shell reports it
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    entry = _entry(address, "--do", "sleep", cwd=tmp_path)
    child = child_of(entry)
    entry.kill()  # nobody waits for this message's reply any more: its child ends within a few seconds
    entry.wait(timeout=30)
    psutil.wait_procs([child], timeout=15)
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_an_idle_server_ends(server):
    address, proc = server
    assert proc.wait(timeout=30) == 0  # --idle 3: nothing asked for 3 s
    assert forkserver._connect(forkserver._address(forkserver.server_key(address))) is None


def test_the_entrys_switch_names_its_choices(monkeypatch, capsys):
    from flowergraph.app import clientapp_entry

    monkeypatch.setenv(clientapp_entry.ENV, "on")
    monkeypatch.setattr(sys, "argv", ["flwr-clientapp", "--runtime-api-address", "127.0.0.1:1"])
    assert clientapp_entry.main() == 2
    assert "FLOWERGRAPH_FAST_CLIENTAPP='on' is not a valid choice; valid choices: fork, process, off" in (
        capsys.readouterr().err
    )
