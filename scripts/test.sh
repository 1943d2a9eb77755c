#!/usr/bin/env bash
# The test suite: set up, then pytest (unit tests, end-to-end Flower simulations and real deployments on
# 127.0.0.1; about 30 min on 2 cores: CI took 31.5 min for the landing of 2026-11-25, docs/running.md).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not simulation and not deployment"` (fast tests).
# Tests that need the raw datasets (../shared/datasets, or the folder FLOWERGRAPH_TEST_DATA names) are skipped
# without them; the run ends with one line per skip reason and its count. FLOWERGRAPH_REQUIRE_DATA=1 (CI) makes
# missing datasets a failure. `python -m flowergraph.data check DIR` lists what a data folder lacks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
"$VENV/bin/python" -m pytest -q --durations=15 "$@"
