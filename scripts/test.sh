#!/usr/bin/env bash
# The test suite: set up, then pytest (unit tests, end-to-end Flower simulations and real deployments on
# 127.0.0.1; 13 min on 2 quiet cores when last timed, docs/running.md). Tests that need raw datasets read
# $FLOWERGRAPH_TEST_DATA (default ../shared/datasets) and are skipped without them.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not simulation and not deployment"` (fast tests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
"$VENV/bin/python" -m pytest -q --durations=15 "$@"
