"""Compatibility shims the package installs when it is imported.

- Old import paths of modules that moved into packages: each keeps working, with a DeprecationWarning naming its
  new place (``import flowergraph.config`` gives the :mod:`flowergraph.settings` module itself). The package installs
  :class:`MovedModules` on ``sys.meta_path``; the table :data:`MOVED` is the whole list. A Flower app whose
  ``pyproject.toml`` still names ``flowergraph.server_app:app`` runs unchanged.
- :func:`serialize_ast_parse`, on CPython before 3.12: ``ast.parse`` there keeps its recursion depth in one
  per-interpreter counter, so two threads parsing at once (a garbage collection inside one lets the other run)
  can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905). ``numpy.load``
  parses every array header with ``ast.literal_eval``, and a federated round decodes arrays in several threads
  at once (Flower's server sends and receives from a thread pool; the strategy builds phase messages in one), so
  a run could fail at random. The shim makes ``ast.parse`` take a process-wide lock on those versions.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.util
import sys
import threading
import warnings
from types import ModuleType

# old module -> new module (moved with the second spine step; see docs/architecture.md)
MOVED = {
    "flowergraph.config": "flowergraph.settings",
    "flowergraph.options": "flowergraph.settings.options",
    "flowergraph.faults": "flowergraph.settings.faults",
    "flowergraph.server_app": "flowergraph.app.server_app",
    "flowergraph.client_app": "flowergraph.app.client_app",
    "flowergraph.server": "flowergraph.app.loop",
    "flowergraph.polling": "flowergraph.app.polling",
    "flowergraph.inprocess": "flowergraph.app.inprocess",
    "flowergraph.runtime": "flowergraph.app.runtime",
    "flowergraph.checkpoint": "flowergraph.storage.checkpoint",
    "flowergraph.results": "flowergraph.storage.results",
    "flowergraph.npzio": "flowergraph.storage.npzio",
    "flowergraph.protocol": "flowergraph.wire",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves every name of :data:`MOVED` to the module at its new place, warning once per import."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path will be removed)",
                      DeprecationWarning, stacklevel=2)  # warnings skips importlib's frames
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new one, already imported."""


def install() -> None:
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())


_AST_LOCK = threading.RLock()  # re-entrant: a finalizer run by a collection inside a parse may parse again


def _serialized_parse(*args, **kwargs):
    with _AST_LOCK:
        return _serialized_parse.__wrapped__(*args, **kwargs)


def serialize_ast_parse(force: bool = False) -> bool:
    """Make ``ast.parse`` (and so ``ast.literal_eval`` and ``numpy.load``) take a process-wide lock, on CPython
    before 3.12 (or always with ``force``); see the module docstring. Idempotent; returns whether the lock is in
    place."""
    if ast.parse is _serialized_parse:
        return True
    if not force and (sys.implementation.name != "cpython" or sys.version_info >= (3, 12)):
        return False
    _serialized_parse.__wrapped__ = ast.parse
    _serialized_parse.__doc__ = ast.parse.__doc__
    ast.parse = _serialized_parse  # ast.literal_eval looks ``parse`` up in the module at each call
    return True
