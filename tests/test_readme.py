"""The README's commands run as written. Every command in its ```bash blocks is accounted for: the quick ones run
here exactly as written (in a copy of the repository's layout: ``.venv``, ``conf`` and ``../shared`` as in a
checkout), the launcher's with ``--check`` appended (the same validation as the run, then nothing started), and
the long ones (set-up + suite, Ray runs, a deployment) are checked for what they depend on."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def commands() -> list[str]:
    """Every command of the README's bash blocks (continuation lines joined, comments dropped)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = line.split("  #")[0].strip() if not line.lstrip().startswith("#") else ""
            if line:
                out.append(line)
    return out


def test_every_readme_command_is_accounted_for():
    kinds = {"setup": [], "launcher": [], "shell": [], "flwr": [], "deployment": []}
    for cmd in commands():
        if cmd.startswith("bash scripts/"):
            kinds["setup"].append(cmd)
        elif "-m flowergraph.simulation" in cmd:
            kinds["launcher"].append(cmd)
        elif cmd.startswith("flwr run"):
            kinds["flwr"].append(cmd)
        elif "-m flowergraph.deployment" in cmd:
            kinds["deployment"].append(cmd)
        elif cmd.startswith("export ") or "-m flowergraph.app write" in cmd:
            kinds["shell"].append(cmd)
        else:
            pytest.fail(f"a README command no test accounts for: {cmd}")
    assert kinds["setup"] == ["bash scripts/quickstart.sh", "bash scripts/test.sh"]
    assert all(kinds.values()), kinds
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()  # CI runs the README's test command
    for script in ("quickstart.sh", "test.sh", "setup.sh"):
        assert (REPO / "scripts" / script).is_file()


@pytest.fixture
def layout(tmp_path):
    """A folder laid out as the checkout is (``.venv``, ``conf``, ``scripts``, ``../shared``), to run commands in."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in (".venv", "conf", "scripts"):
        (root / name).symlink_to(REPO / name)
    (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    venv = Path(sys.executable).parent.parent
    if venv != (REPO / ".venv").resolve():  # the suite runs in another venv: the commands use that one
        (root / ".venv").unlink()
        (root / ".venv").symlink_to(venv)
    return root


def _bash(cmd: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWERGRAPH_DATA",)}
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_launcher_commands_pass_their_checks_as_written(layout, shared_data):
    """Each launcher command of the README, as written plus ``--check``: exit 0, the run it would make named,
    nothing written."""
    for cmd in [c for c in commands() if "-m flowergraph.simulation" in c]:
        proc = _bash(cmd + " --check", layout)
        assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "the settings and the data are valid; nothing was started" in proc.stdout, proc.stdout
    assert not (layout / "results").exists()


def test_the_plain_flwr_run_commands_write_an_app_that_takes_the_run_config(layout):
    """The ``export`` line and ``python -m flowergraph.app write build/app`` run as written; Flower accepts the
    README's ``--run-config`` for that app (every key it sets is in the app's pyproject: Flower's own merge)."""
    from flwr.common.config import get_fused_config_from_dir, parse_config_args

    shell = [c for c in commands() if c.startswith("export ") or "-m flowergraph.app write" in c]
    proc = _bash(" && ".join(shell), layout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    app = layout / "build" / "app"
    assert tomllib.loads((app / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["components"]
    (flwr_run,) = [c for c in commands() if c.startswith("flwr run")]
    args = shlex.split(flwr_run)
    assert args[:4] == ["flwr", "run", "build/app", "local"]
    overrides = parse_config_args([args[args.index("--run-config") + 1]])
    fused = get_fused_config_from_dir(app, overrides)
    assert fused["method"] == "fedgcn" and fused["fedgcn.hops"] == 1 and fused["rounds"] == 2


def test_the_deployment_command_names_valid_options(layout):
    """The loopback deployment's command: its options exist (``--help`` lists each) and its settings parse."""
    (cmd,) = [c for c in commands() if "-m flowergraph.deployment" in c]
    args = shlex.split(cmd)
    help_text = _bash(" ".join(args[:4]) + " --help", layout).stdout
    for option in [a for a in args if a.startswith("--")]:
        assert option in help_text, option
    from flowergraph.settings import parse_run_config

    s = parse_run_config({"method": args[args.index("--method") + 1], "rounds": int(args[args.index("--rounds") + 1])})
    assert s.method == "fedavg" and s.rounds == 2
