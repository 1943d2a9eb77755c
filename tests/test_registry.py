"""The method registry: built-in methods, registrations from other packages, and a method that lives only in the
tests (tests/plugins/toy_personal.py) running through the real ServerApp/ClientApp code paths, in one process and
through Flower's simulation, with per-round phases and client checkpoints."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flowergraph.storage.checkpoint import load_checkpoint
from flowergraph.settings import markdown_table, option_by_key, parse_run_config
from flowergraph.errors import CheckpointError, ConfigError
from flowergraph.methods import Method, get_method, get_task, methods, register, tasks, unregister
from flowergraph.settings.options import Option
from flowergraph.storage.results import read_run

from flowergraph.app.inprocess import run_inprocess

REPO = Path(__file__).resolve().parents[1]
PLUGINS = Path(__file__).resolve().parent / "plugins"


@pytest.fixture
def toy():
    sys.path.insert(0, str(PLUGINS))
    import toy_personal

    method = toy_personal.register_once()
    yield method
    unregister(method.name)
    sys.path.remove(str(PLUGINS))


def _noop(_):
    raise AssertionError("not built in this test")


def test_builtin_methods_tasks_and_unknown_names():
    # the core registrations (baselines, node, graph, link), then every other module of flowergraph.methods, found
    # (not listed) and taken in alphabetical order
    assert list(methods()) == [
        "fedavg",
        "fedprox",
        "fedper",
        "gcfl",
        "centralized",
        "local",
        "asfgnn",
        "asfgnn-cm",
        "fedgcn",
        "fedgraph",
        "fedstar",
        "flagcns",
    ]
    # the benchmark-only methods (noop, fedstar-noop, flagcns-noop) are a plugin of benchmarks/: not the library's
    assert list(methods(include_benchmark=False)) == list(methods())
    assert list(tasks()) == ["node", "graph", "link"]
    assert all(get_method(m).tasks == ("node", "graph", "link") for m in ("fedavg", "fedprox", "fedper", "gcfl"))
    assert get_method("fedstar").tasks == ("graph",) and get_method("fedgcn").tasks == ("node", "link")
    assert get_method("fedgcn").options[0].key == "fedgcn.hops" and get_method("fedgcn").stateful_clients
    assert get_method("centralized").whole_graph
    assert get_method("gcfl").model_scope == "per-group" and not get_method("gcfl").summable_updates
    with pytest.raises(
        ConfigError,
        match=r"unknown method 'fedsage'; valid choices: fedavg, fedprox, fedper, gcfl, "
        r"centralized, local, asfgnn, asfgnn-cm, fedgcn, fedgraph, fedstar, flagcns; did you mean 'fedavg'",
    ):
        get_method("fedsage")
    with pytest.raises(ConfigError, match="unknown task 'edge'; valid choices: node, graph, link"):
        get_task("edge")


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(name="My Method"), "method name 'My Method' must be lowercase letters, digits and '-'"),
        (dict(task="Edge"), "unknown task 'Edge'; valid choices: node, graph"),
        (dict(update_kind="deltas"), "unknown update_kind 'deltas'; valid choices: weights, gradients, partial"),
        (dict(model_scope="per-node"), "unknown model_scope 'per-node'; valid choices: global, per-group, per-client"),
        (dict(options=(Option("lr2", 0.1, "x"),)), "option 'lr2' must be named 'toy.<key>'"),
    ],
)
def test_bad_registrations_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        Method(**{"name": "toy", "summary": "s", "task": "node", "build_strategy": _noop, "build_client": _noop, **kw})


def test_registrations_cannot_collide():
    with pytest.raises(ValueError, match="a method named 'fedgcn' is already registered"):
        register(Method(name="fedgcn", summary="s", task="node", build_strategy=_noop, build_client=_noop))
    other = Method(
        name="toy",
        summary="s",
        task="node",
        build_strategy=_noop,
        build_client=_noop,
        options=(Option("toy.x", 1, "x"),),
    )
    register(other)
    try:
        assert "toy.x" in option_by_key() and parse_run_config({"method": "toy", "toy.x": 3})["toy.x"] == 3
        with pytest.raises(ConfigError, match=r"toy.x=0: must be >= 1"):
            register(
                Method(
                    name="toy",
                    summary="s",
                    task="node",
                    build_strategy=_noop,
                    build_client=_noop,
                    options=(Option("toy.x", 1, "x", check=lambda v: None if v >= 1 else "must be >= 1"),),
                ),
                replace=True,
            )
            parse_run_config({"method": "toy", "toy.x": 0})
    finally:
        unregister("toy")
    assert "toy.x" not in option_by_key()


def test_shared_files_never_branch_on_a_method_name():
    """The Flower apps, the settings, the launchers and the deployment tools look methods up in the registry."""
    from flowergraph.settings.choices import DP_MODES

    # a method named as another key's choice (`local`, dp=local) is caught by `method ==` alone, not by its literal
    names = "|".join(re.escape(m) for m in methods() if m not in DP_MODES)
    branch = re.compile(rf"""(\bmethod\s*(==|!=)|\bmethod\s+(not\s+)?in\s*[(\[{{]|(==|!=)\s*["'](?:{names})["'])""")
    files = [REPO / "flowergraph" / "simulation.py"]
    for package in ("app", "settings", "deployment"):
        files += sorted((REPO / "flowergraph" / package).glob("*.py"))
    for path in files:
        hits = [line.strip() for line in path.read_text().splitlines() if branch.search(line)]
        assert not hits, f"{path.name} branches on a method: {hits}"


def test_a_plugin_method_gets_its_keys_checked_and_documented(toy):
    assert parse_run_config({"method": "toy-personal"})["toy-personal.lr"] == 0.01
    with pytest.raises(ConfigError, match=r"toy-personal.lr=-1.0: must be > 0.0"):
        parse_run_config({"method": "toy-personal", "toy-personal.lr": -1})
    assert "**`toy-personal`: test-only personalised GCN" in markdown_table()
    with pytest.raises(ConfigError, match="method 'toy-personal' does node classification but dataset 'MUTAG'"):
        parse_run_config({"method": "toy-personal", "dataset": "MUTAG"})


def _toy_run(tmp_path, name, rounds, **extra):
    return {
        "method": "toy-personal",
        "num-clients": 3,
        "rounds": rounds,
        "seed": 4,
        "node.local-steps": 2,
        "node.partitioner": "louvain",
        "checkpoint-every": 2,
        "out-dir": str(tmp_path / name),
        "state-dir": str(tmp_path / f"{name}-state"),
        **extra,
    }


def _private_states(proxies):
    from flowergraph.clients import ClientState

    return {
        p.context.node_config["partition-id"]: {
            name: ClientState(p.context.state).get_arrays(name) for name in ("toy-private", "toy-adam")
        }
        for p in proxies
    }


def test_personalised_method_resumed_equals_uninterrupted_in_one_process(toy, tmp_path):
    """Private layers and Adam moments live in context.state; a resumed run has fresh contexts, so the clients
    must restore them from their checkpoint files to compute what the uninterrupted run computes (bit for bit)."""
    _, ref_proxies = run_inprocess(_toy_run(tmp_path, "reference", 4))
    run_inprocess(_toy_run(tmp_path, "run", 2))
    _, proxies = run_inprocess({**_toy_run(tmp_path, "run", 4), "resume-from": str(tmp_path / "run")})
    ref, got = read_run(tmp_path / "reference"), read_run(tmp_path / "run")
    assert [r["round"] for r in got["rounds"]] == [1, 2, 3, 4]
    assert [r["accuracy"] for r in got["rounds"]] == [r["accuracy"] for r in ref["rounds"]]
    for a, b in zip(
        load_checkpoint(tmp_path / "run").arrays, load_checkpoint(tmp_path / "reference").arrays, strict=True
    ):
        np.testing.assert_array_equal(a, b)
    want, have = _private_states(ref_proxies), _private_states(proxies)
    for pid in want:
        for name in ("toy-private", "toy-adam"):
            assert want[pid][name].keys() == have[pid][name].keys()
            for key in want[pid][name]:
                np.testing.assert_array_equal(have[pid][name][key], want[pid][name][key])
    # The per-round phase is in every round's record: before round r each client had trained r-1 times.
    for r in got["rounds"]:
        census = r["phases"]["toy-personal.census"]
        assert census["trained"] == {str(k): r["round"] - 1 for k in range(3)} and census["bytes_up"] > 0
    ckpt = load_checkpoint(tmp_path / "run")
    files = ckpt.strategy_state["client_checkpoint"]["files"]
    assert sorted(files) == ["0", "1", "2"] and all(Path(f).is_file() for f in files.values())
    assert all(f"/partition-{k}/round-000004.npz" in files[str(k)] for k in range(3))


def test_resume_without_a_client_state_file_fails_naming_it(toy, tmp_path):
    run_inprocess(_toy_run(tmp_path, "run", 2))
    ckpt = load_checkpoint(tmp_path / "run")
    lost = Path(ckpt.strategy_state["client_checkpoint"]["files"]["1"])
    lost.unlink()
    with pytest.raises(
        RuntimeError,
        match=rf"client-restore \(flowergraph.state-load\): client 1 \(node 1002\) "
        rf"failed: client state file '{re.escape(str(lost))}' does not exist",
    ):
        run_inprocess({**_toy_run(tmp_path, "run", 4), "resume-from": str(tmp_path / "run")})
    from flowergraph.app.server_app import resume_state

    with pytest.raises(CheckpointError, match="method='toy-personal' in the checkpoint but 'fedavg' now"):
        resume_state(
            parse_run_config({**_toy_run(tmp_path, "x", 4), "method": "fedavg", "resume-from": str(tmp_path / "run")})
        )


@pytest.mark.simulation
def test_plugin_method_through_flowers_simulation_with_checkpoint_and_resume(toy, tmp_path):
    """The toy method is installed as a package would be (an entry point in the group flowergraph.methods, found
    on PYTHONPATH by the process the launcher starts; on the inline engine). It runs 2 rounds with checkpoints, then
    resumes to 4: the result equals the uninterrupted run computed in one process."""
    from flowergraph.simulation import resume_config, run_simulation

    site = tmp_path / "site"
    dist = site / "toy_personal-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-personal\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[flowergraph.methods]\ntoy-personal = toy_personal:METHOD\n")
    env_path = f"{PLUGINS}:{site}"
    import os

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path + (f":{old}" if old else "")
    try:
        overrides = {
            k: v
            for k, v in _toy_run(tmp_path, "sim", 2).items()
            if k not in ("method", "num-clients", "rounds", "state-dir")
        }
        overrides["simulation-engine"] = "inline"
        first = run_simulation("toy-personal", num_clients=3, rounds=2, overrides=overrides, timeout=400)
        assert first.ok, first.log_file.read_text()[-3000:]
        resume = resume_config(tmp_path / "sim")
        assert resume["simulation-engine"] == "inline"  # resumed on the engine it ran on
        second = run_simulation("toy-personal", num_clients=3, rounds=4, timeout=400, overrides={**resume, "rounds": 4})
        assert second.ok, second.log_file.read_text()[-3000:]
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    assert "every client restored its state of round 2" in second.log_file.read_text()
    assert (tmp_path / "sim" / "client-state").is_dir()  # the launcher keeps client state with the run
    run_inprocess(_toy_run(tmp_path, "reference", 4))
    got, ref = read_run(tmp_path / "sim"), read_run(tmp_path / "reference")
    assert [r["round"] for r in got["rounds"]] == [1, 2, 3, 4]
    np.testing.assert_allclose(
        [r["accuracy"] for r in got["rounds"]], [r["accuracy"] for r in ref["rounds"]], atol=1e-6
    )
    assert [r["phases"]["toy-personal.census"]["trained"] for r in got["rounds"]] == [
        {str(k): r - 1 for k in range(3)} for r in range(1, 5)
    ]
    for a, b in zip(
        load_checkpoint(tmp_path / "sim").arrays, load_checkpoint(tmp_path / "reference").arrays, strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_entry_point_discovery_in_a_fresh_interpreter(tmp_path):
    """A package that declares the entry point is found by a process that never imported it."""
    site = tmp_path / "site"
    dist = site / "toy_personal-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-personal\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[flowergraph.methods]\ntoy-personal = toy_personal:METHOD\n")
    code = (
        "from flowergraph.methods import methods; from flowergraph.settings import parse_run_config\n"
        "print(list(methods())); print(parse_run_config({'method': 'toy-personal'})['toy-personal.lr'])\n"
    )
    env = {"PYTHONPATH": f"{PLUGINS}:{site}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "['fedavg', 'fedprox', 'fedper', 'gcfl', 'centralized', 'local', 'asfgnn', 'asfgnn-cm', 'fedgcn', "
        "'fedgraph', 'fedstar', 'flagcns', 'toy-personal']",
        "0.01",
    ]
    env["FLOWERGRAPH_PLUGINS"] = "no_such_plugin"  # a broken plugin is reported when its method is asked for
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", "from flowergraph.methods import get_method; get_method('mine')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (
        "unknown method 'mine'; valid choices: fedavg, fedprox, fedper, gcfl, centralized, local, asfgnn, "
        "asfgnn-cm, fedgcn, fedgraph, fedstar, flagcns, toy-personal; "
        "plugins that "
        "failed to load: FLOWERGRAPH_PLUGINS module no_such_plugin: ModuleNotFoundError" in proc.stderr
    )


def test_the_method_order_does_not_depend_on_which_module_was_imported_first():
    """The method list (docs, error messages, the config reference) is the built-in modules' order, then plugins,
    in a process that imported a method's module before the registry loaded as in one that did not."""
    import subprocess
    import sys

    script = (
        "import sys\n{first}\nfrom flowergraph.methods.registry import methods, tasks\n"
        "print(','.join(methods()), ';'.join(tasks()))"
    )
    plain = subprocess.run(
        [sys.executable, "-c", script.format(first="")], capture_output=True, text=True, check=True, timeout=300
    ).stdout.strip()
    early = subprocess.run(
        [
            sys.executable,
            "-c",
            script.format(first="import flowergraph.methods.flagcns\nimport flowergraph.methods.asfgnn"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.strip()
    assert plain == early
    assert plain.startswith("fedavg,fedprox,fedper,gcfl,")


def test_the_launchers_list_client_sizes_up_to_twenty_clients_and_summarise_more():
    from flowergraph.methods.registry import sizes_text

    assert sizes_text({"summary": "x"}) == ""
    assert sizes_text({"client_sizes": [3, 1, 2]}) == "; client sizes [3, 1, 2]"
    many = {"client_sizes": [98, 100, 104] + [100] * 997}
    assert sizes_text(many) == "; client sizes 98-104 (mean 100.0 over 1000 clients)"
