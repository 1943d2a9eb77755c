"""flowergraph's public API is declared in one place, ``flowergraph.PUBLIC_API`` (the public modules; a module's
public names are its ``__all__``, else its names without a leading underscore), and docs/api.md mirrors it. The
reproductions (reproductions/) use that API only: an import of any other flowergraph module, or of a name a public
module does not make public, fails here naming the file, the line and the import (issue 93). The library's
benchmarks (benchmarks/) measure the library itself and may reach its insides, but never import a public name by an
internal path (``flowergraph.storage.results.read_run`` for ``flowergraph.storage.read_run``).

What a reproduction may import beside the public API is listed in ``ALLOWED``, each with its reason: an entry no
file uses any more fails too."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from flowergraph import PUBLIC_API

REPO = Path(__file__).resolve().parents[1]
# module -> why a reproduction may import it although it is not flowergraph's public API. At most a handful.
ALLOWED: dict[str, str] = {
    "benchmarks.noop_methods": "the no-op floors (fedstar-noop, flagcns-noop) a method's round time is put beside: "
    "the benchmarks' method plugin (docs/extending.md), which benchmarks/ shares with the reproductions; "
    "not flowergraph's methods"
}


def public_names(module: str) -> set[str]:
    """The public names of public module ``module``: its ``__all__``, else its names without a leading underscore."""
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    return set(names) if names is not None else {n for n in vars(mod) if not n.startswith("_")}


def _imports(path: Path) -> list[tuple[int, str, list[str], str]]:
    """(line, module, names taken from it, the import as written) of every absolute import of flowergraph or
    benchmarks in ``path``, at any depth (imports inside functions included); ``import M`` takes no names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, [], f"import {a.name}") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [a.name for a in node.names]
            found.append((node.lineno, node.module, names, f"from {node.module} import {', '.join(names)}"))
    return [f for f in found if f[1].split(".")[0] in ("flowergraph", "benchmarks")]


