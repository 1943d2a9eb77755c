"""Flower's legacy stack is confined to one adapter: no module of ``flowergraph/`` but the four named here uses
``ClientProxy``, ``FitIns``, ``Parameters``, ``NumPyClient`` or a module under ``flwr.server.``, ``flwr.client.`` or
``flwr.compat`` (issue 90). The core (strategies/ and its parts, clients/, wire/, methods/, serverapp/, privacy/,
settings/, the rest of app/) speaks flowergraph's own types (:mod:`flowergraph.strategies.nodes`).

What counts is code, read with ``ast``: an import of such a module (``import``, ``from ... import``, a module name
in a string such as ``importlib.import_module("flwr.server...")``), one of the four names as a name, an attribute,
an imported name or a class base, and any other string constant naming them (a docstring, the prose that explains
the two stacks, is not code; neither is a comment). The word ``Parameters`` is only counted as a name: numpydoc's
"Parameters" section heading is a string, not Flower's type.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flowergraph"

# The legacy adapter and the private-names module: at most four files (issue 90).
ALLOWED = (
    "_flower.py",  # Flower's private names and the legacy-stack / engine modules the core reaches (aggregate rules)
    "app/legacy.py",  # the client side: a flowergraph Client as a NumPyClient, Flower's secaggplus_mod
    "app/loop.py",  # the server side: LegacyStrategy / LegacyNodes, Flower's legacy loop, SecAgg+, start_grid
    "app/inprocess.py",  # the in-process federation: ClientProxies that call the clients, on the legacy loop
)
NAMES = ("ClientProxy", "FitIns", "Parameters", "NumPyClient")
MODULES = re.compile(r"^flwr\.(server|client|compat)(\.|$)")
IN_TEXT = re.compile(r"flwr\.(server\.|client\.|compat)|\b(ClientProxy|FitIns|NumPyClient)\b")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of ``tree`` (module, classes, functions)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def legacy_uses(source: str) -> list[str]:
    """``line: what`` for every use of Flower's legacy stack in ``source`` (see the module docstring)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if MODULES.match(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if MODULES.match(node.module):
                found.append(f"{node.lineno}: from {node.module} import ...")
            elif node.module == "flwr":
                found += [
                    f"{node.lineno}: from flwr import {a.name}"
                    for a in node.names
                    if a.name in ("server", "client", "compat")
                ]
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in NAMES]
        elif isinstance(node, ast.Name) and node.id in NAMES:
            found.append(f"{node.lineno}: name {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in NAMES:
            found.append(f"{node.lineno}: attribute {node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            match = IN_TEXT.search(node.value)
            if match:
                found.append(f"{node.lineno}: string naming {match.group(0)}")
    return sorted(set(found), key=lambda line: (int(line.partition(":")[0]), line))


def test_the_legacy_stack_is_confined_to_the_adapter():
    assert len(ALLOWED) <= 4
    for name in ALLOWED:
        assert (PACKAGE / name).is_file(), name
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        uses = legacy_uses(path.read_text())
        if uses:
            offenders[rel] = uses
    assert offenders == {}, (
        f"Flower's legacy stack named outside the adapter ({', '.join(ALLOWED)}): {offenders}; the core speaks "
        f"flowergraph.strategies.nodes (Node, Instruction, Reply, Failure, Federation)"
    )


def test_the_scan_finds_each_kind_of_use():
    sample = '''"""A docstring may name ClientProxy, FitIns and flwr.server.strategy: prose, not code."""
import flwr.server.strategy
from flwr.client import NumPyClient
from flwr.common import FitIns, Parameters
from flwr import compat
from flwr.serverapp import Grid  # the Message API: fine
from flwr.clientapp import ClientApp  # fine


class C(flwr.common.Parameters):
    """Parameters
    ----------
    x : int
    """

    def f(self, proxy: ClientProxy):
        importlib.import_module("flwr.compat.common")
        heading = "Parameters"  # numpydoc's heading: not the type
        return "a NumPyClient"
'''
    assert legacy_uses(sample) == [
        "2: import flwr.server.strategy",
        "3: from flwr.client import ...",
        "3: imports NumPyClient",
        "4: imports FitIns",
        "4: imports Parameters",
        "5: from flwr import compat",
        "10: attribute Parameters",
        "16: name ClientProxy",
        "17: string naming flwr.compat",
        "19: string naming NumPyClient",
    ]


def test_an_injected_use_in_a_core_module_fails_the_check(tmp_path):
    """The check catches a legacy import added to a real core module (here a copy of strategies/base.py)."""
    source = (PACKAGE / "strategies" / "base.py").read_text()
    assert legacy_uses(source) == []
    injected = source.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom flwr.server.client_proxy import ClientProxy\n",
        1,
    )
    assert [u.split(": ", 1)[1] for u in legacy_uses(injected)] == [
        "from flwr.server.client_proxy import ...",
        "imports ClientProxy",
    ]
