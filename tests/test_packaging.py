"""What the package declares: one version, the Python it needs, the Flower versions it runs on, its license, and
Flower 1.42's FAB metadata (the repository is itself a Flower app)."""

import sys
import tomllib
from pathlib import Path

import flowergraph

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_version_has_one_place():
    """pyproject.toml declares it; flowergraph.__version__ reads it (installed or not): no second literal."""
    assert flowergraph.__version__ == PYPROJECT["project"]["version"]
    assert PYPROJECT["project"]["version"] not in (REPO / "flowergraph" / "__init__.py").read_text()


def test_requires_python_is_what_the_code_needs():
    """settings/presets.py imports tomllib (3.11+), so the declared floor is 3.11 and this interpreter meets it."""
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert "import tomllib" in (REPO / "flowergraph" / "settings" / "presets.py").read_text()
    assert sys.version_info >= (3, 11)


def test_flower_range_and_fab_metadata(tmp_path):
    """flwr>=1.41,<1.43; Flower's own FAB validation accepts the repository's pyproject (format 1: a license file,
    the targeted Flower version within the dependency's range) and the LICENSE goes into the FAB."""
    from flwr.supercore.fab_format_version import normalize_and_validate_fab_format

    flwr = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("flwr")]
    assert flwr == ["flwr[simulation,dp]>=1.41,<1.43"]
    assert PYPROJECT["project"]["license"] == {"file": "LICENSE"}
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")
    app = PYPROJECT["tool"]["flwr"]["app"]
    assert app["fab-format-version"] == 1 and "LICENSE" in app["fab-include"]
    meta = normalize_and_validate_fab_format(dict(PYPROJECT))
    assert meta.fab_format_version == 1 and meta.flwr_version_min == "1.41"
