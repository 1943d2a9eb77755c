"""The package's layout: the old import paths of modules that moved (kept with a DeprecationWarning until 0.3)
are gone, and no import cycle exists inside flowergraph (every import statement at any depth counts, except those
under ``if TYPE_CHECKING:``)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The module paths 0.3 removed, and where each module is now (CHANGELOG.md, 0.3.0).
REMOVED_MODULES = {
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


def test_the_old_module_paths_are_gone_and_the_new_ones_import():
    """0.3 removed the meta-path finder that kept the old paths importable: each old path is a
    ModuleNotFoundError naming it, and importing flowergraph installs nothing on ``sys.meta_path``."""
    script = f"""
import importlib, json, sys
before = list(sys.meta_path)
import flowergraph
out = {{"meta_path_added": [type(f).__name__ for f in sys.meta_path if f not in before], "old": {{}}}}
for old, new in {json.dumps(REMOVED_MODULES)}.items():
    try:
        importlib.import_module(old)
        out["old"][old] = "imported"
    except ModuleNotFoundError as exc:
        out["old"][old] = exc.name
    importlib.import_module(new)
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["meta_path_added"] == []
    assert got["old"] == {old: old for old in REMOVED_MODULES}
    assert not (REPO / "flowergraph" / "_compat.py").exists()


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
