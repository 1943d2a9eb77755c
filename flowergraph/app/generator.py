"""Flower app folders for flowergraph: ``python -m flowergraph.app write DIR``.

A plain ``flwr run DIR`` accepts only the run-config keys listed in the app's ``pyproject.toml``
(``[tool.flwr.app.config]``). The repository's own ``pyproject.toml`` lists the built-in methods' keys; a method
installed from another package (an entry point in ``flowergraph.methods``) has keys of its own. This writes an app
folder whose ``pyproject.toml`` names flowergraph's ServerApp and ClientApp and lists every key of every task and
method installed in this environment (plugins included), so ``flwr run DIR --run-config "mymethod.key=..."`` works::

    python -m flowergraph.app write my-app                 # pyproject.toml only: the apps come from site-packages
    FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run my-app local --run-config "method='mymethod'"

``python -m flowergraph.app check "num-clients=3 method='fedavg'"`` checks a ``--run-config`` value as the ServerApp
will (Flower refuses a key missing from ``pyproject.toml`` with a bare "Invalid run configuration.").

``--with-package`` also copies flowergraph's Python files into the folder (what the launchers do: the run then
uses exactly this checkout's code, also on SuperNodes that install the app).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
SERVER_APP = "flowergraph.app.server_app:app"
CLIENT_APP = "flowergraph.app.client_app:app"


def app_pyproject(name: str = "flowergraph-app", include: str = "flowergraph_app.py") -> str:
    """The ``pyproject.toml`` of a Flower app running flowergraph, with every registered key (``include``: the
    files Flower packs into the app, a glob)."""
    from ..settings.reference import toml_table

    return ('[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "{name}"\nversion = "0.1.0"\ndescription = "flowergraph run"\n'
            'license = "Apache-2.0"\ndependencies = []\n\n'
            f'[tool.flwr.app]\npublisher = "flowergraph"\nfab-include = ["{include}"]\n\n'
            f'[tool.flwr.app.components]\nserverapp = "{SERVER_APP}"\nclientapp = "{CLIENT_APP}"\n\n'
            f"[tool.flwr.app.config]\n{toml_table()}\n")


def write_app(app_dir: str | Path, *, with_package: bool = False, name: str = "flowergraph-app") -> Path:
    """Write a Flower app folder (see the module docstring); returns it. ``with_package`` copies flowergraph's
    Python files into it."""
    app_dir = Path(app_dir)
    app_dir.mkdir(parents=True, exist_ok=True)
    if with_package:
        target = app_dir / "flowergraph"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(PACKAGE_DIR, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:  # Flower packs the folder's Python files: give it one, so an app of only pyproject.toml still builds
        (app_dir / "flowergraph_app.py").write_text(
            '"""Written by `python -m flowergraph.app write`: the apps are flowergraph\'s (see pyproject.toml)."""\n')
    (app_dir / "pyproject.toml").write_text(
        app_pyproject(name, "flowergraph/**/*.py" if with_package else "flowergraph_app.py"))
    return app_dir


def check_run_config(values: list[str]) -> int:
    """Parse ``flwr run --run-config`` values as Flower does, then check them as the ServerApp does: 0 (valid) or
    2 with the reason (an unknown key with a "did you mean")."""
    from flwr.common.config import parse_config_args

    from ..errors import FlowergraphError
    from ..settings import parse_run_config

    try:
        config = parse_config_args(values)
    except Exception as exc:  # noqa: BLE001 (Flower's own parse error: TOML syntax)
        print(f"error: Flower cannot parse this run config: {exc}", file=sys.stderr)
        return 2
    try:
        parse_run_config(config)
    except FlowergraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"ok: {len(config)} key(s) valid: {', '.join(sorted(config))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flowergraph.app",
                                     description="Write a Flower app folder that runs flowergraph with every "
                                                 "installed method's run-config keys (for a plain `flwr run`).")
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write DIR/pyproject.toml (and DIR/flowergraph with --with-package)")
    write.add_argument("dir", help="the app folder to write (created if missing)")
    write.add_argument("--with-package", action="store_true", help="also copy flowergraph's Python files into it")
    write.add_argument("--name", default="flowergraph-app", help="the app's project name (default: %(default)s)")
    check = sub.add_parser("check", help="check a `flwr run --run-config` value as the ServerApp will",
                           description="Check `flwr run --run-config` values as the ServerApp will, naming an unknown "
                                       "key with a 'did you mean' (Flower itself only says 'Invalid run "
                                       "configuration.'). Exit status 0 when valid, 2 otherwise.")
    check.add_argument("run_config", nargs="+", help="a string of key=value pairs (TOML values), or a TOML file")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check_run_config(args.run_config)
    path = write_app(args.dir, with_package=args.with_package, name=args.name)
    from ..methods import methods

    print(f"wrote {path / 'pyproject.toml'} (methods: {', '.join(methods())})")
    print(f"run it: FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run {path} <federation> --run-config ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
