"""The benchmarks' verdict prose: markdown templates under ``benchmarks/templates/<benchmark>/<name>.md``, filled
by the report scripts (``fedgraph_report.py``, ``asfgnn_report.py``, ``fedstar_report.py``).

A template is Markdown with ``$name`` / ``${name}`` placeholders (:class:`string.Template`: every placeholder must
be given, ``$$`` is a dollar sign). It may open with an HTML comment (``<!-- ... -->``, up to its first ``-->`` and
the line break after it) that says what the placeholders hold; it is not part of the text. The rest is paragraphs
separated by blank lines; the lines of a paragraph are joined by single spaces, so a template is wrapped for
reading while the text written into docs/results keeps each paragraph on one line, as the tables around it.
Paragraphs come out joined by one blank line, without a line break after the last one."""

from __future__ import annotations

import functools
import string
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"


@functools.cache
def template(name: str) -> string.Template:
    """The template ``benchmarks/templates/<name>.md`` (``name`` like ``"fedgraph/work"``), read once."""
    text = (TEMPLATES / f"{name}.md").read_text()
    if text.startswith("<!--"):
        text = text[text.index("-->") + 3 :].removeprefix("\n")
    paragraphs = [" ".join(line.strip() for line in p.strip().splitlines()) for p in text.strip().split("\n\n")]
    return string.Template("\n\n".join(p for p in paragraphs if p))


def render(name: str, **values: object) -> str:
    """The template ``name`` with its placeholders filled from ``values`` (a missing one raises ``KeyError``)."""
    return template(name).substitute(values)
