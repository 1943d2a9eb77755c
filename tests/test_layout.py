"""The package's layout: the old import paths of modules that moved (kept with a DeprecationWarning until 0.3)
are gone, and no import cycle exists inside flowergraph: every import statement at any depth counts (function
bodies too), a name taken from a package that exports it lazily (``flowergraph._exports.lazy_exports``) counts as
an import of the module that defines it, and a second pass counts the imports under ``if TYPE_CHECKING:`` too (what
a type checker and ``farm-studio look`` see). :func:`import_cycle` checks any package folder."""

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def lazy_export_table(path: Path, package: str) -> dict[str, str] | None:
    """``{name: defining module}`` of a package whose ``__init__.py`` calls ``lazy_exports(__name__, TABLE,
    globals())`` (flowergraph/_exports.py), resolved as that function resolves it (a bare name is a submodule of
    the package); None when it calls none. A table that is not a literal dict (or a module-level name bound to
    one) fails: the checker would not see what the package imports."""
    tree = ast.parse(path.read_text())
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) == "lazy_exports"
    ]
    if not calls:
        return None
    bound = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    table: dict[str, str] = {}
    for call in calls:
        arg = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "exports"), None)
        arg = bound.get(arg.id, arg) if isinstance(arg, ast.Name) else arg
        try:
            exports = ast.literal_eval(arg)
        except (ValueError, TypeError, SyntaxError):
            raise AssertionError(
                f"{path}: lazy_exports's table is not a literal dict; the layout test cannot see "
                f"which modules {package}'s names import"
            ) from None
        table.update({name: module if "." in module else f"{package}.{module}" for name, module in exports.items()})
    return table


