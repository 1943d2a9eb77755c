"""Nothing of the user's is deleted or overwritten (docs/reliability.md, "What flowergraph deletes").

* PyG's generated layer files are removed, and nothing else: an installed PyG that lives under the temp directory
  (a virtual environment there, a scratch conda env, a container image) survives, with ``TMPDIR`` set and unset.
* ``python -m flowergraph.app write`` refuses (exit status 2, naming the file and ``--force``) to replace a file
  it did not write, and never deletes the package it copies (``write . --with-package`` in a checkout's root).

Every case runs the tool for real, in a child process where it could destroy files (with a copy of what it would
destroy), and checks the files afterwards byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import torch_geometric

from flowergraph.app import generator
from flowergraph.app.generator import MANIFEST, AppFolderError, main, write_app

PYG_DIR = Path(torch_geometric.__file__).resolve().parent
PACKAGE_DIR = Path(generator.__file__).resolve().parents[1]


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (no ``__pycache__``): relative path -> SHA-256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _pyg_copy(under: Path) -> Path:
    """A copy of the installed PyG as a virtual environment would hold it, under ``under``; returns the folder
    to put on ``PYTHONPATH``."""
    site = under / "venv" / "lib" / "site-packages"
    shutil.copytree(PYG_DIR, site / "torch_geometric", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def _env(tmpdir: Path | None, pythonpath: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


_LAYERS_THEN_TIDY = """
import json, os, sys, tempfile
import torch_geometric
from torch_geometric.nn import GATConv, GCNConv, SAGEConv
assert torch_geometric.__file__.startswith(sys.argv[1]), torch_geometric.__file__  # the copy, not the venv's
tmp = os.path.realpath(tempfile.gettempdir())


def generated_now():
    return sorted(os.path.realpath(m.__file__) for n, m in sys.modules.items()
                  if getattr(m, "__file__", None) and os.path.dirname(os.path.realpath(m.__file__)) == tmp)


from flowergraph.tasks.compute import remove_generated_sources
layers = [GCNConv(3, 4), SAGEConv(3, 4)]
first = generated_now()
removed = remove_generated_sources()  # looks at every module once
layers.append(GATConv(3, 4))  # generated after the first tidy-up: the second one finds it
generated = sorted(set(first) | set(generated_now()))
assert all(os.path.exists(p) for p in set(generated) - set(first))
removed += remove_generated_sources()
print(json.dumps({"generated": generated, "removed": removed, "left": [p for p in generated if os.path.exists(p)]}))
"""


@pytest.mark.parametrize("tmpdir_set", [True, False], ids=["TMPDIR-set", "TMPDIR-unset"])
def test_generated_layer_files_go_and_an_installed_pyg_under_the_temp_dir_stays(tmp_path, tmpdir_set):
    """The ClientApp's and ServerApp's tidy-up (:func:`remove_generated_sources`) with PyG imported from a copy
    under the temp directory: PyG's generated ``propagate`` / ``edge_updater`` files go, every file of the copy
    stays byte for byte. With ``TMPDIR`` unset the temp directory is the system's (``/tmp``)."""
    if tmpdir_set:
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        under = tmp
    else:  # the system's temp directory itself, as a user without TMPDIR has it
        tmp = None
        under = Path(tempfile.mkdtemp(prefix="flowergraph-test-", dir=_system_tmp()))
    try:
        site = _pyg_copy(under)
        before = _tree(site)
        proc = subprocess.run(
            [sys.executable, "-c", _LAYERS_THEN_TIDY, str(site)],
            env=_env(tmp, site),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        # GCNConv and SAGEConv: a propagate each; GATConv: propagate and edge_updater
        assert len(out["generated"]) == 4 and out["removed"] == 4 and out["left"] == []
        assert all(Path(p).parent == Path(tmp or _system_tmp()).resolve() for p in out["generated"])
        assert _tree(site) == before  # not one file of the installed copy is gone or changed
    finally:
        if not tmpdir_set:
            shutil.rmtree(under, ignore_errors=True)


def _system_tmp() -> str:
    """The temp directory of a process without TMPDIR, TEMP and TMP (``/tmp`` here)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    return subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


_PLAIN_SIMULATION = """
import sys, torch_geometric
assert torch_geometric.__file__.startswith(sys.argv[1]), torch_geometric.__file__
from flwr.simulation import run_simulation
from flowergraph.app.client_app import app as client_app
from flowergraph.app.server_app import app as server_app
run_simulation(server_app=server_app, client_app=client_app, num_supernodes=3,
               backend_config={"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": 2}})
