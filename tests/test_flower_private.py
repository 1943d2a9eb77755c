"""Private Flower names in one place (:mod:`flowergraph._flower`): each reliance holds in the installed Flower, and
no other module of the package names a private Flower name or assigns to Flower's modules or classes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from flowergraph import _flower

PACKAGE = Path(__file__).resolve().parents[1] / "flowergraph"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


@pytest.mark.parametrize("reliance", _flower.RELIANCES, ids=lambda r: r.name.split()[0])
def test_every_reliance_holds_in_the_installed_flower(reliance):
    import flwr

    missing = reliance.probe()
    assert missing is None, (
        f"Flower {flwr.__version__} broke what {reliance.users} relies on: {reliance.name} ({missing}). "
        f"flowergraph uses it to {reliance.does}; without it {reliance.fallback}. Update flowergraph._flower."
    )
    assert _flower.problems() == []


def _flower_uses(path: Path) -> list[str]:
    """Private Flower names (``_x``) imported or read, and assignments to attributes of Flower's names, in
    ``path``: ``line: what``."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "flwr":
            for alias in node.names:
                names.add(alias.asname or alias.name)
                if alias.name.startswith("_"):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "flwr")

    def flower_base(node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in names

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and flower_base(node.value):
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) else []:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute) and flower_base(t.value):
                    found.append(f"{node.lineno}: assigns {ast.unparse(t)}")
    return sorted(found, key=lambda line: int(line.partition(":")[0]))


# TaskIdentity's public setters (a process's task, run and node ids) are Flower's API for a process that runs a
# message; flowergraph's inline engine and a node's worker set them as Flower's own processes do.
PUBLIC_SETTERS = ("TaskIdentity.task_id", "TaskIdentity.run_id", "TaskIdentity.node_id")


def test_no_other_module_names_a_private_flower_name():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_flower.py":
            continue
        uses = [u for u in _flower_uses(path) if not any(u.endswith(f"assigns {s}") for s in PUBLIC_SETTERS)]
        if uses:
            offenders[str(path.relative_to(PACKAGE))] = uses
    assert offenders == {}, f"private Flower names outside flowergraph/_flower.py: {offenders}"


def test_the_scan_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from flwr.a import _private, Public\nimport flwr.b\n"
        "Public._field\nflwr.b.CONSTANT = 1\nPublic.x, y = 1, 2\nother._fine = 3\n"
    )
    assert _flower_uses(sample) == [
        "1: from flwr.a import _private",
        "3: Public._field",
        "4: assigns flwr.b.CONSTANT",
        "5: assigns Public.x",
    ]


def test_the_architecture_page_lists_every_reliance():
    text = DOCS.read_text()
    section = text[text.index("## Private Flower names") :]
    for reliance in _flower.RELIANCES:
        assert f"`{reliance.users}`" in section, reliance.users


def test_the_legacy_stack_and_engine_modules_the_core_reaches_resolve():
    """The core reaches Flower's server package only through _flower (tests/test_legacy_confined.py): its robust
    aggregation functions (no public Message-API equivalent) and the Simulation Engine's pieces. A Flower release
    that moves them fails here, naming them."""
    import numpy as np

    updates = [([np.full(3, float(k), np.float32)], 1) for k in range(5)]
    assert _flower.aggregate_rule("median")(updates)[0].tolist() == [2.0, 2.0, 2.0]
    assert _flower.aggregate_rule("trimmed-mean")(updates, 0.2)[0].tolist() == [2.0, 2.0, 2.0]
    assert len(_flower.aggregate_rule("krum")(updates, 1, 0)) == 1
    backend, config = _flower.simulation_backend()
    assert isinstance(backend, type) and config is not None  # BackendConfig: a type alias
    assert set(_flower.simulation_engine()) == {
        "VceMetrics",
        "run_api",
        "LinkStateFactory",
        "RunRecord",
        "generate_rand_int_from_bytes",
    }
