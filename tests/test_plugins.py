"""A method added without touching flowergraph: the package tests/plugins/fgplug, installed with pip into a
temporary folder (its entry points registered there), importing only flowergraph's documented public API, runs
through Flower's simulation via a plain ``flwr run`` of an app folder written by ``python -m flowergraph.app write``
with one of its keys overridden, and a second method of it (graph classification) via the launcher."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowergraph import PUBLIC_API
from flowergraph.storage import read_run

PACKAGE = Path(__file__).resolve().parent / "plugins" / "fgplug"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """pip install --target: a real installation (metadata, entry points) in a folder put on PYTHONPATH."""
    site = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=build,
    )
    assert proc.returncode == 0, proc.stderr
    assert (site / "fgplug-0.1.0.dist-info" / "entry_points.txt").is_file()
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(site) + (f":{old}" if old else "")  # every process Flower starts finds it
    sys.path.insert(0, str(site))  # and this one (its registry was loaded before the package was installed)
    from importlib import invalidate_caches
    from importlib.metadata import entry_points

    from flowergraph.methods import register, unregister

    invalidate_caches()
    found = [ep for ep in entry_points(group="flowergraph.methods") if ep.value.startswith("fgplug.")]
    for ep in found:
        register(ep.load(), replace=True)
    yield site
    for ep in found:
        unregister(ep.name)
    sys.path.remove(str(site))
    if old is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = old


def test_the_plugin_imports_only_the_public_api():
    for path in sorted((PACKAGE / "fgplug").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("flowergraph"):
                    assert name in PUBLIC_API, f"{path.name} imports {name}, which is not public API"


def _in_fresh_interpreter(code: str, site: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_installed_plugin_is_found_and_its_keys_are_checked(installed):
    out = _in_fresh_interpreter(
        "from flowergraph.methods import methods\nfrom flowergraph.settings import parse_run_config\n"
        "print(sorted(m for m in methods() if m.startswith('plug')))\n"
        "print(parse_run_config({'method': 'plug-avg', 'plug-avg.scale': 0.5})['plug-avg.scale'])\n"
        "try:\n    parse_run_config({'method': 'plug-avg', 'plug-avg.scale': -1})\n"
        "except Exception as exc:\n    print(exc)\n",
        installed,
    )
    assert out.splitlines() == ["['plug-avg', 'plug-graph']", "0.5", "plug-avg.scale=-1.0: must be > 0.0"]


@pytest.mark.simulation
def test_the_plugin_runs_through_the_launcher_and_a_plain_flwr_run(installed, tmp_path, shared_data):
    from flowergraph.simulation import run_inline_app, run_simulation

    # Two Flower runs on the inline engine, one per method and way in: the node-level method by a plain run of an
    # app folder (the run config as `flwr run --run-config` passes it), the graph-level one by the launcher; each
    # with one of its keys overridden, which must reach every client.
    # 1. a plain run of an app folder written by the generator, with a plugin key overridden
    app = tmp_path / "app"
    out = _in_fresh_interpreter(f"from flowergraph.app.generator import main; main(['write', {str(app)!r}])", installed)
    assert "plug-avg" in out and "plug-avg.scale" in (app / "pyproject.toml").read_text().replace(
        "[tool.flwr.app.config.plug-avg]\nscale", "plug-avg.scale"
    )
    run = run_inline_app(
        app,
        num_supernodes=3,
        log_dir=tmp_path / "plain",
        timeout=400,
        run_config={
            "method": "plug-avg",
            "plug-avg.scale": 0.25,
            "num-clients": 3,
            "rounds": 1,
            "out-dir": str(tmp_path / "plain"),
        },
    )
    assert run.status == "completed", run.log_file.read_text()[-3000:]
    (round1,) = read_run(tmp_path / "plain")["rounds"]
    assert {c["fit_plug_scale"] for c in round1["clients"].values()} == {0.25}
    # 2. the launcher, with the plugin's graph-classification method
    result = run_simulation(
        "plug-graph",
        rounds=2,
        dataset="MUTAG,BZR",
        out=tmp_path / "graph",
        timeout=400,
        overrides={"data-dir": str(shared_data), "plug-graph.tag": "hello", "simulation-engine": "inline"},
    )
    assert result.ok, result.log_file.read_text()[-3000:]
    rounds = read_run(tmp_path / "graph")["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    assert {c["fit_plug_tag_length"] for r in rounds for c in r["clients"].values()} == {5}
    assert rounds[-1]["mean_client_accuracy"] > 0.4
