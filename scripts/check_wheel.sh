#!/usr/bin/env bash
# Build flowergraph's wheel, install it into a fresh venv (torch==2.13.0 CPU first, then the wheel and its
# dependencies from the package registries; Flower resolves to the newest allowed, 1.42 today), and run, outside
# the checkout, the documented commands that need no checkout: the launcher (--check, and a 2-round inline run),
# writing a Flower app folder, the settings reference, the data check, and the Message-API example app.
# Presets (conf/*.toml) live in the repository, not in the wheel: `--config` takes their path.
#   bash scripts/check_wheel.sh [WORK_DIR]   (default: a new temp folder; DATA: $FLOWERGRAPH_TEST_DATA or ../shared/datasets)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
WORK="${1:-$(mktemp -d -t flowergraph-wheel-XXXXXX)}"
DATA="${FLOWERGRAPH_TEST_DATA:-$REPO/../shared/datasets}"
mkdir -p "$WORK"
[ -e "$WORK/venv" ] && { echo "$WORK/venv exists: give an empty WORK_DIR" >&2; exit 2; }
PY="${PYTHON:-python3}"
.venv/bin/python -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/dist" .
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin"
"$V/python" -m pip install -q --disable-pip-version-check torch==2.13.0
"$V/python" -m pip install -q --disable-pip-version-check -c constraints.txt "$WORK"/dist/flowergraph-*.whl
mkdir -p "$WORK/cwd" && cd "$WORK/cwd"
"$V/python" -c "import flowergraph, flwr; print('== flowergraph', flowergraph.__version__, '| flwr', flwr.__version__, '|', flowergraph.__file__)"
"$V/python" -m flowergraph.simulation --method fedgcn --dataset Cora --data-dir "$DATA" --num-clients 10 --rounds 2 \
    --set node.beta=1 --out results/cora-fedgcn --check
"$V/python" -m flowergraph.simulation --method fedavg --rounds 2 --set simulation-engine=inline --out results/inline
"$V/python" -m flowergraph.app write build/app
"$V/python" -m flowergraph.settings --toml > /dev/null
"$V/python" -m flowergraph.data check "$DATA" > /dev/null || true  # lists what the folder lacks (exit 1 if anything)
"$V/python" -m flowergraph.app.inline --app-dir "$REPO/examples/message_api_app" --num-supernodes 3 2>&1 \
    | grep "accuracy per round"
echo "== wheel check passed in $WORK"
