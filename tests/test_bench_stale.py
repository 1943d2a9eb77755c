"""Results pages that say when they are stale (issue 93, part 3): write_result's code line and benchmarks/stale.py,
on a real temporary git repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import stale  # noqa: E402
from reproductions._runner import common  # noqa: E402


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository with two package modules and a benchmark script, committed; write_result writes there."""
    root = tmp_path / "repo"
    (root / "flowergraph").mkdir(parents=True)
    (root / "benchmarks").mkdir()
    (root / "flowergraph" / "a.py").write_text('"""Module a."""\n\nX = 1\n')
    (root / "flowergraph" / "b.py").write_text('"""Module b."""\n\nY = 2\n')
    (root / "benchmarks" / "bench.py").write_text("Z = 3\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "start")
    monkeypatch.setattr(common, "REPO", root)
    monkeypatch.setattr(common, "loaded_scripts", lambda: ["benchmarks/bench.py"])  # this process's are elsewhere
    return root


def _write(name: str, sources: tuple[str, ...]) -> Path:
    return common.write_result(name, name, "| a |\n|---|\n| 1 |", argv=["benchmarks/bench.py"], sources=sources)


def _listed(root: Path) -> dict[str, str]:
    return {page.name: verdict for page, verdict, _ in stale.stale_pages(root / "docs" / "results", root)}


def test_a_page_names_its_commit_and_is_listed_once_its_code_changes(repo, capsys):
    page_a = _write("on_a", ("flowergraph/a.py",))
    _write("on_b", ("flowergraph/b.py",))
    commit = _git(repo, "rev-parse", "--short=12", "HEAD")
    line = next(line for line in page_a.read_text().splitlines() if line.startswith("Code: commit"))
    assert line.startswith(f"Code: commit {commit}, code hash ") and "`flowergraph/a.py`, `benchmarks/bench.py`" in line
    assert _listed(repo) == {}  # both produced on the code as it is
    assert stale.main(["--results", str(repo / "docs" / "results"), "--root", str(repo)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  none"

    (repo / "flowergraph" / "a.py").write_text('"""Module a, its documentation edited."""\n\nX = 1  # same code\n')
    assert _listed(repo) == {}  # docstrings and comments are no code
    (repo / "flowergraph" / "a.py").write_text('"""Module a."""\n\nX = 10\n')
    assert _listed(repo) == {"on_a.md": "stale"}  # on_b depends on b.py only: not listed
    (repo / "benchmarks" / "bench.py").unlink()  # the script that wrote both is gone: both stale
    assert _listed(repo) == {"on_a.md": "stale", "on_b.md": "stale"}
    assert stale.main(["--results", str(repo / "docs" / "results"), "--root", str(repo), "--strict"]) == 1
    out = capsys.readouterr().out
    assert f"stale    docs/results/on_a.md: produced on commit {commit}" in out and "2 stale, 0 unknown" in out


def test_a_page_without_a_code_line_is_listed_as_unknown_and_the_index_is_not(repo):
    results = repo / "docs" / "results"
    _write("fresh", ("flowergraph/*.py",))
    (results / "old.md").write_text("# Old\n\nProduced by (from the repository root):\n\nMeasured long ago.\n")
    (results / "README.md").write_text("# The index\n")
    assert _listed(repo) == {"old.md": "unknown"}
    (repo / "flowergraph" / "c.py").write_text("W = 4\n")  # a new file under the page's glob is new code
    assert _listed(repo) == {"old.md": "unknown", "fresh.md": "stale"}


def test_a_page_written_with_uncommitted_changes_says_so(repo):
    (repo / "flowergraph" / "a.py").write_text("X = 5\n")
    text = _write("dirty", ("flowergraph/a.py",)).read_text()
    assert " with uncommitted changes, code hash " in text
    assert _listed(repo) == {}  # the hash is of the code as it was written, committed or not


@pytest.mark.parametrize("tests_status", [0, 3])
def test_ci_prints_the_stale_pages_after_the_tests_and_keeps_their_exit_status(tmp_path, tests_status):
    """.ci/run, in a copy whose scripts/test.sh and stale check are stand-ins: the README's test command runs first,
    the stale list is printed after it, and the job's exit status is the tests' status."""
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text((REPO / ".ci" / "run").read_text())
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test.sh").write_text(f"echo the tests ran\nexit {tests_status}\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "stale.py").write_text("print('the stale list')\n")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "FLOWERGRAPH_VENV": str(tmp_path / "venv")},
    )
    assert done.returncode == tests_status, done.stderr
    lines = [line for line in done.stdout.splitlines() if line]
    assert lines == ["the tests ran", "the stale list"]
