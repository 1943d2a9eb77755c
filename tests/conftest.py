"""Shared fixtures. Datasets come from ../shared/datasets (read-only; PyG processes copies in a cache), or from the
folder ``FLOWERGRAPH_TEST_DATA`` names. Tests that need them are skipped when they are missing, and the run ends
with one line per skip reason; with ``FLOWERGRAPH_REQUIRE_DATA=1`` (CI) they fail instead.

Everything the suite writes to the temp directory (the dataset cache, pytest's own folders, Ray's session
folders, PyG's generated modules) goes into one folder of this session, removed at the end."""

import os
import resource
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FLOWERGRAPH_TEST_DATA", REPO.parent / "shared" / "datasets")).resolve()
REQUIRE_DATA = os.environ.get("FLOWERGRAPH_REQUIRE_DATA", "").strip().lower() in ("1", "true", "yes")
# The datasets the tests read: the offline collection (every Planetoid and TU dataset but PubMed and COLLAB). A
# test that needs data is skipped (or fails) unless all of them are there.
TEST_DATASETS = (
    "Cora",
    "CiteSeer",
    "AIDS",
    "BZR",
    "COX2",
    "DD",
    "DHFR",
    "ENZYMES",
    "IMDB-BINARY",
    "IMDB-MULTI",
    "Letter-high",
    "Letter-low",
    "Letter-med",
    "MUTAG",
    "NCI1",
    "NCI109",
    "PROTEINS",
    "PTC_MR",
)

# One temp folder for the whole session, short (Ray's socket paths under it must stay under 107 bytes): every
# process the tests start inherits it through TMPDIR, and it is removed when the session ends.
_SESSION_TMP = tempfile.mkdtemp(prefix="fgt-")
os.environ["TMPDIR"] = _SESSION_TMP
tempfile.tempdir = _SESSION_TMP

# One dataset cache per test session (inherited by simulation subprocesses through the environment), removed at
# the end of the session unless the caller chose its own.
_OWN_CACHE = None
if "FLOWERGRAPH_CACHE" not in os.environ:
    _OWN_CACHE = os.environ["FLOWERGRAPH_CACHE"] = tempfile.mkdtemp(prefix="flowergraph-test-cache-")
os.environ.pop("FLOWERGRAPH_DATA", None)

# Inline runs launched from one process fork from a warm fork server instead of importing torch, PyG and Flower
# afresh (~3.5 s of CPU each; the suite is CPU-bound on 2 cores): flowergraph.app.inline_entry. Each test worker
# gets its own server, ended with the worker. FLOWERGRAPH_INLINE_FORK=off runs the suite without it.
os.environ.setdefault("FLOWERGRAPH_INLINE_FORK", "on")

# Every flowergraph client trains with one torch thread (client_app.client_fn sets it, process-wide). Tests that
# replay training by hand compare against those clients, so the whole test process uses one thread from the
# start: a replay that ran before the first in-process client would otherwise sum in another order.
import torch  # noqa: E402

torch.set_num_threads(1)


_FAILED = []


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)
    if exitstatus not in (0, 5):  # 5: no tests collected
        _FAILED.append(exitstatus)


def pytest_unconfigure(config):
    if _FAILED:  # the failed tests' folders and logs stay for a look
        print(f"\nkept for inspection (the session failed): {_SESSION_TMP}")
    else:
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)


def missing_test_datasets() -> list[str]:
    """The datasets of :data:`TEST_DATASETS` whose raw files are not in :data:`SHARED_DATA`."""
    from flowergraph.tasks.datasets import data_dir_report

    return [row.name for row in data_dir_report(SHARED_DATA, TEST_DATASETS) if not row.present]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    missing = missing_test_datasets() if SHARED_DATA.is_dir() else list(TEST_DATASETS)
    if missing:
        what = "the raw datasets are" if len(missing) == len(TEST_DATASETS) else f"{', '.join(missing)} are"
        reason = (
            f"NEEDS RAW DATASETS: {what} not at {SHARED_DATA} (set FLOWERGRAPH_TEST_DATA=DIR; list what "
            f"a folder lacks: python -m flowergraph.data check DIR)"
        )
        if REQUIRE_DATA:
            pytest.fail(f"{reason}; FLOWERGRAPH_REQUIRE_DATA=1 makes this a failure", pytrace=False)
        pytest.skip(reason)
    return SHARED_DATA


