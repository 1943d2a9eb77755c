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

Nothing of yours is overwritten: the folder's ``.flowergraph-app.json`` lists every file this command wrote there
with its SHA-256, and a later ``write`` replaces or removes only those, unchanged. Any other file it would replace
(your own ``pyproject.toml``, a file you edited, a ``flowergraph/`` folder it did not write) is refused with exit
status 2 naming it; ``--force`` replaces them. The package being copied is never a target: ``write .
--with-package`` in a checkout's root is refused, ``--force`` or not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from ..errors import FlowergraphError

PACKAGE_DIR = Path(__file__).resolve().parents[1]
SERVER_APP = "flowergraph.app.server_app:app"
CLIENT_APP = "flowergraph.app.client_app:app"


def app_pyproject(name: str = "flowergraph-app", include: str = "flowergraph_app.py") -> str:
    """The ``pyproject.toml`` of a Flower app running flowergraph, with every registered key (``include``: the
    files Flower packs into the app, a glob)."""
    from ..settings.reference import toml_table

    return (
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\ndescription = "flowergraph run"\n'
        'license = "Apache-2.0"\ndependencies = []\n\n'
        f'[tool.flwr.app]\npublisher = "flowergraph"\nfab-include = ["{include}"]\n\n'
        f'[tool.flwr.app.components]\nserverapp = "{SERVER_APP}"\nclientapp = "{CLIENT_APP}"\n\n'
        f"[tool.flwr.app.config]\n{toml_table()}\n"
    )


MANIFEST = ".flowergraph-app.json"  # what `write` wrote in a folder: {"files": {relative path: sha256}}
STUB = "flowergraph_app.py"


