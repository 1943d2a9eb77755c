"""The typed public seams pass ``mypy --strict`` (configured in pyproject.toml: flowergraph/methods, the base
strategy, its policy and its model bank), and the package says it is typed (``py.typed``)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_public_seams_pass_mypy_strict():
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("MYPY NOT INSTALLED: the test command's set-up installs it (pip install -e '.[test]')")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_package_ships_py_typed():
    assert (REPO / "flowergraph" / "py.typed").is_file()


def test_lazy_exports_are_declared_for_type_checkers_and_dir_lists_public_names_only():
    """Each API package has one export table (``_EXPORTS``: name -> module; ``__all__`` is derived from it); what a
    type checker reads, the imports under ``if TYPE_CHECKING:``, names exactly those names, each as an explicit
    re-export (``from .x import Name as Name``), from the module the table names; dir() lists them, nothing else."""
    import ast
    import importlib

    for package in ("flowergraph.strategies", "flowergraph.clients", "flowergraph.settings", "flowergraph.storage"):
        module = importlib.import_module(package)
        tree = ast.parse(Path(module.__file__).read_text())
        declared = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                for stmt in node.body:
                    assert isinstance(stmt, ast.ImportFrom), (package, ast.dump(stmt))
                    source = "." * stmt.level + (stmt.module or "")
                    for alias in stmt.names:
                        assert alias.asname == alias.name, (package, alias.name, "not re-exported: add `as` it")
                        declared[alias.name] = source
        table = module._EXPORTS
        assert declared.keys() == table.keys(), (package, declared.keys() ^ table.keys())
        last = lambda m: m.rsplit(".", 1)[-1]  # noqa: E731 (the module's own name: ".checkpoint" / "checkpoint")
        assert {n: last(m) for n, m in declared.items()} == {n: last(m) for n, m in table.items()}, package
        assert dir(module) == module.__all__ == sorted(table), package
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_no_seam_imports_a_package_mypy_is_told_to_skip():
    """pyproject.toml makes mypy skip heavy third-party packages (their types would become Any): that keeps the
    strict check's verdict only while no seam imports one of them."""
    import ast
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    skipped = {
        pattern.removesuffix(".*")
        for override in config["overrides"]
        if override["follow_imports"] == "skip"
        for pattern in override["module"]
    }
    assert {"torch", "smac", "sqlalchemy"} <= skipped
    seams = [
        p
        for entry in config["files"]
        for p in ((REPO / entry).rglob("*.py") if (REPO / entry).is_dir() else sorted(REPO.glob(entry)))
    ]
    assert len(seams) >= 4
    for path in seams:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for name in names:
                assert name.split(".")[0] not in skipped, f"{path.relative_to(REPO)} imports {name}, which mypy skips"