def _skip_summary(terminalreporter) -> None:
    """One line per skip reason, with the number of tests and the files they are in (pytest -q prints an ``s``)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    counts: Counter = Counter()
    files: dict[str, set] = defaultdict(set)
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[reason] += 1
        files[reason].add(report.nodeid.split("::")[0].removeprefix("tests/"))
    terminalreporter.section(f"{len(skipped)} tests skipped, by reason", sep="=", yellow=True, bold=True)
    for reason, n in counts.most_common():
        where = sorted(files[reason])
        shown = ", ".join(where[:6]) + (f" and {len(where) - 6} more files" if len(where) > 6 else "")
        terminalreporter.write_line(f"SKIPPED {n} test(s): {reason} [{shown}]", yellow=True, bold=True)


# The order tests run in: real deployments, then Ray, then the other federations (the inline engine), then
# everything else (file order within each). pytest-xdist's worksteal hands each worker a contiguous share of this
# list and idle workers steal from the tail of the others' queues, so the list is dealt round-robin into one share
# per worker: every worker starts on a long test and ends on short ones, and the longest (the every-method
# deployment, ~4 min) does not start late and run on alone at the end.
_RANK = {"deployment": 0, "ray": 1, "simulation": 2}


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        return min((r for name, r in _RANK.items() if item.get_closest_marker(name)), default=len(_RANK))

    ordered = sorted(items, key=rank)  # stable: file order within a rank
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers > 1:
        ordered = [item for w in range(workers) for item in ordered[w::workers]]
    items[:] = ordered


def _cpu_s() -> float:
    """CPU seconds of this process and of the children it has waited for (user + system)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_CPU_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Record each test's CPU time (``cpu_s`` in its teardown report's user properties, shown by
    ``--all-durations``): on 2 cores the suite's wall time follows the CPU its tests use, not only their durations.
    Not counted: a process the test started but did not wait for, and a forked inline run (a child of the worker's
    fork server, ``FLOWERGRAPH_INLINE_FORK``)."""
    item.stash[_CPU_STARTED] = _cpu_s()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and _CPU_STARTED in item.stash:
        report.user_properties.append(("cpu_s", _cpu_s() - item.stash[_CPU_STARTED]))
    return report


def pytest_addoption(parser):
    parser.addoption(
        "--all-durations",
        action="store_true",
        help="end the report with every test's duration (setup + call + teardown), slowest first, and "
        "each file's total (scripts/test.sh sets it)",
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """After every other summary (failures, the short test summary), just before pytest's closing
    ``N passed in ...`` line: the skips by reason, then (``--all-durations``) each file's total and every test's
    duration, slowest first. (One hook: a second ``pytest_terminal_summary`` in this module would replace it.)"""
    result = yield
    _skip_summary(terminalreporter)
    if not config.getoption("all_durations", False):
        return result
    per_test: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown") and hasattr(report, "duration"):
                per_test[report.nodeid] += report.duration
                cpu[report.nodeid] += dict(getattr(report, "user_properties", ())).get("cpu_s", 0.0)
    per_file: dict[str, float] = defaultdict(float)
    for nodeid, seconds in per_test.items():
        per_file[nodeid.split("::")[0]] += seconds
    cpu_per_file: dict[str, float] = defaultdict(float)
    for nodeid, seconds in cpu.items():
        cpu_per_file[nodeid.split("::")[0]] += seconds
    total = sum(per_test.values())
    terminalreporter.section(
        f"durations per file ({len(per_file)} files, {total:.1f} s of test time and {sum(cpu.values()):.1f} s "
        "of CPU in all; CPU: the worker and the processes it waited for)",
        sep="=",
    )
    for name, seconds in sorted(per_file.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f"{seconds:9.2f}s {cpu_per_file[name]:9.2f}s CPU  {name}")
    terminalreporter.section(
        f"durations of every test ({len(per_test)} tests, slowest first; setup + call + teardown)", sep="="
    )
    for nodeid, seconds in sorted(per_test.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f"{seconds:9.2f}s {cpu[nodeid]:9.2f}s CPU  {nodeid}")
    return result


@pytest.fixture(scope="session")
def cora(shared_data):
    from flowergraph.tasks.federated_graph import GraphSpec, load_global_graph

    return load_global_graph(GraphSpec(dataset="Cora", data_dir=str(shared_data)))


@pytest.fixture
def launcher_main(monkeypatch):
    """``flowergraph.simulation.main`` to call in the test process (a fresh interpreter costs ~6 s of imports),
    with the test worker's own signal handlers left in place (``run_command`` would install the launcher's)."""
    import flowergraph.app.runtime as runtime
    from flowergraph.simulation import main

    monkeypatch.setattr(runtime, "stop_on_signals", lambda *a, **k: None)
    return main
