"""numpy.load in several threads at once, as a federated round does (Flower's server thread pool, the strategy's
phase threads): on CPython 3.11 it could fail at random with ``SystemError: AST constructor recursion depth
mismatch`` (CPython gh-106905; seen in our CI, in FedGraph's exchange phase). flowergraph serialises ``ast.parse``
on those versions (flowergraph._compat.serialize_ast_parse). The race is reproduced deterministically here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# A deterministic reproduction. Thread A parses a long source with the collector running at every allocation;
# a finalizer that runs inside A's parse (while A's AST constructor counts its recursion depth in the interpreter-
# wide state) lets thread B parse in full and waits for it, up to 0.5 s. Without the lock B's parse resets that
# shared counter under A, and A fails with CPython's "recursion depth mismatch"; with it, B waits for A's lock,
# A's finalizer times out and A's parse completes. Prints how often the finalizer fired inside A's parse and the
# errors.
REPRO = textwrap.dedent("""
    import ast, gc, json, sys, threading
    if sys.argv[1] == "flowergraph":
        import flowergraph  # noqa: F401  (installs the lock)
    SRC = "\\n".join(f"x{i} = [{i}, ({i}, {{'a': {i}}})]" for i in range(300))
    A = threading.current_thread()
    go, done = threading.Event(), threading.Event()
    state = {"outer": False, "fired": 0}
    errors = []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            if threading.current_thread() is A and state["outer"] and not done.is_set():
                state["fired"] += 1
                go.set()
                done.wait(0.5)
            if state["outer"] and not done.is_set():
                Cycle()  # the next collection finds another

    def b():
        go.wait()
        try:
            ast.parse("y = 1")
        except SystemError as e:
            errors.append(["B", str(e)])
        done.set()

    thread = threading.Thread(target=b)
    thread.start()
    Cycle()
    gc.set_threshold(1)
    state["outer"] = True
    try:
        ast.parse(SRC)
    except SystemError as e:
        errors.append(["A", str(e)])
    state["outer"] = False
    gc.set_threshold(700)
    go.set()
    thread.join()
    print(json.dumps({"fired": state["fired"], "errors": errors}))
""")


def _reproduce(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", REPRO, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info >= (3, 12),
                    reason="the race is in CPython 3.11's ast module; newer versions do not have it")
def test_the_race_exists_without_the_lock_and_not_with_it():
    """Without flowergraph imported, a parse in another thread in the middle of one parse breaks it (the bug is
    real on this Python, every time); with flowergraph imported the same interleaving is held off and nothing
    fails."""
    plain = _reproduce("plain")
    assert plain["fired"] >= 1 and plain["errors"], plain
    assert plain["errors"][0][0] == "A" and "AST constructor recursion depth mismatch" in plain["errors"][0][1]
    locked = _reproduce("flowergraph")
    assert locked["fired"] >= 1 and locked["errors"] == [], locked


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
