"""The verdict prose of the results pages: Markdown templates, named ``<paper>/<name>``: a reproduction's in
``reproductions/<paper>/templates/<name>.md``, a benchmark's in ``benchmarks/templates/<benchmark>/<name>.md``,
filled by the report modules.

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

REPO = Path(__file__).resolve().parents[2]


def template_path(name: str) -> Path:
    """Where the template ``name`` (like ``"fedgraph/work"``) is: ``reproductions/fedgraph/templates/work.md`` for a
    reproduction's, else ``benchmarks/templates/<name>.md`` (``"privacy_cost/notes"``: a benchmark's)."""
    paper, _, rest = name.partition("/")
    own = REPO / "reproductions" / paper / "templates" / f"{rest}.md"
    return own if own.is_file() else REPO / "benchmarks" / "templates" / f"{name}.md"


def template_names() -> list[str]:
    """Every template's name."""
    names = {f"{p.parent.parent.name}/{p.stem}" for p in (REPO / "reproductions").glob("*/templates/*.md")}
    names |= {
        str(p.relative_to(REPO / "benchmarks" / "templates"))[:-3] for p in REPO.glob("benchmarks/templates/*/*.md")
    }
    return sorted(names)


@functools.cache
def template(name: str) -> string.Template:
    """The template ``name`` (:func:`template_path`), read once."""
    text = template_path(name).read_text()
    if text.startswith("<!--"):
        text = text[text.index("-->") + 3 :].removeprefix("\n")
    paragraphs = [" ".join(line.strip() for line in p.strip().splitlines()) for p in text.strip().split("\n\n")]
    return string.Template("\n\n".join(p for p in paragraphs if p))


def render(name: str, **values: object) -> str:
    """The template ``name`` with its placeholders filled from ``values`` (a missing one raises ``KeyError``)."""
    return template(name).substitute(values)
