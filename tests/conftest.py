"""Shared fixtures. Datasets come from ../shared/datasets (read-only; PyG processes copies in a cache)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FLOWERGRAPH_TEST_DATA", REPO.parent / "shared" / "datasets")).resolve()

# One dataset cache per test session (inherited by simulation subprocesses through the environment), removed at
# the end of the session unless the caller chose its own.
_OWN_CACHE = None
if "FLOWERGRAPH_CACHE" not in os.environ:
    _OWN_CACHE = os.environ["FLOWERGRAPH_CACHE"] = tempfile.mkdtemp(prefix="flowergraph-test-cache-")
os.environ.pop("FLOWERGRAPH_DATA", None)

# Every flowergraph client trains with one torch thread (client_app.client_fn sets it, process-wide). Tests that
# replay training by hand compare against those clients, so the whole test process uses one thread from the
# start: a replay that ran before the first in-process client would otherwise sum in another order.
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "Planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"raw datasets not found at {SHARED_DATA} (set FLOWERGRAPH_TEST_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def cora(shared_data):
    from flowergraph.tasks.federated_graph import GraphSpec, load_global_graph

    return load_global_graph(GraphSpec(dataset="Cora", data_dir=str(shared_data)))
