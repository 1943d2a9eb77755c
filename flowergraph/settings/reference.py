"""The configuration reference, generated from the registrations: the tables of docs/configuration.md and the
``[tool.flwr.app.config]`` tables of a Flower app's ``pyproject.toml`` (``python -m flowergraph.settings``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..methods.registry import methods, tasks
from .keys import COMMON_OPTIONS, GROUPS
from .options import Option


def _groups() -> list[tuple[str, str, list[Option]]]:
    """(group key, title, options) in reference order: the common groups, one group per task, one per method."""
    out = [(g, title, [o for o in COMMON_OPTIONS if o.group == g]) for g, title in GROUPS.items()]
    for task in tasks().values():
        out.append((task.name, f"Task `{task.name}`: {task.summary}", list(task.options)))
    for method in methods().values():
        if method.options:
            out.append((method.name, f"`{method.name}`: {method.summary}", list(method.options)))
    return [g for g in out if g[2]]


def _method_names() -> tuple[str, ...]:
    return tuple(methods())


def markdown_table() -> str:
    """The configuration reference (docs/configuration.md): one table per group."""
    blocks = []
    for _, title, options in _groups():
        lines = [f"**{title}**", "", "| key | default | meaning | choices |", "|---|---|---|---|"]
        for o in options:
            default = f"`{o.default!r}`" if not isinstance(o.default, str) else f'`"{o.default}"`'
            valid = _method_names() if o.key == "method" else o.valid_choices
            choices = ", ".join(f"`{c}`" for c in valid) if valid else ""
            lines.append(f"| `{o.key}` | {default} | {o.help} | {choices} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def toml_value(v: Any) -> str:
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a JSON string is a valid TOML basic string


def toml_table() -> str:
    """The ``[tool.flwr.app.config]`` body for pyproject.toml: common keys, then one table per task and method."""
    lines = [f"{o.key} = {toml_value(o.default)}" for o in COMMON_OPTIONS]
    for owner in list(tasks().values()) + list(methods().values()):
        if owner.options:
            lines.append(f"\n[tool.flwr.app.config.{owner.name}]")
            lines += [f"{o.key[len(owner.name) + 1 :]} = {toml_value(o.default)}" for o in owner.options]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Print the run-configuration reference.")
    parser.add_argument("--markdown", action="store_true", help="the configuration tables (markdown)")
    parser.add_argument("--toml", action="store_true", help="the [tool.flwr.app.config] body")
    parser.add_argument(
        "--update-docs",
        "--update-readme",
        dest="update_readme",
        metavar="MARKDOWN",
        help="rewrite the tables between the file's <!-- config-table --> markers (docs/configuration.md)",
    )
    parser.add_argument(
        "--update-pyproject",
        metavar="PYPROJECT",
        help="rewrite its [tool.flwr.app.config] tables (up to the next non-config table)",
    )
    args = parser.parse_args()
    if args.update_pyproject:
        import re
        from pathlib import Path

        path = Path(args.update_pyproject)
        text = path.read_text()
        new, n = re.subn(
            r"\[tool\.flwr\.app\.config\]\n.*?(?=\n\[(?!tool\.flwr\.app\.config))",
            lambda m: "[tool.flwr.app.config]\n" + toml_table() + "\n",
            text,
            flags=re.S,
        )
        if n != 1:
            raise SystemExit(f"{path}: expected one [tool.flwr.app.config] table followed by another table")
        path.write_text(new)
        return
    if args.update_readme:
        import re
        from pathlib import Path

        path = Path(args.update_readme)
        text = path.read_text()
        new, n = re.subn(
            r"(<!-- config-table -->)\n?.*?\n?(<!-- /config-table -->)",
            lambda m: m.group(1) + "\n" + markdown_table().strip("\n") + "\n" + m.group(2),
            text,
            flags=re.S,
        )
        if n != 1:
            raise SystemExit(f"{path}: expected one <!-- config-table --> ... <!-- /config-table --> block")
        path.write_text(new)
        return
    print(toml_table() if args.toml else markdown_table())
