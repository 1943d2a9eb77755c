"""``flwr-clientapp`` as Flower 1.41 runs it, without importing Flower's SuperNode command line first.

Why: a SuperNode (``--isolation subprocess``) starts a fresh ``flwr-clientapp`` process for every message it
receives. That command's function lives in ``flwr.supernode.cli.flwr_clientapp``, and Python imports a module's
package first: ``flwr/supernode/cli/__init__.py`` imports ``flower_supernode``, the SuperNode's own command line,
with its SQL object store (SQLAlchemy, Alembic). The ClientApp process never uses them, and they cost ~1.2 s of CPU
per message on 2 cores (of ~3 s of Flower's own start: ``docs/deployment.md``, "What a deployment round costs").

What this does: it registers ``flwr.supernode.cli`` as a bare package (its folder, without running its
``__init__``), imports ``flwr.supernode.cli.flwr_clientapp`` from it and calls Flower's ``flwr_clientapp()``,
unchanged: the same arguments, protocol, heartbeats, exit handling and exit status. Anything that later asks
the package for something it lacks runs its ``__init__`` then, so it sees the package as Flower made it. If this
Flower version has no ``flwr/supernode/cli/flwr_clientapp.py``, it imports the command the usual way.

Flowergraph's launchers (:func:`flowergraph.app.runtime.flower_env`: ``fgd``, the loopback deployment) put a
``flwr-clientapp`` that runs this first on the Flower processes' PATH, so SuperNodes they start use it;
``FLOWERGRAPH_FAST_CLIENTAPP=off`` runs Flower's own command instead. A SuperNode started some other way runs
Flower's own command unless this entry is first on its PATH (``python -m flowergraph.app.clientapp_entry
--install-dir``, below).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

PACKAGE = "flwr.supernode.cli"
ENV = "FLOWERGRAPH_FAST_CLIENTAPP"
# fork (default): a child of the SuperNode's warm fork server runs Flower's command; process: this process runs it
# (without importing the SuperNode's command line); off: Flower's own flwr-clientapp
CHOICES = ("fork", "process", "off")


def bare_supernode_cli() -> bool:
    """Register ``flwr.supernode.cli`` with its ``__init__`` not run yet; False, changing nothing, where it is
    already imported or this Flower version has no ``flwr_clientapp.py`` in it. The first attribute the package
    lacks (``from flwr.supernode.cli import flower_supernode``, ``flwr.supernode.cli.flwr_clientapp``) runs the
    ``__init__`` then, so everything else sees the package as Flower made it."""
    if PACKAGE in sys.modules:
        return False
    import importlib.util

    import flwr.supernode

    from .._flower import supernode_cli_folder

    folder = supernode_cli_folder()
    if not (folder / "flwr_clientapp.py").is_file() or not (folder / "__init__.py").is_file():
        return False
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        return False
    package = importlib.util.module_from_spec(spec)  # not executed
    loader = spec.loader

    def complete(name: str):  # PEP 562: only for attributes the package does not have yet
        del package.__getattr__
        loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = complete  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package
    setattr(flwr.supernode, "cli", package)
    return True


def load() -> Callable[[], None]:
    """Flower's ``flwr_clientapp`` function, imported without the SuperNode's command line where possible."""
    bare = bare_supernode_cli()
    try:
        from flwr.supernode.cli.flwr_clientapp import flwr_clientapp
    except ImportError:
        if not bare:
            raise
        sys.modules.pop(PACKAGE, None)  # the usual import, package __init__ included
        sys.modules.pop(PACKAGE + ".flwr_clientapp", None)
        from flwr.supernode.cli.flwr_clientapp import flwr_clientapp
    package = sys.modules[PACKAGE]
    if bare and "__getattr__" in vars(package):
        # importing the submodule bound it on the package; Flower's __init__ binds the function there instead
        vars(package).pop("flwr_clientapp", None)
    return flwr_clientapp


SCRIPT = """#!{python}
# flowergraph's flwr-clientapp (flowergraph.app.clientapp_entry): Flower's own command, started without
# importing the SuperNode's command line. FLOWERGRAPH_FAST_CLIENTAPP=off in the SuperNode's environment: Flower's.
import sys

