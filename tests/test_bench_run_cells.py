"""``reproductions/_runner/common.run_cells``: a benchmark's cells computed here one after another or in worker
processes at once (``--jobs``), each finished cell handed back as it finishes and a failing cell reported without
losing the others."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner.common import add_jobs, run_cells  # noqa: E402


def square(x: int) -> tuple[int, int]:
    if x == 3:
        raise RuntimeError("cell 3 is broken")
    return x * x, os.getpid()


def worker_torch() -> tuple[int, bool]:
    """The worker's torch threads, and whether a product below float32's smallest normal (1.18e-38) is flushed."""
    import torch

    return torch.get_num_threads(), (torch.tensor([1e-30]) * 1e-10).item() == 0.0


def meet(folder: str, me: str, other: str) -> bool:
    """Writes ``me`` and waits for ``other``: True only if the other cell runs at the same time."""
    Path(folder, me).touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if Path(folder, other).exists():
            return True
        time.sleep(0.05)
    return False


def test_here_one_after_another_and_a_failing_cell_does_not_stop_the_others():
    got = list(run_cells(square, [(1,), (3,), (2,)]))
    assert [args for args, _, _ in got] == [(1,), (3,), (2,)]  # in the order asked for
    assert [r[0] if r else None for _, r, _ in got] == [1, None, 4]
    assert {r[1] for _, r, _ in got if r} == {os.getpid()}  # in this process
    assert got[0][2] is None and got[2][2] is None
    assert "RuntimeError: cell 3 is broken" in got[1][2] and "Traceback" in got[1][2]


def test_workers_compute_cells_at_once_in_their_own_processes(tmp_path):
    got = dict(
        (
            (args[1], result)
            for args, result, error in run_cells(
                meet, [(str(tmp_path), "a", "b"), (str(tmp_path), "b", "a")], workers=2
            )
        )
    )
    assert got == {"a": True, "b": True}  # each saw the other's marker: both ran at the same time
    results = {args: (result, error) for args, result, error in run_cells(square, [(2,), (3,), (5,)], workers=2)}
    assert results[(2,)][0][0] == 4 and results[(5,)][0][0] == 25
    assert os.getpid() not in {results[(2,)][0][1], results[(5,)][0][1]}  # in the workers, not here
    assert results[(3,)][0] is None and "RuntimeError: cell 3 is broken" in results[(3,)][1]


def test_workers_train_with_one_thread_and_denormals_flushed(monkeypatch):
    # a spawned process starts with torch's defaults (a thread per core, denormals kept); a cell that trains without
    # Flower's in-process runner ran so beside another worker, oversubscribing the cores (FL-Random's codes per
    # second fell 4x). The worker must set torch as the benchmark's own process does.
    # (without the worker set-up this machine's workers report (2, False); a one-core machine would still catch the
    # flush)
    monkeypatch.delenv("FLOWERGRAPH_FLUSH_DENORMAL", raising=False)
    [(_, got, error)] = list(run_cells(worker_torch, [()], workers=2))
    assert error is None and got == (1, True)


def test_a_bad_job_count_names_the_value(capsys):
    with pytest.raises(ValueError, match=r"workers=0: must be >= 1"):
        list(run_cells(square, [(1,)], workers=0))
    parser = argparse.ArgumentParser(prog="bench")
    add_jobs(parser)
    for bad in ("0", "-1", "two"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["--jobs", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"argument --jobs: {bad!r}: must be a whole number >= 1 (cells computed at once" in err
    assert parser.parse_args(["--jobs", "2"]).jobs == 2 and parser.parse_args([]).jobs == 1
