"""numpy.load in several threads at once, as a federated round does (Flower's server thread pool, the strategy's
phase threads): on CPython 3.11 it could fail at random with ``SystemError: AST constructor recursion depth
mismatch`` (CPython gh-106905; seen in our CI, in FedGraph's exchange phase). flowergraph serialises ``ast.parse``
on those versions (flowergraph._compat.serialize_ast_parse)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Threads loading small arrays while creating cyclic garbage with finalizers, with a tiny switch interval: a
# collection inside one thread's parse runs a finalizer, which lets another thread parse in the middle. Prints the
# number of failed loads (stops at the first one, or after SECONDS).
STRESS = textwrap.dedent("""
    import gc, io, sys, threading, time
    import numpy as np
    if sys.argv[1] == "flowergraph":
        import flowergraph  # noqa: F401  (installs the lock)
    seconds = float(sys.argv[2])

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            [i for i in range(30)]

    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 4), dtype=np.float32))
    data = buf.getvalue()
    errors = []
    stop = time.monotonic() + seconds

    def work():
        while time.monotonic() < stop and not errors:
            try:
                assert np.load(io.BytesIO(data)).shape == (3, 4)
            except SystemError as e:
                errors.append(str(e))
            for _ in range(20):
                Cycle()

    gc.set_threshold(7, 5, 5)
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(len(errors), errors[:1])
""")


def _stress(mode: str, seconds: float) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-c", STRESS, mode, str(seconds)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    count, _, first = out.stdout.strip().partition(" ")
    return int(count), first


# The race shows in some processes within a second and in others not for a minute (when the collector runs
# depends on the process's memory layout): measured with both cores busy, 11 of 30 fresh processes failed a load
# within 1.5 s and none of 30 with the lock, while one process of 60 s often failed none. So both checks run many
# short processes rather than one long one.
WINDOW_S = 1.5
LOCKED_TRIES = 10  # were the lock useless, all 10 would pass with probability (1 - 11/30) ** 10 ~ 1%
PLAIN_TRIES = 40  # without the lock, none failing has probability (1 - 11/30) ** 40 ~ 1e-8


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info >= (3, 12),
                    reason="the race is in CPython 3.11's ast module; newer versions do not have it")
def test_the_race_exists_without_the_lock_and_not_with_it():
    """Without flowergraph imported the stress fails a load (the bug is real on this Python); with it, none fails
    in as many tries."""
    for _ in range(LOCKED_TRIES):
        assert _stress("flowergraph", WINDOW_S) == (0, "[]")
    for _ in range(PLAIN_TRIES):
        count, first = _stress("plain", WINDOW_S)
        if count:
            assert "AST constructor recursion depth mismatch" in first, first
            return
    pytest.skip(f"the stress did not reproduce the race in {PLAIN_TRIES} processes of {WINDOW_S} s on Python "
                f"{sys.version.split()[0]} on this run (it needs a collection inside a parse; a crowded machine makes "
                "that rarer): the lock passed its check, but without the race beside it that check shows nothing")


def test_the_lock_keeps_ast_parse_working():
    import ast

    import flowergraph  # noqa: F401
    from flowergraph._compat import serialize_ast_parse

    assert serialize_ast_parse() == (sys.version_info < (3, 12) and sys.implementation.name == "cpython")
    assert serialize_ast_parse(force=True) and serialize_ast_parse(force=True)  # idempotent
    assert ast.literal_eval("{'descr': '<f4', 'shape': (3, 4)}") == {"descr": "<f4", "shape": (3, 4)}
    assert isinstance(ast.parse("x = 1", mode="exec"), ast.Module)
    with pytest.raises(SyntaxError):
        ast.parse("x = = 1")
