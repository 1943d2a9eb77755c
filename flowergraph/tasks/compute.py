"""How every flowergraph process that trains or aggregates sets up torch: one place, called by the ClientApp, the
ServerApp, the in-process runner and the benchmarks (:func:`configure_torch`).

* **One thread** per process by default: Flower runs one ClientApp process (simulation: one Ray actor) per CPU it
  is given, so more threads only oversubscribe the cores; results are then also independent of the machine's core
  count (float32 sums are reduced in one order).
* **Denormals flushed to zero** (``torch.set_flush_denormal(True)``). CPU torch keeps float32 values below
  1.18e-38 as denormal numbers, and every operation on them is 10-100x slower. Adam with weight decay produces them
  in long runs: in FedStar on CHEM (80 rounds, 7 clients) 7,695 of 1.4 M state values were denormal, all in
  Adam's first moments (``exp_avg``: the geometric tail of gradients that stopped, 0.9^k g) and in the weights
  they drive (the feature encoder's GIN weights, the input layer), none in the second moments. Rounds slowed from
  1.7 s to 6.7 s over 150 rounds; flushed, rounds 191-200 of the CHEM preset take 1.07x the time of rounds 1-10
  (``docs/results/round_drift.md``). A value below 1e-38 contributes nothing measurable to a weight of order 1e-3
  or a gradient step, so the results do not change (the same table: FedGCN and fedavg on Cora end at the same
  accuracy with and without). GPUs flush by default.

The environment variable ``FLOWERGRAPH_FLUSH_DENORMAL=0`` turns the flush off (for the before/after benchmark);
it is inherited by every process of a run.
"""

from __future__ import annotations

import os
import re

FLUSH_ENV = "FLOWERGRAPH_FLUSH_DENORMAL"


def flush_denormal_enabled() -> bool:
    """Whether :func:`configure_torch` flushes denormals (on unless ``FLOWERGRAPH_FLUSH_DENORMAL=0``)."""
    return os.environ.get(FLUSH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def configure_torch(threads: int | None = 1) -> bool:
    """Set this process's torch for training: ``threads`` intra-op threads (None leaves them) and denormals
    flushed to zero (see the module docstring). Returns whether the flush is on (False also where the CPU cannot
    flush). Cheap: safe to call for every message."""
    import warnings

    # PyG decorates a few helpers with torch.jit.script at import; torch 2.13 warns about it in every process that
    # imports PyG (every client actor): a library's own business, never the user's.
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning)
    import torch

    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return bool(torch.set_flush_denormal(flush_denormal_enabled()))


def seed_torch(seed: int) -> None:
    """Seed torch's global (CPU) generator, as ``torch.manual_seed(seed)`` seeds it, without its per-call cost.

    ``torch.manual_seed`` also queues a seed for CUDA (and MTIA) in a process that never initialised them, and to
    queue it records the caller's stack (``traceback.format_stack``: a ``stat`` per frame): ~0.5 ms per call from
    a ClientApp's handler, 8 % of a 100-node client's train message at 1,000 clients on the inline engine.
    flowergraph trains on the CPU only, so that seed was never used; the CPU generator's state after this call is
    the one ``torch.manual_seed`` leaves (the same random numbers follow). Where CUDA is already initialised (a
    user's code in the same process) this is ``torch.manual_seed``."""
    import torch

    if torch.cuda.is_initialized():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(int(seed))


_REMOVED: set[str] = set()
# modules already looked at, per temp directory: {tmp: {name: module}}. A module object's file never changes, so
# each is examined once (realpath over ~3,000 modules took ~55 ms, paid by every client message before this).
_CHECKED: dict[str, dict[str, object]] = {}
_SEEN: dict[str, tuple[int, str | None]] = {}  # temp dir -> (len(sys.modules), newest name) at the last scan
_GENERATED = re.compile(r"[a-z0-9_]{8}\.py")  # what NamedTemporaryFile adds after the prefix


def generated_source(name: str, module: object, tmp: str) -> str | None:
    """The file of ``module`` if PyG generated it for this process, else None.

    PyG's ``torch_geometric.template.module_from_template`` writes a layer's code with
    ``NamedTemporaryFile(prefix=f"{module_name}_", suffix=".py", delete=False)`` directly in the temp directory and
    loads it under ``module_name``. So a generated file lies *directly* in ``tmp`` (the real path of the temp
    directory) and is named after the whole dotted module name plus ``_`` and eight random characters: no file
    that Python's import system loads for an installed package has such a name (a package's module ``a.b.c`` is
    ``c.py`` inside ``a/b/``), wherever the package lives, a virtual environment under the temp directory
    included."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path:
        return None
    real = os.path.realpath(path)
    folder, base = os.path.split(real)
    prefix = f"{name}_"
    if folder != tmp or not base.startswith(prefix) or not _GENERATED.fullmatch(base[len(prefix) :]):
        return None
    return real


def remove_generated_sources() -> int:
    """Delete the Python files PyG generated in the temp directory for this process's layers; returns how many.

    PyG writes each message-passing layer's generated ``propagate`` (and ``edge_updater``, and a ``Sequential``'s
    ``forward``) code to a new file in the temp directory (``NamedTemporaryFile(delete=False)``) the first time a
    process builds that layer, imports it and never removes it: a deployment with a fresh process per message left
    one file per layer per message. Only files that :func:`generated_source` recognises go: generated for a module
    this process loaded, directly in the temp directory, named after that module; nothing else is ever touched (an
    installed PyG under the temp directory stays whole). The module stays loaded; only its file goes (tracebacks
    inside it then show no source line)."""
    import sys
    import tempfile

    tmp = os.path.realpath(tempfile.gettempdir())
    # sys.modules keeps insertion order: with the same size and the same newest entry, nothing was imported since
    # the last look (the check runs after every message: a scan of ~3,000 modules each time cost 17 % of a round
    # at 1,000 clients on the inline engine)
    seen = (len(sys.modules), next(reversed(sys.modules), None))
    if _SEEN.get(tmp) == seen:
        return 0
    checked = _CHECKED.setdefault(tmp, {})
    removed = 0
    for name, module in list(sys.modules.items()):
        if name in _REMOVED or checked.get(name) is module:
            continue
        path = generated_source(name, module, tmp)
        if path is None:
            checked[name] = module
            continue
        _REMOVED.add(name)
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    _SEEN[tmp] = seen
    return removed
