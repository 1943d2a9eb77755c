#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment on a fresh machine: CPU torch first, then the rest.
# Idempotent; re-running takes a few seconds. Override the venv location with FLOWERGRAPH_VENV.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${FLOWERGRAPH_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# torch first, pinned: an unpinned resolve pulls a multi-GB CUDA build (constraints.txt keeps it pinned below).
"${PIP[@]}" install "torch==2.13.0"
"${PIP[@]}" install -c constraints.txt -e ".[test]"
"$VENV/bin/python" -c "import torch, flwr, torch_geometric, tenseal; print('== environment ready: torch', torch.__version__, '| flwr', flwr.__version__, '| pyg', torch_geometric.__version__)"
