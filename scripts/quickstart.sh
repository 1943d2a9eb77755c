#!/usr/bin/env bash
# The main job: set up, then two federated runs on the built-in synthetic graph (no download), 3 clients,
# 40 rounds each, in Flower's Ray simulation: weighted averaging (cross-client edges dropped) and FedGCN 2-hop
# (one exchange of neighbour aggregations, then the same training), and their accuracy-vs-round and
# accuracy-vs-time curves on one plot. Extra arguments go to both runs (e.g. --set node.partitioner=metis).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
VENV="${FLOWERGRAPH_VENV:-.venv}"
OUT="results/quickstart-$(date +%Y%m%d-%H%M%S)"
"$VENV/bin/python" -m flowergraph.simulation --method fedavg --num-clients 3 --rounds 40 --out "$OUT/fedavg" "$@"
"$VENV/bin/python" -m flowergraph.simulation --method fedgcn --num-clients 3 --rounds 40 --out "$OUT/fedgcn" "$@"
"$VENV/bin/python" -m flowergraph.plot "$OUT/fedavg" "$OUT/fedgcn" --labels "fedavg" "fedgcn 2-hop" --out "$OUT"