class AppFolderError(FlowergraphError):
    """``write`` would replace or remove a file it did not write (or the package it copies)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _written(app_dir: Path) -> dict[str, str]:
    """The files an earlier ``write`` wrote in ``app_dir`` (relative path -> SHA-256), from its manifest."""
    try:
        files = json.loads((app_dir / MANIFEST).read_text()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(files, dict):
        return {}
    # only plain relative paths inside the folder: an edited manifest never makes `write` reach outside it
    return {
        str(k): str(v)
        for k, v in files.items()
        if isinstance(k, str) and k and not Path(k).is_absolute() and ".." not in Path(k).parts
    }


def _package_files() -> dict[str, bytes]:
    """flowergraph's files as ``--with-package`` copies them: relative path under ``flowergraph/`` -> content
    (no ``__pycache__``, no compiled files)."""
    out: dict[str, bytes] = {}
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(root) / name
            out[(Path("flowergraph") / path.relative_to(PACKAGE_DIR)).as_posix()] = path.read_bytes()
    return out


def write_app(
    app_dir: str | Path, *, with_package: bool = False, name: str = "flowergraph-app", force: bool = False
) -> Path:
    """Write a Flower app folder (see the module docstring); returns it. ``with_package`` copies flowergraph's
    Python files into it.

    Replaces or removes only files an earlier ``write`` wrote there, unchanged since (the folder's manifest,
    :data:`MANIFEST`); any other file in the way raises :class:`AppFolderError` naming it, unless ``force``. The
    package being copied is never replaced or removed (:class:`AppFolderError` even with ``force``)."""
    app_dir = Path(app_dir)
    package_target = (app_dir / "flowergraph").resolve()
    if with_package and (
        package_target == PACKAGE_DIR
        or PACKAGE_DIR.is_relative_to(package_target)
        or package_target.is_relative_to(PACKAGE_DIR)
    ):
        raise AppFolderError(
            f"{app_dir / 'flowergraph'} is the flowergraph package that --with-package copies "
            f"({PACKAGE_DIR}): write the app into another folder (e.g. {app_dir / 'app'}); "
            f"nothing was written"
        )
    files: dict[str, bytes] = {}
    if with_package:
        files.update(_package_files())
    else:  # Flower packs the folder's Python files: give it one, so an app of only pyproject.toml still builds
        files[STUB] = (
            '"""Written by `python -m flowergraph.app write`: the apps are flowergraph\'s (see pyproject.toml)."""\n'
        ).encode()
    files["pyproject.toml"] = app_pyproject(name, "flowergraph/**/*.py" if with_package else STUB).encode()
    ours = _written(app_dir)

    def foreign(rel: str) -> bool:  # an existing file this command did not write, or one changed since
        path = app_dir / rel
        return (path.exists() or path.is_symlink()) and not (
            path.is_file() and not path.is_symlink() and ours.get(rel) == _sha256(path)
        )

    # what this write would replace, and what it would remove: a package folder is replaced whole (a file an
    # earlier --with-package wrote but this package no longer has goes), a stub only when the package replaces it
    removed = [rel for rel in ours if rel not in files and (rel.startswith("flowergraph/") or rel == STUB)]
    in_the_way = [rel for rel in files if foreign(rel)] + [rel for rel in removed if foreign(rel)]
    if with_package and (app_dir / "flowergraph").is_dir():  # files in the package folder it never wrote
        for root, _dirs, names in os.walk(app_dir / "flowergraph"):
            for n in names:
                rel = (Path(root) / n).relative_to(app_dir).as_posix()
                if "__pycache__" not in rel and rel not in files and rel not in ours:
                    in_the_way.append(rel)
    if in_the_way and not force:
        shown = ", ".join(str(app_dir / rel) for rel in sorted(set(in_the_way))[:5])
        more = f" and {len(set(in_the_way)) - 5} more" if len(set(in_the_way)) > 5 else ""
        raise AppFolderError(
            f"{shown}{more}: in the way of the app's files and not written by `python -m "
            f"flowergraph.app write` (or changed since); nothing was written. Choose another "
            f"folder, or pass --force (write_app(..., force=True)) to write the app over them "
            f"(files of yours that the app does not need stay)"
        )
    app_dir.mkdir(parents=True, exist_ok=True)
    for rel in removed:
        (app_dir / rel).unlink(missing_ok=True)
    for folder in sorted(
        {p for rel in removed for p in (app_dir / rel).parents if app_dir in p.parents}, key=lambda p: -len(p.parts)
    ):  # folders that held only removed files
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty: something else lives there
    for rel, content in files.items():
        path = app_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # --force: replace the link itself, never write through it
            path.unlink()
        path.write_bytes(content)
    manifest = {
        "written_by": "python -m flowergraph.app write",
        "files": {rel: hashlib.sha256(content).hexdigest() for rel, content in sorted(files.items())},
    }
    (app_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
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
    parser = argparse.ArgumentParser(
        prog="python -m flowergraph.app",
        description="Write a Flower app folder that runs flowergraph with every "
        "installed method's run-config keys (for a plain `flwr run`).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write DIR/pyproject.toml (and DIR/flowergraph with --with-package)")
    write.add_argument("dir", help="the app folder to write (created if missing)")
    write.add_argument("--with-package", action="store_true", help="also copy flowergraph's Python files into it")
    write.add_argument("--name", default="flowergraph-app", help="the app's project name (default: %(default)s)")
    write.add_argument(
        "--force",
        action="store_true",
        help="replace files in DIR that an earlier `write` did not write (e.g. your own "
        "pyproject.toml); without it such files are refused with exit status 2",
    )
    check = sub.add_parser(
        "check",
        help="check a `flwr run --run-config` value as the ServerApp will",
        description="Check `flwr run --run-config` values as the ServerApp will, naming an unknown "
        "key with a 'did you mean' (Flower itself only says 'Invalid run "
        "configuration.'). Exit status 0 when valid, 2 otherwise.",
    )
    check.add_argument("run_config", nargs="+", help="a string of key=value pairs (TOML values), or a TOML file")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check_run_config(args.run_config)
    try:
        path = write_app(args.dir, with_package=args.with_package, name=args.name, force=args.force)
    except AppFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from ..methods import methods

    print(f"wrote {path / 'pyproject.toml'} (methods: {', '.join(methods())})")
    print(f"run it: FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run {path} <federation> --run-config ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
