"""Lazy public exports for flowergraph's API packages (``flowergraph.clients``, ``flowergraph.strategies``).

A package lists ``{name: module}`` once, as ``_EXPORTS`` (a submodule of the package, or a dotted absolute module),
derives ``__all__ = sorted(_EXPORTS)``, and gets the module-level ``__getattr__`` and ``__dir__`` that import a
name's module on first use (PEP 562), so importing the package itself stays cheap (no torch, no Flower until a name
is used). Type checkers cannot run that: the package also imports each name under ``if TYPE_CHECKING:`` as an
explicit re-export (``from .base import FederatedStrategy as FederatedStrategy``), and ``tests/test_typing.py``
holds those imports equal to the table."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str], package_globals: dict) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` exporting ``exports``; assign both at the package's top level."""

    def __getattr__(name: str):
        if name in exports:
            module = exports[name]
            return getattr(importlib.import_module(module if "." in module else f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():  # the public names only (no helpers, no `annotations`)
        return sorted(exports)

    return __getattr__, __dir__
