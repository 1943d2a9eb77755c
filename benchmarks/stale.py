"""Which results pages are stale: ``python -m benchmarks.stale [--results DIR] [--strict]``.

Every page ``write_result`` writes (docs/results/<name>.md) carries a code line: the commit it was produced on and
the code hash (:func:`common.code_state`: docstrings and comments excluded) of the files it depends on, the package
sources its numbers come from (the whole package, or a benchmark's narrower ``SOURCES``, the globs its cell store
hashes) and the scripts that wrote it. This check hashes those files again as they are now and lists:

* ``stale``: the code changed since the page was produced (a file edited, added to a glob, or gone);
* ``unknown``: the page records no code line (written before pages named their code): it may be stale.

Pages whose code is unchanged are not listed; with none left it prints "none". Exit status 0 (CI prints the
list, .ci/run), or with ``--strict`` 1 when any page is listed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reproductions._runner.common import CODE_LINE, REPO, hash_tree  # noqa: E402

_LINE = re.compile(
    rf"^{re.escape(CODE_LINE)}(?P<commit>\S+?)(?P<dirty> with uncommitted changes)?, code hash (?P<hash>[0-9a-f]+) of: "
    r"(?P<globs>.*)\.$",
    re.MULTILINE,
)


def page_state(page: Path, root: Path) -> tuple[str, str]:
    """``(verdict, reason)`` for one results page: ``current``, ``stale`` or ``unknown``, the files hashed under
    ``root`` (the repository the page's code is in)."""
    match = _LINE.search(page.read_text())
    if match is None:
        return "unknown", "records no commit or code hash"
    globs = tuple(re.findall(r"`([^`]+)`", match["globs"]))
    now, files = hash_tree(root, globs)
    produced = f"commit {match['commit']}{' (uncommitted changes)' if match['dirty'] else ''}"
    if now == match["hash"]:
        return "current", f"{produced}, code hash {now}"
    return "stale", f"produced on {produced}, code hash {match['hash']}; {now} now ({files} files)"


def stale_pages(results: Path, root: Path) -> list[tuple[Path, str, str]]:
    """``(page, verdict, reason)`` of every results page in ``results`` that is stale or unknown (README.md, the
    index, is no results page), in name order."""
    listed = []
    for page in sorted(results.glob("*.md")):
        if page.name == "README.md":
            continue
        verdict, reason = page_state(page, root)
        if verdict != "current":
            listed.append((page, verdict, reason))
    return listed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO / "docs" / "results", help="the results pages' folder")
    parser.add_argument("--root", type=Path, default=REPO, help="the repository the pages' code is hashed in")
    parser.add_argument("--strict", action="store_true", help="exit status 1 when any page is stale or unknown")
    a = parser.parse_args(argv)
    listed = stale_pages(a.results, a.root)

    def shown(path: Path) -> Path:
        return path.relative_to(a.root) if path.resolve().is_relative_to(a.root.resolve()) else path

    print(f"Stale results pages (code changed since produced, or no code recorded) in {shown(a.results)}:")
    for page, verdict, reason in listed:
        print(f"  {verdict:<8} {shown(page)}: {reason}")
    if not listed:
        print("  none")
    else:
        counts = {v: sum(x[1] == v for x in listed) for v in ("stale", "unknown")}
        print(f"  {counts['stale']} stale, {counts['unknown']} unknown")
    return 1 if a.strict and listed else 0


if __name__ == "__main__":
    sys.exit(main())
