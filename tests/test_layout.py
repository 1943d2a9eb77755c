"""The package's layout: modules that moved keep their old import paths (with a DeprecationWarning naming the new
place), and no import cycle exists inside flowergraph (every import statement at any depth counts, except those
under ``if TYPE_CHECKING:``)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from flowergraph._compat import MOVED

REPO = Path(__file__).resolve().parents[1]


def test_every_moved_module_keeps_its_old_path_with_a_deprecation_warning():
    script = f"""
import importlib, json, sys, warnings
out = {{}}
for old, new in {json.dumps(MOVED)}.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(f"import {{old}}")  # the import statement is this script's (warnings name the line that imports)
        module = sys.modules[old]
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
                and w.filename == "<string>"]
    out[old] = [module is importlib.import_module(new), messages]
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    got = json.loads(result.stdout.strip().splitlines()[-1])
    for old, new in MOVED.items():
        same, messages = got[old]
        assert same, f"import {old} is not the module {new}"
        assert any(f"{old} moved to {new}" in m for m in messages), (old, messages)
    # a Flower app that still names the old components loads them
    script = ("from flowergraph.server_app import app as s; from flowergraph.client_app import app as c; "
              "print(type(s).__name__, type(c).__name__)")
    assert subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True,
                          check=True).stdout.split() == ["ServerApp", "ClientApp"]


def _imports(path: Path, module: str, is_pkg: bool) -> set[str]:
    """Every module name ``path`` imports, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def resolve(level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def visit(node):
        if isinstance(node, ast.If) and ((isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING") or
                                         (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.level, node.module)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def test_no_import_cycle_inside_flowergraph():
    modules = {}
    for path in (REPO / "flowergraph").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    edges = {}
    for name, (path, is_pkg) in modules.items():
        targets = set()
        for target in _imports(path, name, is_pkg):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # a package importing its own submodules, or a module its ancestor package, is not a cycle
            if target and target != name and not name.startswith(target + ".") and target.startswith("flowergraph"):
                targets.add(target)
        edges[name] = targets
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := walk(node)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))
    assert len(edges) > 60  # the walk saw the package
