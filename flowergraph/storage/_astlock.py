"""The ``ast.parse`` lock that flowergraph's array decoders take (Flower-free, private).

On CPython before 3.12 ``ast.parse`` keeps its recursion depth in one per-interpreter counter, so two threads
parsing at once (a garbage collection inside one lets the other run) can fail with ``SystemError: AST constructor
recursion depth mismatch`` (CPython gh-106905). ``numpy.load`` parses every array header with
``ast.literal_eval``, and a federated round decodes arrays in several threads at once (Flower's server sends and
receives from a thread pool; the strategy builds and reads phase messages in one), so a run could fail at random.

:func:`serialize_ast_parse` makes ``ast.parse`` take a process-wide lock on those versions. It is not installed
when flowergraph is imported: every function of flowergraph that decodes arrays calls it first
(:func:`flowergraph.wire.to_ndarrays`, :func:`flowergraph.wire.unpack_arrays`,
:func:`flowergraph.storage.npzio.read_npz`, ...), so the lock is in place from the first array a process decodes
and a process that never decodes arrays keeps the standard ``ast.parse``. ``tests/test_ast_threads.py``
reproduces the failure without the lock and checks that every ``numpy.load`` in the package is preceded by it.
"""

from __future__ import annotations

import ast
import sys
import threading

_AST_LOCK = threading.RLock()  # re-entrant: a finalizer run by a collection inside a parse may parse again
_INSTALL_LOCK = threading.Lock()
_NEEDED = sys.implementation.name == "cpython" and sys.version_info < (3, 12)


def _serialized_parse(*args, **kwargs):
    with _AST_LOCK:
        return _serialized_parse.__wrapped__(*args, **kwargs)


def serialize_ast_parse(force: bool = False) -> bool:
    """Make ``ast.parse`` (and so ``ast.literal_eval`` and ``numpy.load``) take a process-wide lock, on CPython
    before 3.12 (or always with ``force``); see the module docstring. Idempotent and cheap once installed (the
    array decoders call it every time); returns whether the lock is in place."""
    if ast.parse is _serialized_parse:
        return True
    if not (force or _NEEDED):
        return False
    with _INSTALL_LOCK:  # two threads decoding their first arrays at once install it once
        if ast.parse is not _serialized_parse:
            _serialized_parse.__wrapped__ = ast.parse
            _serialized_parse.__doc__ = ast.parse.__doc__
            ast.parse = _serialized_parse  # ast.literal_eval looks ``parse`` up in the module at each call
    return True
