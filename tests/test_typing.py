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
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True,
                            text=True, timeout=600)
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
