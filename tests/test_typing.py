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
    """Every lazily exported name is also imported under TYPE_CHECKING (what a type checker reads), and dir()
    of an API package lists its public names, nothing else."""
    import ast
    import importlib

    for package in ("flowergraph.strategies", "flowergraph.clients", "flowergraph.settings", "flowergraph.storage"):
        module = importlib.import_module(package)
        tree = ast.parse(Path(module.__file__).read_text())
        declared = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                for stmt in node.body:
                    if isinstance(stmt, ast.ImportFrom):
                        declared.update(a.asname or a.name for a in stmt.names)
        exported = set(module._EXPORTS)
        assert exported - declared <= {"OPTIONS", "OPTION_BY_KEY", "METHODS"}, (package, exported - declared)
        assert dir(module) == sorted(module.__all__) == sorted(exported), package
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
        for p in ((REPO / entry).rglob("*.py") if (REPO / entry).is_dir() else [REPO / entry])
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
