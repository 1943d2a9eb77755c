"""Flower-free graph tasks: datasets, splits, partitioners, per-client graphs, models, training loops.

The package's public names are the pieces every core shares (each method's core is a public package of its own:
:mod:`.link`, :mod:`.graphcls`, :mod:`.fedgraph`, :mod:`.flagcns`, :mod:`.asfgnn`; the other modules are internal):

* :func:`configure_torch`: this process's torch set as the Flower apps set theirs (one thread, denormals flushed;
  :data:`FLUSH_ENV` turns the flush off), so that code run beside them computes as they do;
* :func:`module_arrays` / :func:`load_module_arrays`: a torch module's state as named numpy arrays (what travels);
* :class:`TrainConfig`, :func:`make_optimizer`: the node task's local training settings and their optimiser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._exports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the names _EXPORTS resolves to, for type checkers (`as`: re-exported)
    from .compute import FLUSH_ENV as FLUSH_ENV, configure_torch as configure_torch
    from .torch_state import load_module_arrays as load_module_arrays, module_arrays as module_arrays
    from .training import TrainConfig as TrainConfig, make_optimizer as make_optimizer

_EXPORTS = {
    "FLUSH_ENV": "compute",
    "configure_torch": "compute",
    "load_module_arrays": "torch_state",
    "module_arrays": "torch_state",
    "TrainConfig": "training",
    "make_optimizer": "training",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
