"""Old import paths of modules that moved into packages: each keeps working, with a DeprecationWarning naming its
new place (``import flowergraph.config`` gives the :mod:`flowergraph.settings` module itself).

The package installs :class:`MovedModules` on ``sys.meta_path`` when it is imported; the table :data:`MOVED` is
the whole list. A Flower app whose ``pyproject.toml`` still names ``flowergraph.server_app:app`` runs unchanged.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
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
