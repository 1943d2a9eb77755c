"""Process plumbing the reproductions and the benchmarks share: the memory (and CPU) of a process tree, sampled in a
thread (:class:`TreeMemorySampler`), and a command run as a measured child process (:func:`run_measured`)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


EXEC_GRACE_S = 5.0  # seconds after its start by which a process has exec'd (see _processes)


class TreeMemorySampler:
    """Samples, every ``interval`` s, the summed memory of a process tree: process ``pid`` (this one by default;
    ``root=False`` leaves it out) and all its descendants; with ``groups``, also every process whose
    ``FLOWERGRAPH_PROCESS_GROUP`` (``flowergraph.app.runtime.GROUP_ENV``) is ``tag`` or a group the root process
    started (``fg-<pid>-...``): Ray's daemons leave the tree but keep the tag. A process's tag is read once (its
    environment is fixed at exec).

    By default the sum is of PSS (proportional set size: shared pages split between their users, so summing over
    processes does not double-count; reading the smaps of ~20 processes is not free on 2 cores, hence 1 s);
    ``rss=True`` sums RSS (cheap; shared pages counted once per process that maps them). Keeps the peak (bytes),
    the processes at the peak (``peak_procs``), the samples, and each process's CPU time as last seen (``cpu_s``).

        with TreeMemorySampler() as mem: ...
        mem.peak_mb
    """

    def __init__(
        self,
        pid: int | None = None,
        interval: float = 1.0,
        *,
        rss: bool = False,
        root: bool = True,
        groups: bool = False,
        tag: str | None = None,
    ):
        self.pid = pid or os.getpid()
        self.interval, self.rss, self.root, self.groups, self.tag = interval, rss, root, groups, tag
        self.peak, self.peak_procs, self.samples, self._count = 0, 0, 0, 0
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, start time) -> CPU seconds (user + system)
        self._tagged: dict[tuple[int, float], bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> list:
        """The sampled processes now (see the class docstring)."""
        import psutil

        found: dict[int, Any] = {}
        try:
            root = psutil.Process(self.pid)
            found = {p.pid: p for p in [root, *root.children(recursive=True)]}
        except psutil.Error:
            pass
        if self.groups:
            from flowergraph.app.runtime import GROUP_ENV

            own = f"fg-{self.pid}-"
            for p in psutil.process_iter(["create_time"]):
                key = (p.pid, p.info.get("create_time") or 0.0)
                if p.pid in found or p.pid == self.pid:
                    continue
                tagged = self._tagged.get(key)
                if tagged is None:
                    try:
                        group = p.environ().get(GROUP_ENV, "")
                    except (psutil.Error, OSError):
                        continue  # not readable now (starting, ending): asked again next time
                    tagged = group == self.tag or group.startswith(own)
                    # a process seen between fork and exec still shows its parent's environment: an untagged
                    # answer is kept only once the process is old enough to have run its own program
                    if tagged or time.time() - key[1] > EXEC_GRACE_S:
                        self._tagged[key] = tagged
                if tagged:
                    found[p.pid] = p
        if not self.root:
            found.pop(self.pid, None)
        return list(found.values())

    def _total(self) -> int:
        """The summed memory of the processes now (bytes), recording their CPU times."""
        import psutil

        total, procs = 0, self._processes()
        for p in procs:
            try:
                with p.oneshot():
                    total += p.memory_info().rss if self.rss else p.memory_full_info().pss
                    t = p.cpu_times()
                    self.cpu[(p.pid, p.create_time())] = t.user + t.system
            except (psutil.Error, OSError):
                continue
        self._count = len(procs)
        return total

    def sample(self) -> int:
        """One sample (bytes), counted into the peak."""
        total = self._total()
        if total > self.peak:
            self.peak, self.peak_procs = total, self._count
        self.samples += 1
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def start(self) -> "TreeMemorySampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())


def run_measured(
    cmd: list[str],
    log: Path,
    *,
    timeout: float,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    max_memory: float = float("inf"),
    interval: float = 1.0,
    rss: bool = False,
    group: bool = False,
) -> dict[str, Any]:
    """Run ``cmd`` in a session of its own, its output to ``log``, under a :class:`TreeMemorySampler` (``interval``,
    ``rss``), and stop it and everything it started by PID after ``timeout`` s or once its tree passes
    ``max_memory`` bytes; with ``group`` the child and what it starts carry a process-group tag
    (``flowergraph.app.runtime.ProcessGroup``), sampled and stopped with it (Ray's daemons leave the tree).
    Returns its launch time (wall clock, ``launched_at``), ``wall_s``, its exit status ``rc``, how it ``ended``
    ("exited", "timed out", "exceeded memory"), the ``peak`` (bytes), ``peak_processes`` and ``samples``."""
    from flowergraph.app.runtime import ProcessGroup, kill_tree

    tags = ProcessGroup().start() if group else None
    env = tags.env(env) if tags is not None else env
    log.parent.mkdir(parents=True, exist_ok=True)
    ended = "exited"
    with open(log, "w") as out:
        launched, t0 = time.time(), time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        sampler = TreeMemorySampler(proc.pid, interval, rss=rss, groups=group, tag=tags and tags.tag).start()
        try:
            while True:
                try:
                    proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() - t0 > timeout:
                    ended = "timed out"
                elif sampler.peak > max_memory:
                    ended = "exceeded memory"
                else:
                    continue
                kill_tree(proc.pid)  # SIGTERM (a launcher stops its own processes), SIGKILL after 5 s
                proc.wait()
                break
        finally:
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
            sampler.stop()
            if tags is not None:
                tags.stop()
    return {
        "launched_at": launched,
        "wall_s": time.monotonic() - t0,
        "rc": proc.returncode,
        "ended": ended,
        "peak": sampler.peak,
        "peak_processes": sampler.peak_procs,
        "samples": sampler.samples,
    }
