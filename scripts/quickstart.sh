#!/usr/bin/env bash
# The main job: set up, then a federated run (weighted averaging, 3 clients, 40 rounds) on the built-in
# synthetic graph (no download), then plots of accuracy vs round and vs time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
OUT="results/quickstart-$(date +%Y%m%d-%H%M%S)"
"$VENV/bin/python" -m flowergraph.simulation --method fedavg --num-clients 3 --rounds 40 --out "$OUT" "$@"
"$VENV/bin/python" -m flowergraph.plot "$OUT" --out "$OUT"
