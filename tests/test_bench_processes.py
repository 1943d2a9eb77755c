"""The shared runner's process plumbing (``reproductions/_runner/processes.py``): the memory sampler counts a
process's children and the processes that carry its group tag, not only the process itself (Ray's daemons leave the
tree), and a measured child past its timeout is stopped with its whole tree and reported as such."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner.processes import TreeMemorySampler, run_measured  # noqa: E402

HOLD = "import sys, time; b = bytearray(60 * 2**20); time.sleep(60)"
SPAWN = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {HOLD!r}]); time.sleep(60)"


def test_the_sampler_counts_the_tree_and_the_tagged_processes():
    from flowergraph.app.runtime import GROUP_ENV, kill_tree

    root = subprocess.Popen([sys.executable, "-c", SPAWN], start_new_session=True)
    env = {GROUP_ENV: "fg-test-tag", "PATH": "/usr/bin:/bin"}
    tagged = subprocess.Popen([sys.executable, "-c", HOLD], env=env, start_new_session=True)  # outside the tree
    try:
        sampler = TreeMemorySampler(root.pid, rss=True, groups=True, tag="fg-test-tag")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            sampler.sample()
            if sampler.peak_procs == 3 and sampler.peak > 120 * 2**20:
                break
            time.sleep(0.2)
        assert sampler.peak_procs == 3 and sampler.peak > 120 * 2**20
        assert sampler.cpu_s > 0
    finally:
        kill_tree(root.pid)
        kill_tree(tagged.pid)


def test_a_tagged_process_first_seen_before_its_exec_is_found_later(monkeypatch):
    """Between fork and exec a process shows its parent's environment (no tag): under load the sampler can read
    it then. That first answer must not stick: the next sample finds the tag."""
    import psutil

    from flowergraph.app.runtime import GROUP_ENV, kill_tree

    root = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    env = {GROUP_ENV: "fg-test-late", "PATH": "/usr/bin:/bin"}
    tagged = subprocess.Popen([sys.executable, "-c", HOLD], env=env, start_new_session=True)  # outside root's tree
    real = psutil.Process.environ
    reads = []

    def before_exec_once(self):
        reads.append(self.pid)
        if self.pid == tagged.pid and reads.count(tagged.pid) == 1:
            return {"PATH": "/usr/bin:/bin"}  # what a reader sees before the exec
        return real(self)

    monkeypatch.setattr(psutil.Process, "environ", before_exec_once)
    try:
        sampler = TreeMemorySampler(root.pid, rss=True, groups=True, tag="fg-test-late")
        assert tagged.pid not in [p.pid for p in sampler._processes()]
        assert tagged.pid in [p.pid for p in sampler._processes()]
        assert reads.count(tagged.pid) == 2
    finally:
        kill_tree(root.pid)
        kill_tree(tagged.pid)


def test_a_measured_child_past_its_timeout_is_stopped_with_its_tree(tmp_path):
    import psutil

    res = run_measured([sys.executable, "-c", SPAWN], tmp_path / "child.log", timeout=3, interval=0.2, rss=True)
    assert res["ended"] == "timed out" and 3 <= res["wall_s"] < 30
    assert res["peak"] > 60 * 2**20 and res["peak_processes"] == 2 and res["samples"] > 1
    holders = [p for p in psutil.process_iter(["cmdline"]) if HOLD in " ".join(p.info["cmdline"] or [])]
    assert not holders, "the child's child outlived it"
    quick = run_measured([sys.executable, "-c", "print('hi')"], tmp_path / "quick.log", timeout=60, group=True)
    assert quick["ended"] == "exited" and quick["rc"] == 0 and (tmp_path / "quick.log").read_text() == "hi\n"
