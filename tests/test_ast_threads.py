"""numpy.load in several threads at once, as a federated round does (Flower's server thread pool, the strategy's
phase threads): on CPython 3.11 it could fail at random with ``SystemError: AST constructor recursion depth
mismatch`` (CPython gh-106905; seen in our CI, in FedGraph's exchange phase). flowergraph serialises ``ast.parse``
on those versions where it decodes arrays, not on import (flowergraph.storage._astlock.serialize_ast_parse, called
by every decoder before numpy.load). The race is reproduced deterministically here."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A deterministic reproduction. Thread A parses a long source with the collector running at every allocation;
# a finalizer that runs inside A's parse (while A's AST constructor counts its recursion depth in the interpreter-
# wide state) lets thread B parse in full and waits for it, up to 0.5 s. Without the lock B's parse resets that
# shared counter under A, and A fails with CPython's "recursion depth mismatch"; with it, B waits for A's lock,
# A's finalizer times out and A's parse completes. Mode "plain": flowergraph imported, no array decoded (importing
# installs nothing); mode "decoded": flowergraph decoded one phase message's arrays first (which installs the
# lock). Prints whether the lock was in place, how often the finalizer fired inside A's parse and the errors.
REPRO = textwrap.dedent("""
    import ast, gc, json, sys, threading
    import flowergraph, flowergraph.settings, flowergraph.storage, flowergraph.wire  # noqa: F401
    if sys.argv[1] == "decoded":
        import numpy as np
        from flowergraph.wire import pack_arrays, to_legacy, unpack_arrays
        unpack_arrays(to_legacy(pack_arrays([np.zeros(3, np.float32)])))  # npy bytes, as the legacy face decodes
    locked = ast.parse.__module__ != "ast"
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
    print(json.dumps({"locked": locked, "fired": state["fired"], "errors": errors}))
""")


def _reproduce(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", REPRO, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info >= (3, 12),
    reason="the race is in CPython 3.11's ast module; newer versions do not have it",
)
def test_the_race_exists_without_the_lock_and_not_with_it():
    """With flowergraph imported but no array decoded, a parse in another thread in the middle of one parse breaks
    it (the bug is real on this Python, every time; importing flowergraph changes nothing); once flowergraph has
    decoded arrays the same interleaving is held off and nothing fails."""
    plain = _reproduce("plain")
    assert not plain["locked"] and plain["fired"] >= 1 and plain["errors"], plain
    assert plain["errors"][0][0] == "A" and "AST constructor recursion depth mismatch" in plain["errors"][0][1]
    decoded = _reproduce("decoded")
    assert decoded["locked"] and decoded["fired"] >= 1 and decoded["errors"] == [], decoded


def test_importing_flowergraph_leaves_ast_parse_alone():
    """The lock is installed where arrays are decoded, not on import (any Python version)."""
    script = (
        "import ast; parse = ast.parse; import flowergraph, flowergraph.settings, flowergraph.wire, "
        "flowergraph.storage, flowergraph.strategies, flowergraph.clients; print(ast.parse is parse)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split()[-1] == "True", out.stderr


def test_every_numpy_load_in_the_package_takes_the_lock_first():
    """Each function of flowergraph that calls ``numpy.load`` (directly: ``np.load``) calls
    ``serialize_ast_parse()`` before it, so no decoder can be added without the lock."""
    missing = []
    root = Path(__file__).resolve().parents[1] / "flowergraph"
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [
                n
                for n in ast.walk(fn)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "load"
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in ("np", "numpy")
            ]
            locks = [
                n.lineno
                for n in ast.walk(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "serialize_ast_parse"
            ]
            missing += [
                f"{path.relative_to(root.parent)}:{c.lineno} ({fn.name})"
                for c in calls
                if not any(line < c.lineno for line in locks)
            ]
    assert not missing, f"numpy.load without serialize_ast_parse() before it: {missing}"


def test_the_lock_keeps_ast_parse_working():
    from flowergraph.storage._astlock import serialize_ast_parse

    assert serialize_ast_parse() == (sys.version_info < (3, 12) and sys.implementation.name == "cpython")
    assert serialize_ast_parse(force=True) and serialize_ast_parse(force=True)  # idempotent
    assert ast.literal_eval("{'descr': '<f4', 'shape': (3, 4)}") == {"descr": "<f4", "shape": (3, 4)}
    assert isinstance(ast.parse("x = 1", mode="exec"), ast.Module)
    with pytest.raises(SyntaxError):
        ast.parse("x = = 1")