def _files(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def _outside_the_api(module: str, names: list[str]) -> list[str]:
    """What of ``from module import names`` (``import module`` without names) is neither public nor allowed."""
    if not names:
        return [] if module in PUBLIC_API or module in ALLOWED else [module]
    if module not in PUBLIC_API:
        return [f"{module}.{n}" for n in names if f"{module}.{n}" not in ALLOWED and module not in ALLOWED]
    public = public_names(module)
    return [f"{module}.{n}" for n in names if n not in public and f"{module}.{n}" not in PUBLIC_API]


def test_the_declared_api_resolves_and_keeps_private_names_private():
    for module in PUBLIC_API:
        mod = importlib.import_module(module)
        names = public_names(module)
        assert not [n for n in names if n.startswith("_") and n != "__version__"], module
        missing = [n for n in getattr(mod, "__all__", []) if not hasattr(mod, n) and f"{module}.{n}" not in PUBLIC_API]
        missing = [n for n in missing if not (REPO / module.replace(".", "/") / f"{n}.py").is_file()]
        assert not missing, f"{module}.__all__ names what it does not define: {missing}"


def test_docs_api_mirrors_the_declaration():
    """docs/api.md's section "The public API" names every public module, and no other flowergraph module."""
    text = (REPO / "docs" / "api.md").read_text()
    section = text.split("## The public API", 1)[1].split("\n#", 1)[0]
    named = set(re.findall(r"`(flowergraph(?:\.[a-z_]+)*)`", section))
    assert set(PUBLIC_API) - {"flowergraph"} <= named, sorted(set(PUBLIC_API) - named - {"flowergraph"})
    assert named <= set(PUBLIC_API), sorted(named - set(PUBLIC_API))


def test_the_reproductions_import_only_flowergraphs_public_api():
    bad = [
        f"{path.relative_to(REPO)}:{line}: {written} ({', '.join(outside)})"
        for path in _files("reproductions")
        for line, module, names, written in _imports(path)
        if (outside := _outside_the_api(module, names))
    ]
    assert not bad, (
        "imports of flowergraph's insides (or of benchmarks/) in reproductions/; use flowergraph.PUBLIC_API's "
        "modules and their public names (make what is missing public there), or list a module in ALLOWED with its "
        "reason:\n" + "\n".join(bad)
    )


def test_every_allowed_import_is_still_used():
    used = {
        m
        for path in _files("reproductions")
        for _, module, names, _ in _imports(path)
        for m in (module, *(f"{module}.{n}" for n in names))
    }
    assert not set(ALLOWED) - used, f"listed in ALLOWED but imported nowhere (remove them): {set(ALLOWED) - used}"


@pytest.fixture(scope="module")
def public_objects() -> dict[int, str]:
    """id -> ``module.name`` of every public class and function: where several public modules export one, the
    public module nearest the one defining it (``flowergraph.tasks.TrainConfig``, not ``flowergraph.clients``')."""
    found: dict[int, list[str]] = {}
    for module in PUBLIC_API:
        mod = importlib.import_module(module)
        for name in sorted(public_names(module)):
            obj = getattr(mod, name, None)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                found.setdefault(id(obj), []).append(f"{module}.{name}")
    defining = {
        id(o): o.__module__
        for m in PUBLIC_API
        for o in map(lambda n: getattr(importlib.import_module(m), n, None), public_names(m))
        if inspect.isclass(o) or inspect.isfunction(o)
    }

    def nearest(i: int, places: list[str]) -> str:
        home = [p for p in places if defining.get(i, "").startswith(p.rsplit(".", 1)[0])]
        return max(home, key=len) if home else places[0]

    return {i: nearest(i, places) for i, places in found.items()}


def _by_an_internal_path(module: str, names: list[str], public_objects: dict[int, str]) -> list[str]:
    """What of ``from module import names`` in a benchmark takes a public name by an internal path, or a private
    name of a public module (a submodule is an internal module, which a benchmark may import)."""
    wrong = []
    for n in names:
        dotted = REPO / module.replace(".", "/") / n
        if dotted.with_suffix(".py").is_file() or (dotted / "__init__.py").is_file():
            continue
        if module in PUBLIC_API:
            wrong += [f"{module}.{n} is not public"] if n not in public_names(module) else []
        elif id(obj := getattr(importlib.import_module(module), n, None)) in public_objects and obj is not None:
            wrong.append(f"{module}.{n} is {public_objects[id(obj)]}")
    return wrong


def test_the_benchmarks_take_public_names_from_the_public_api(public_objects):
    bad = [
        f"{path.relative_to(REPO)}:{line}: {written} ({'; '.join(wrong)})"
        for path in _files("benchmarks")
        for line, module, names, written in _imports(path)
        if module.startswith("flowergraph") and (wrong := _by_an_internal_path(module, names, public_objects))
    ]
    assert not bad, "benchmarks/ importing public names by an internal path:\n" + "\n".join(bad)


def test_the_reproductions_are_not_installed_with_the_package():
    """pyproject's package discovery installs flowergraph's packages only: reproductions/ stays beside them."""
    import fnmatch
    import tomllib

    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["flowergraph*"]
    assert not any(fnmatch.fnmatch(name, p) for p in find["include"] for name in ("reproductions", "benchmarks"))


def test_the_scan_sees_imports_at_any_depth_and_checks_names(tmp_path):
    """The scanner itself: a function-level import, ``from flowergraph import <submodule>``, a private name of a
    public module, a public name by an internal path and a plain import."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import flowergraph.app.inprocess\nfrom flowergraph import data, __version__\n\n"
        "def f():\n    from flowergraph.tasks import configure_torch, _EXPORTS\n    import benchmarks.noop_methods\n"
        "    from flowergraph.storage.results import read_run\n"
    )
    found = [(line, module, names) for line, module, names, _ in _imports(sample)]
    assert found == [
        (1, "flowergraph.app.inprocess", []),
        (2, "flowergraph", ["data", "__version__"]),
        (5, "flowergraph.tasks", ["configure_torch", "_EXPORTS"]),
        (6, "benchmarks.noop_methods", []),
        (7, "flowergraph.storage.results", ["read_run"]),
    ]
    assert [_outside_the_api(m, n) for _, m, n in found] == [
        ["flowergraph.app.inprocess"],
        [],
        ["flowergraph.tasks._EXPORTS"],
        [],
        ["flowergraph.storage.results.read_run"],
    ]


def test_the_benchmarks_scan_allows_internal_modules_but_not_internal_paths_to_public_names(public_objects):
    assert _by_an_internal_path("flowergraph.privacy", ["ckks"], public_objects) == []
    assert _by_an_internal_path("flowergraph.app.inline", ["run_inline"], public_objects) == []
    assert _by_an_internal_path("flowergraph.storage.results", ["read_run"], public_objects) == [
        "flowergraph.storage.results.read_run is flowergraph.storage.read_run"
    ]
    assert _by_an_internal_path("flowergraph.tasks", ["_EXPORTS"], public_objects) == [
        "flowergraph.tasks._EXPORTS is not public"
    ]
