"""The results pages' verdict prose (``reproductions/_runner/prose.py``; templates under
``reproductions/<paper>/templates/`` and ``benchmarks/templates/``): a template's wrapped lines come out as one line
per paragraph, and every ``render`` call in a reproduction or benchmark names a template that exists and fills
exactly its placeholders (a placeholder renamed on one side only fails here, not after the cells of a results file
are computed)."""

from __future__ import annotations

import ast
import string
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from reproductions._runner import prose  # noqa: E402


def test_a_template_is_its_paragraphs_on_one_line_each_without_its_comment(tmp_path, monkeypatch):
    monkeypatch.setattr(prose, "REPO", tmp_path)
    prose.template.cache_clear()
    (tmp_path / "reproductions" / "demo" / "templates").mkdir(parents=True)
    (tmp_path / "reproductions" / "demo" / "templates" / "t.md").write_text(
        "<!--\nwhat $x holds\n-->\n## Heading\n\nOne $x\nand `two`,\n  three.\n\n$table\n"
    )
    try:
        text = prose.render("demo/t", x="1", table="| a |\n|---|")
        assert text == "## Heading\n\nOne 1 and `two`, three.\n\n| a |\n|---|"
        with pytest.raises(KeyError):
            prose.render("demo/t", x="1")  # every placeholder must be given
    finally:
        prose.template.cache_clear()


def _render_calls() -> list[tuple[str, int, str, set[str], bool]]:
    """(file, line, template name, keyword names, whether a ``**mapping`` is passed too) of every ``render(...)``
    call in the reproductions and benchmarks that render templates (``from reproductions._runner.prose import
    render``)."""
    calls = []
    for path in sorted([*REPO.glob("benchmarks/*.py"), *REPO.glob("reproductions/*/*.py")]):
        if "from reproductions._runner.prose import render" not in path.read_text():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "render":
                assert isinstance(node.args[0], ast.Constant), f"{path.name}:{node.lineno}: a template name literal"
                calls.append(
                    (
                        path.name,
                        node.lineno,
                        node.args[0].value,
                        {k.arg for k in node.keywords if k.arg},
                        any(k.arg is None for k in node.keywords),
                    )
                )
    return calls


def test_every_render_call_fills_exactly_its_templates_placeholders():
    calls = _render_calls()
    assert len(calls) > 20  # fedgraph's, asfgnn's and fedstar's reports
    used = set()
    for file, line, name, given, mapping in calls:
        assert prose.template_path(name).is_file(), f"{file}:{line}: no template {name}"
        wanted = set(prose.template(name).get_identifiers())
        used.add(name)
        if mapping:  # ``**PAPER7`` and the like: the explicit ones at least must be placeholders
            assert given <= wanted, f"{file}:{line}: {name} has no {sorted(given - wanted)}"
        else:
            assert given == wanted, f"{file}:{line}: {name} wants {sorted(wanted)}, is given {sorted(given)}"
    every = set(prose.template_names())
    assert every == used, f"templates no script renders: {sorted(every - used)}"


def test_templates_are_valid_and_hold_no_stray_dollar():
    assert len(prose.template_names()) > 50
    for name in prose.template_names():
        assert prose.template(name).is_valid(), name
        assert isinstance(prose.template(name), string.Template)
