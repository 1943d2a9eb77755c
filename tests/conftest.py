"""Shared fixtures. Datasets come from ../shared/datasets (read-only; PyG processes copies in a cache)."""

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FLOWERGRAPH_TEST_DATA", REPO.parent / "shared" / "datasets")).resolve()

# One dataset cache per test session (inherited by simulation subprocesses through the environment).
os.environ.setdefault("FLOWERGRAPH_CACHE", tempfile.mkdtemp(prefix="flowergraph-test-cache-"))
os.environ.pop("FLOWERGRAPH_DATA", None)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "Planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"raw datasets not found at {SHARED_DATA} (set FLOWERGRAPH_TEST_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def cora(shared_data):
    from flowergraph.tasks.federated_graph import GraphSpec, load_global_graph

    return load_global_graph(GraphSpec(dataset="Cora", data_dir=str(shared_data)))