from flowergraph.app.clientapp_entry import main

sys.exit(main())
"""


def _private(path: Path) -> str | None:
    """Why ``path`` is no place for a command this user runs (None: a folder of this user's that nobody else can
    write to)."""
    import os
    import stat

    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid != os.getuid():
        return f"{path} belongs to user id {st.st_uid}, not to this user ({os.getuid()})"
    if st.st_mode & 0o022:
        return f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def install(folder: str | Path, root: str | Path | None = None) -> Path:
    """Write the ``flwr-clientapp`` script for this interpreter into ``folder`` (kept if it is already there,
    replaced atomically if it differs) and return its path. Put ``folder`` first on a SuperNode's PATH.

    A command on PATH runs with the SuperNode's rights, so ``folder`` and every folder between ``root`` (default:
    ``folder`` itself) and it must belong to this user and be writable by nobody else (folders created here are
    mode 700): otherwise another user could swap the script. Raises PermissionError naming the folder if not."""
    import os
    import stat

    folder = Path(folder).expanduser().absolute()
    top = folder if root is None else Path(root).expanduser().absolute()
    if top != folder and top not in folder.parents:
        raise ValueError(f"{folder} is not inside {top}")
    top.parent.mkdir(parents=True, exist_ok=True)
    chain = [*reversed([p for p in folder.parents if p == top or top in p.parents]), folder]  # top first
    for part in chain:
        try:
            part.mkdir(mode=0o700)
            part.chmod(0o700)  # whatever the umask would let a group write to
        except FileExistsError:  # there already (or made by another launcher just now): checked as it is
            pass
        if (why := _private(part)) is not None:
            raise PermissionError(f"flowergraph's flwr-clientapp not written: {why}")
    path = folder / "flwr-clientapp"
    text = SCRIPT.format(python=sys.executable)
    try:
        st = os.lstat(path)
        if (
            stat.S_ISREG(st.st_mode)
            and st.st_uid == os.getuid()
            and not st.st_mode & 0o022
            and st.st_mode & 0o100
            and path.read_text() == text
        ):
            return path
    except OSError:
        pass
    partial = folder / f".flwr-clientapp.{os.getpid()}"
    partial.write_text(text)
    partial.chmod(0o755)
    os.replace(partial, path)
    return path


def main() -> int:
    """Run Flower's ``flwr_clientapp()`` with this process's arguments (it exits the process itself on error)."""
    if sys.argv[1:2] == ["--install-dir"]:  # python -m flowergraph.app.clientapp_entry --install-dir FOLDER
        if len(sys.argv) != 3:
            print("usage: python -m flowergraph.app.clientapp_entry --install-dir FOLDER", file=sys.stderr)
            return 2
        try:
            print(install(sys.argv[2]))
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    import os

    mode = os.environ.get(ENV, "fork").strip().lower()
    if mode not in CHOICES:
        print(f"{ENV}={os.environ[ENV]!r} is not a valid choice; valid choices: {', '.join(CHOICES)}", file=sys.stderr)
        return 2
    if mode == "off":  # Flower's own command, as if this one were not here
        stock = Path(sys.executable).parent / "flwr-clientapp"
        os.execv(str(stock), [str(stock), *sys.argv[1:]])
    if mode == "fork":  # in a child of the SuperNode's warm fork server (flowergraph.app.forkserver)
        from . import forkserver

        try:
            return forkserver.run(sys.argv[1:])
        except forkserver.NoForkServer as exc:
            print(f"flowergraph: flwr-clientapp runs in its own process ({exc})", file=sys.stderr, flush=True)
    run = load()
    sys.argv[0] = "flwr-clientapp"  # Flower's exit handling tells its commands apart by the program name
    run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
