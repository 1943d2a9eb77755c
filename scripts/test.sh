#!/usr/bin/env bash
# The test suite: set up, then pytest (unit tests + end-to-end Flower simulations, a few minutes on 2 cores).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not simulation"` for the fast tests only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
"$VENV/bin/python" -m pytest -q --durations=15 "$@"