def _imports(
    path: Path, module: str, is_pkg: bool, lazy: dict[str, dict[str, str]], type_checking: bool = False
) -> set[str]:
    """Every module name ``path`` imports, at any depth (function bodies too), outside ``if TYPE_CHECKING:``
    blocks unless ``type_checking``; a name taken from a package that exports it lazily (``lazy``: package ->
    its table) is an import of the module that defines it, since that is what the import runs."""
    found: set[str] = set()

    def resolve(level: int, name: str | None) -> str:
        if level == 0:
            return name or ""
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def visit(node):
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.level, node.module)
            found.add(base)
            table = lazy.get(base, {})
            found.update(table.get(a.name, f"{base}.{a.name}") for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def import_graph(root: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    """The import edges between the modules of the package at ``root`` (a folder with ``__init__.py``): module ->
    the modules of the package it imports (see :func:`_imports`). A package importing its own submodules is an
    edge; a module importing one of its ancestor packages is not (the package is imported first anyway), but a
    name that ancestor exports lazily is an edge to the module that defines it."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    lazy = {
        name: table
        for name, (path, is_pkg) in modules.items()
        if is_pkg and (table := lazy_export_table(path, name)) is not None
    }
    top = root.name
    edges = {}
    for name, (path, is_pkg) in modules.items():
        targets = set()
        for target in _imports(path, name, is_pkg, lazy, type_checking):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if (
                target
                and target != name
                and not name.startswith(target + ".")
                and (target == top or target.startswith(top + "."))
            ):
                targets.add(target)
        edges[name] = targets
    return edges


def import_cycle(root: Path, *, type_checking: bool = False) -> list[str] | None:
    """An import cycle among the modules of the package at ``root`` (``[a, b, ..., a]``), or None."""
    edges = import_graph(root, type_checking=type_checking)
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


@pytest.mark.parametrize("type_checking", [False, True], ids=["run-time", "with-type-checking"])
def test_no_import_cycle_inside_flowergraph(type_checking):
    """No cycle among flowergraph's imports: at any depth, through the packages' lazy exports; with
    ``type_checking``, the imports under ``if TYPE_CHECKING:`` count too. The order this keeps: the settings'
    schema (options, keys, choices) imports nothing above it; the registry (``methods.registry``, with
    ``RunSettings``) only the schema; parse, checks, datasets, presets and reference sit above the registry;
    ``data.py`` imports the settings, never a method module or the app layer."""
    assert len(import_graph(REPO / "flowergraph", type_checking=type_checking)) > 60  # the walk saw the package
    cycle = import_cycle(REPO / "flowergraph", type_checking=type_checking)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_settings_schema_is_a_leaf_and_the_registry_imports_only_the_schema():
    """The order the cycle check keeps, named (type-only imports included): the schema imports only itself and
    the errors; the registry the schema (and, inside StrategyArgs's builders, the strategies' policy and
    aggregation, which import only the schema's choices); parse, checks, datasets and reference import the
    registry; data.py no method module but the registry (RunSettings) and nothing of the app layer."""
    edges = import_graph(REPO / "flowergraph", type_checking=True)
    schema = {"flowergraph.settings.options", "flowergraph.settings.keys", "flowergraph.settings.choices"}
    for module in schema:
        assert edges[module] <= schema | {"flowergraph.errors"}, (module, edges[module])
    builders = {"flowergraph.strategies.policy", "flowergraph.strategies.aggregation"}
    assert edges["flowergraph.methods.registry"] <= schema | builders | {"flowergraph.errors"}, edges[
        "flowergraph.methods.registry"
    ]
    for module in ("parse", "checks", "datasets", "reference"):
        assert "flowergraph.methods.registry" in edges[f"flowergraph.settings.{module}"], module
    assert {m for m in edges["flowergraph.data"] if m.startswith(("flowergraph.app", "flowergraph.methods"))} == {
        "flowergraph.methods.registry"
    }, edges["flowergraph.data"]


LAZY_PACKAGE = {  # a package whose __init__ exports Thing lazily, from a submodule that imports the package back
    "__init__.py": """
        from ._exports import lazy_exports

        _EXPORTS = {"Thing": "thing", "helper": "pkg.user"}
        __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
        """,
    "thing.py": """
        from .user import helper


        class Thing:
            made_by = helper
        """,
    "user.py": """
        from pkg import Thing  # the package's lazy export: this runs pkg/thing.py


        def helper():
            return Thing
        """,
}


def _write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "_exports.py").write_text((REPO / "flowergraph" / "_exports.py").read_text())
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text).lstrip())
    return pkg


def test_the_cycle_check_catches_a_cycle_through_a_lazy_export(tmp_path):
    """``from pkg import Thing`` in pkg/user.py imports the package (an ancestor: no edge) but runs pkg/thing.py,
    which imports pkg/user.py: a real cycle (importing pkg.thing fails), which only resolving the lazy export
    shows. At function level it is still an edge; without the import there is no cycle."""
    pkg = _write_package(tmp_path, LAZY_PACKAGE)
    run = subprocess.run([sys.executable, "-c", "import pkg.thing"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and "cannot import name 'Thing'" in run.stderr, run.stderr  # the knot is real
    assert import_graph(pkg)["pkg.user"] == {"pkg.thing"}  # the lazy export resolved to its module
    assert import_cycle(pkg) == ["pkg.thing", "pkg.user", "pkg.thing"]

    (pkg / "user.py").write_text(
        "def helper():\n    from . import Thing  # function level, relative: still an edge\n    return Thing\n"
    )
    assert import_cycle(pkg) == ["pkg.thing", "pkg.user", "pkg.thing"]
    (pkg / "user.py").write_text("def helper():\n    return None\n")
    assert import_cycle(pkg) is None

    (pkg / "user.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg import Thing\n")
    assert import_cycle(pkg) is None  # a type-only import: only the second pass counts it
    assert import_cycle(pkg, type_checking=True) == ["pkg.thing", "pkg.user", "pkg.thing"]


def test_a_lazy_export_table_the_check_cannot_read_fails(tmp_path):
    pkg = _write_package(
        tmp_path,
        {
            "__init__.py": """
            from ._exports import lazy_exports

            __getattr__, __dir__ = lazy_exports(__name__, dict(Thing="thing"), globals())
            """,
            "thing.py": "class Thing:\n    pass\n",
        },
    )
    with pytest.raises(AssertionError, match="lazy_exports's table is not a literal dict"):
        import_cycle(pkg)
