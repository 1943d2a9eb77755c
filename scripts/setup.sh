#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment on a fresh machine: CPU torch first, then the rest.
# Idempotent; re-running takes a few seconds. Override the venv location with FLOWERGRAPH_VENV.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${FLOWERGRAPH_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
started=$SECONDS
step() { echo "== [$((SECONDS - started)) s] $*"; }
if [ ! -x "$VENV/bin/python" ]; then
  step "creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# torch first, pinned: an unpinned resolve pulls a multi-GB CUDA build (constraints.txt keeps it pinned below).
step "installing torch==2.13.0 (CPU build; a fresh install downloads ~200 MB: a minute or two)"
"${PIP[@]}" install "torch==2.13.0"
step "installing flowergraph and its dependencies (flwr, PyG, tenseal, ...; a fresh install: about a minute)"
"${PIP[@]}" install -c constraints.txt -e ".[test]"
step "checking the environment"
"$VENV/bin/python" -c "import torch, flwr, torch_geometric, tenseal; print('== environment ready: torch', torch.__version__, '| flwr', flwr.__version__, '| pyg', torch_geometric.__version__)"
