"""The benchmark-only methods (``benchmarks/noop_methods.py``: ``noop``, ``fedstar-noop``, ``flagcns-noop``): the
library registers none of them; flowergraph's plugin mechanism adds them (``FLOWERGRAPH_PLUGINS``), and
``enable()`` reaches the processes a launcher starts, as the benchmarks that measure against them need."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowergraph.methods import PLUGINS_ENV, get_method, unregister

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import noop_methods  # noqa: E402

NAMES = ["noop", "fedstar-noop", "flagcns-noop"]


def _methods_in_a_fresh_interpreter(**env: str) -> list[list[str]]:
    code = (
        "from flowergraph.methods import methods\n"
        "print(','.join(methods())); print(','.join(methods(include_benchmark=False)))"
    )
    base = {k: v for k, v in os.environ.items() if k != PLUGINS_ENV}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env}, cwd="/", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "could not load" not in proc.stderr, proc.stderr
    return [line.split(",") for line in proc.stdout.splitlines()]


def test_the_library_has_none_and_the_plugin_adds_them_after_the_others():
    library, without = _methods_in_a_fresh_interpreter()
    assert not set(NAMES) & set(library) and library == without
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(REPO)) if p)
    every, without = _methods_in_a_fresh_interpreter(PYTHONPATH=path, **{PLUGINS_ENV: noop_methods.PLUGIN})
    assert every == library + NAMES and without == library  # benchmark_only: left out where a user's list is shown


def test_each_mirrors_its_library_method_but_for_the_client():
    from flowergraph.methods.baselines import FEDAVG
    from flowergraph.methods.fedstar import FEDSTAR
    from flowergraph.methods.flagcns import FLAGCNS

    noop, fedstar, flagcns = noop_methods.METHODS
    assert [m.name for m in noop_methods.METHODS] == NAMES and all(m.benchmark_only for m in noop_methods.METHODS)
    assert noop.tasks == ("node",) and noop.build_strategy is FEDAVG.build_strategy and not noop.stateful_clients
    assert fedstar.tasks == FEDSTAR.tasks and not fedstar.options
    assert (fedstar.build_strategy, fedstar.check, fedstar.preflight) == (
        FEDSTAR.build_strategy,
        FEDSTAR.check,
        FEDSTAR.preflight,
    )
    same = ("tasks", "build_strategy", "check", "stateful_clients", "fixed_rounds", "update_kind", "server_evaluate")
    assert all(getattr(flagcns, k) == getattr(FLAGCNS, k) for k in same) and not flagcns.options
    assert flagcns.build_client is not FLAGCNS.build_client


@pytest.fixture
def enabled(monkeypatch):
    """``enable()`` in this process; its environment, path and registrations undone afterwards."""
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv(PLUGINS_ENV, os.environ.get(PLUGINS_ENV, ""))
    monkeypatch.setattr(sys, "path", list(sys.path))
    noop_methods.enable()
    yield
    for name in NAMES:
        unregister(name)


def test_enable_registers_here_and_names_the_plugin_for_the_processes_started(enabled):
    noop_methods.enable()  # a second call adds nothing
    assert os.environ[PLUGINS_ENV].split(",").count(noop_methods.PLUGIN) == 1
    assert os.environ["PYTHONPATH"].split(os.pathsep).count(str(REPO)) == 1
    assert [get_method(name).name for name in NAMES] == NAMES


@pytest.mark.simulation
def test_noop_runs_through_the_launcher_whose_child_process_gets_it_from_the_environment(enabled, tmp_path):
    from flowergraph.simulation import run_simulation
    from flowergraph.storage import read_run

    result = run_simulation(
        "noop", num_clients=2, rounds=2, out=tmp_path / "run", overrides={"simulation-engine": "inline"}, timeout=300
    )
    assert result.ok, result.log_file.read_text()[-3000:]
    assert [r["round"] for r in read_run(tmp_path / "run")["rounds"] if r.get("round", 0) >= 1] == [1, 2]
