#!/usr/bin/env bash
# The test suite: set up, then pytest (unit tests, end-to-end Flower simulations and real deployments on
# 127.0.0.1) in FLOWERGRAPH_TEST_WORKERS pytest-xdist workers (default 3; 0 runs in this process); CI prints how
# long each test took (docs/running.md, "Tests"). Each worker has its own temp folder and dataset cache.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not simulation and not deployment"` (the fast lane:
# no federation through Flower's simulation engine, no deployment).
# Tests that need the raw datasets (../shared/datasets, or the folder FLOWERGRAPH_TEST_DATA names) are skipped
# without them; the run ends with one line per skip reason and its count. FLOWERGRAPH_REQUIRE_DATA=1 (CI) makes
# missing datasets a failure. `python -m flowergraph.data check DIR` lists what a data folder lacks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORKERS="${FLOWERGRAPH_TEST_WORKERS:-3}"
if ! [[ "$WORKERS" =~ ^[0-9]+$ ]]; then
  echo "FLOWERGRAPH_TEST_WORKERS=$WORKERS: must be a whole number of workers (0: no workers, run in this process)" >&2
  exit 2
fi
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
"$VENV/bin/ruff" format --check --quiet . || { echo "ruff format --check failed: run $VENV/bin/ruff format ." >&2; exit 1; }
"$VENV/bin/ruff" check --quiet . || { echo "ruff check failed (pyproject.toml [tool.ruff]; ruff check --fix . fixes some)" >&2; exit 1; }
# worksteal: an idle worker takes tests queued on the busy one (tests/conftest.py orders them longest-class first).
# --all-durations (tests/conftest.py): the output ends with each file's and every test's duration, slowest first,
# then pytest's closing "N passed in ..." line.
"$VENV/bin/python" -m pytest -q --all-durations -n "$WORKERS" --dist worksteal "$@"