"""


@pytest.mark.simulation
@pytest.mark.ray
def test_pyg_under_the_system_temp_dir_survives_a_plain_flower_simulation(tmp_path):
    """The issue's case: a plain Flower simulation of the repository apps (``flwr.simulation.run_simulation``,
    3 nodes, the default 2 rounds of fedavg) with PyG imported from a copy under the temp directory, ``TMPDIR``
    unset. Before the fix it deleted 572 of PyG's 655 Python files."""
    under = Path(tempfile.mkdtemp(prefix="flowergraph-test-", dir=_system_tmp()))
    try:
        site = _pyg_copy(under)
        before = _tree(site)
        proc = subprocess.run(
            [sys.executable, "-c", _PLAIN_SIMULATION, str(site)],
            env=_env(None, site),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        summaries = list((tmp_path / "results").glob("*/summary.json"))  # the run did happen, and completed
        assert len(summaries) == 1 and json.loads(summaries[0].read_text())["status"] == "completed"
        assert json.loads(summaries[0].read_text())["rounds_completed"] == 2
        assert _tree(site) == before
    finally:
        shutil.rmtree(under, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ RAY_TMPDIR
def _user_tmp(under: Path) -> Path:
    """A user's temp folder that already holds a file and a Ray session of its own (what Ray held before)."""
    (under / "ray" / "session_2020-01-01_00-00-00_000000_1").mkdir(parents=True)
    (under / "ray" / "session_2020-01-01_00-00-00_000000_1" / "logs.txt").write_text("a user's Ray session\n")
    (under / "notes.txt").write_text("mine\n")
    return under


def _listing(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``: relative path -> SHA-256 (files) or "dir"."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("ray_tmpdir", ["same", "other", "unset", "empty", "missing"])
def test_ray_sessions_go_to_a_private_folder_inside_a_users_ray_tmpdir(tmp_path, monkeypatch, ray_tmpdir):
    """:func:`~flowergraph.app.runtime.private_tmp` with ``RAY_TMPDIR`` set (to the ``TMPDIR`` folder, to another
    one, empty, to a folder that does not exist) and unset: where Ray would put its sessions (Ray's own function
    of the environment) is a private folder, removed at the end; what the user's folders held stays byte for
    byte, nothing is added to them, and the environment is restored."""
    from ray._common.utils import get_default_ray_temp_dir

    from flowergraph.app.runtime import private_tmp

    monkeypatch.chdir(tmp_path)  # Ray's folder for an empty RAY_TMPDIR is ./ray: here, should the code fail
    user_tmp = _user_tmp(tmp_path / "tmp")
    user_ray = {"same": user_tmp, "other": _user_tmp(tmp_path / "raytmp")}.get(ray_tmpdir)
    monkeypatch.setenv("TMPDIR", str(user_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    if ray_tmpdir == "unset":
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
    else:
        value = {"empty": "", "missing": str(tmp_path / "nowhere" / "ray-tmp")}.get(ray_tmpdir, str(user_ray))
        monkeypatch.setenv("RAY_TMPDIR", value)
    before = {p: _listing(p) for p in (user_tmp, user_ray) if p is not None}
    env_before = {k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR")}
    with private_tmp() as private:
        ray_dir = Path(get_default_ray_temp_dir())
        session = ray_dir / "session_2030-01-01_00-00-00_000000_2"
        (session / "sockets").mkdir(parents=True)  # what Ray writes there, and a link as Ray leaves one
        (ray_dir / "session_latest").symlink_to(session)
        if user_ray is not None:  # a private folder inside the user's RAY_TMPDIR
            assert ray_dir.parent.parent == user_ray and ray_dir.parent.name.startswith("fg")
        else:  # unset, empty or missing: the private TMPDIR folder
            assert ray_dir.parent == private
    assert not ray_dir.exists() and not private.exists()
    assert {p: _listing(p) for p in before} == before
    assert {k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR")} == env_before
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "ray").exists()


@pytest.mark.simulation
@pytest.mark.ray
def test_a_launcher_run_through_ray_leaves_nothing_in_a_users_ray_tmpdir(tmp_path):
    """The issue's case: a 2-round launcher run through Ray with ``TMPDIR`` and ``RAY_TMPDIR`` set to one folder
    (Ray puts its sessions under ``RAY_TMPDIR``, which the launcher's private ``TMPDIR`` did not cover: a ``ray``
    folder was left there). The folder already holds a file and a Ray session of the user's: afterwards it holds
    exactly that, byte for byte."""
    own = Path(tempfile.mkdtemp(prefix="fgr", dir="/tmp" if os.path.isdir("/tmp") else None))  # short: sockets
    try:
        _user_tmp(own)
        before = _listing(own)
        env = dict(os.environ, TMPDIR=str(own), RAY_TMPDIR=str(own))
        proc = subprocess.run(
            [sys.executable, "-m", "flowergraph.simulation", "--method", "fedavg", "--num-clients", "3"]
            + ["--rounds", "2", "--out", str(tmp_path / "run"), "--ray-cpus", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert "flowergraph: run completed" in proc.stdout and "[round 2/2]" in proc.stdout
        assert _listing(own) == before
    finally:
        shutil.rmtree(own, ignore_errors=True)


# ----------------------------------------------------------------------------------- python -m flowergraph.app write
def test_write_refuses_to_replace_a_users_pyproject(tmp_path, capsys):
    app = tmp_path / "my-app"
    app.mkdir()
    mine = b'[project]\nname = "my-own-app"\n# 64 lines of build system, dependencies and tool settings\n'
    (app / "pyproject.toml").write_bytes(mine)
    assert main(["write", str(app)]) == 2
    err = capsys.readouterr().err
    assert f"error: {app / 'pyproject.toml'}: in the way of the app's files and not written by" in err
    assert "--force" in err and "nothing was written" in err
    assert (app / "pyproject.toml").read_bytes() == mine and sorted(os.listdir(app)) == ["pyproject.toml"]
    # asked for exactly that: replaced
    assert main(["write", str(app), "--force"]) == 0
    assert b"[tool.flwr.app.components]" in (app / "pyproject.toml").read_bytes()


def test_write_over_its_own_files_again_but_not_over_an_edited_one(tmp_path, capsys):
    app = tmp_path / "app"
    assert main(["write", str(app)]) == 0
    assert main(["write", str(app), "--name", "renamed"]) == 0  # its own files: replaced without a word
    assert 'name = "renamed"' in (app / "pyproject.toml").read_text()
    manifest = json.loads((app / MANIFEST).read_text())
    assert sorted(manifest["files"]) == ["flowergraph_app.py", "pyproject.toml"]
    (app / "pyproject.toml").write_text((app / "pyproject.toml").read_text() + "\n# my setting\n")
    capsys.readouterr()
    assert main(["write", str(app)]) == 2  # edited since: the user's now
    assert "pyproject.toml: in the way" in capsys.readouterr().err
    assert (app / "pyproject.toml").read_text().endswith("# my setting\n")


def test_write_with_package_replaces_only_its_own_package_files(tmp_path):
    app = tmp_path / "app"
    write_app(app, with_package=True)
    copied = _tree(app / "flowergraph")
    assert copied == _tree(PACKAGE_DIR) and "flowergraph_app.py" not in os.listdir(app)
    (app / "flowergraph" / "notes.md").write_text("mine")  # a file of the user's in the package folder
    with pytest.raises(AppFolderError, match=r"flowergraph/notes\.md: in the way"):
        write_app(app, with_package=True)
    write_app(app, with_package=True, force=True)  # --force writes over the package, and keeps the user's file
    assert (app / "flowergraph" / "notes.md").read_text() == "mine"
    (app / "flowergraph" / "notes.md").unlink()
    write_app(app)  # back to a stub app: its own package files go, nothing else
    assert sorted(os.listdir(app)) == sorted([MANIFEST, "flowergraph_app.py", "pyproject.toml"])


def test_an_edited_manifest_never_reaches_outside_the_folder(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep")
    app = tmp_path / "app"
    write_app(app, with_package=True)
    manifest = json.loads((app / MANIFEST).read_text())
    manifest["files"]["../precious.txt"] = hashlib.sha256(b"keep").hexdigest()
    manifest["files"][str(outside)] = hashlib.sha256(b"keep").hexdigest()
    (app / MANIFEST).write_text(json.dumps(manifest))
    write_app(app)
    assert outside.read_text() == "keep"


def test_write_with_package_in_a_checkouts_root_keeps_the_checkout(tmp_path):
    """``python -m flowergraph.app write . --with-package`` run in a checkout's root, with and without
    ``--force``: refused (exit 2), and not one file of the checkout's package or project file is touched. The
    checkout is a copy, so the tool's real ``PACKAGE_DIR`` is the copy's."""
    checkout = tmp_path / "checkout"
    shutil.copytree(PACKAGE_DIR, checkout / "flowergraph", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE_DIR.parent / "pyproject.toml", checkout / "pyproject.toml")
    before = _tree(checkout)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    for extra in ([], ["--force"]):
        proc = subprocess.run(
            [sys.executable, "-m", "flowergraph.app", "write", ".", "--with-package", *extra],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"is the flowergraph package that --with-package copies ({checkout / 'flowergraph'})" in proc.stderr
        assert _tree(checkout) == before
    # and a plain `write .` there refuses to replace the checkout's pyproject.toml
    proc = subprocess.run(
        [sys.executable, "-m", "flowergraph.app", "write", "."],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "pyproject.toml: in the way" in proc.stderr and "--force" in proc.stderr
    assert _tree(checkout) == before


# ------------------------------------------------------------------------------------ a run's out-dir, the cache
@pytest.mark.parametrize("name", ["config.json", "summary.json", "checkpoints", "flower.log"])
def test_an_out_dir_holding_what_a_run_writes_is_refused(tmp_path, launcher_main, capsys, name):
    """A results folder that holds a file the run would write (a user's own ``config.json``, say) is refused
    before anything starts (launcher: exit status 2), and stays as it was."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text("the user's")
    assert launcher_main(["--method", "fedavg", "--rounds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"out-dir {str(out.resolve())!r} already holds {name}, which this run would overwrite" in err
    assert sorted(os.listdir(out)) == [name] and (out / name).read_text() == "the user's"


def test_the_serverapp_refuses_an_out_dir_with_results_but_not_the_launchers_log(tmp_path):
    """The ServerApp's own check (RunPlan without ``launcher``) lets a launcher's ``flower.log`` be (the launcher
    wrote it, after its own check), and refuses the files the ServerApp writes."""
    from flowergraph.errors import ConfigError
    from flowergraph.settings import parse_run_config
    from flowergraph.settings.plan import RunPlan

    out = tmp_path / "run"
    out.mkdir()
    (out / "flower.log").write_text("")
    assert RunPlan.of(parse_run_config({"out-dir": str(out)})).out_dir == out.resolve()
    (out / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"already holds config\.json, which this run would overwrite"):
        RunPlan.of(parse_run_config({"out-dir": str(out)}))


def test_the_dataset_cache_deletes_only_its_own_copies(tmp_path, monkeypatch, shared_data):
    """An incomplete dataset folder in the cache is replaced only when flowergraph copied it there; files put
    there otherwise (``FLOWERGRAPH_CACHE`` pointed at a data folder of one's own) are named, never deleted."""
    from flowergraph.errors import DatasetUnavailableError
    from flowergraph.tasks.datasets import COPY_MARK, load_pyg_dataset

    monkeypatch.setenv("FLOWERGRAPH_CACHE", str(tmp_path / "cache"))
    raw = tmp_path / "cache" / "datasets" / "Planetoid" / "Cora" / "raw"
    raw.mkdir(parents=True)
    (raw / "ind.cora.x").write_bytes(b"the user's half-copied file")
    with pytest.raises(DatasetUnavailableError, match=r"holds dataset files that flowergraph did not copy there"):
        load_pyg_dataset("Cora", shared_data)
    assert sorted(os.listdir(raw)) == ["ind.cora.x"] and (raw / "ind.cora.x").read_bytes().startswith(b"the user")
    (raw.parent / COPY_MARK).write_text("an earlier copy of flowergraph's, cut short\n")
    assert load_pyg_dataset("Cora", shared_data)[0].num_nodes == 2708  # its own copy: replaced by a whole one
    assert (raw / "ind.cora.x").read_bytes() == (shared_data / "Planetoid" / "Cora" / "raw" / "ind.cora.x").read_bytes()
