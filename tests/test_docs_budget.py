"""Docs a user reads in ten minutes (issue 93): every method page at most 2,500 words and the hand-written pages
under docs/ (all but docs/results/, which benchmarks write) at most 35,000 words in all, counted as ``wc -w``
counts. A research log belongs in reproductions/<paper>/NOTES.md, a run's numbers in docs/results/."""

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
METHOD_PAGE_WORDS = 2_500
HAND_WRITTEN_WORDS = 35_000


def _words(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").split())


def test_every_method_page_reads_in_ten_minutes():
    pages = sorted((DOCS / "methods").glob("*.md"))
    assert pages
    over = {p.name: _words(p) for p in pages if _words(p) > METHOD_PAGE_WORDS}
    assert not over, f"method pages over {METHOD_PAGE_WORDS} words: {over}"


def test_the_hand_written_docs_stay_within_their_budget():
    pages = [p for p in DOCS.rglob("*.md") if "results" not in p.relative_to(DOCS).parts]
    total = sum(_words(p) for p in pages)
    biggest = sorted(((_words(p), str(p.relative_to(DOCS))) for p in pages), reverse=True)[:5]
    assert total <= HAND_WRITTEN_WORDS, f"docs/ (without results/) has {total} words; the largest pages: {biggest}"
