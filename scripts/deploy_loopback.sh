#!/usr/bin/env bash
# The whole real-deployment flow on one machine, step by step, with TLS and SuperNode authentication:
# certificates, a SuperLink, one SuperNode per data owner (3 by default), one run, its status, clean-up.
# Every step is a `python -m flowergraph.deployment` subcommand; docs/deployment.md says which party runs
# which step when the parties are on different machines.
#
#   bash scripts/deploy_loopback.sh                                       # fedavg, synthetic graph, 3 nodes, 2 rounds
#   NODES=4 ROUNDS=5 bash scripts/deploy_loopback.sh --set node.partitioner=louvain
#   DATA_DIR=../shared/datasets bash scripts/deploy_loopback.sh --dataset Cora   # data-dir via node config
#
# Extra arguments go to the `run` step (--dataset, --set KEY=VALUE, --timeout, --verbose).
# Results and every log end up in $OUT (default results/deploy-loopback-<time>). Exit status: that of the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${FLOWERGRAPH_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || bash scripts/setup.sh
PY="$VENV/bin/python"
DEPLOY=("$PY" -m flowergraph.deployment)
NODES="${NODES:-3}"
ROUNDS="${ROUNDS:-2}"
METHOD="${METHOD:-fedavg}"
OUT="${OUT:-results/deploy-loopback-$(date +%Y%m%d-%H%M%S)}"
WORK="$(mktemp -d -t flowergraph-loopback-XXXXXX)"   # keys, certificates, Flower state: deleted at the end
mkdir -p "$OUT"
export FLWR_TELEMETRY_ENABLED=0

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PIDS=()   # every process this script starts in the background: stopped (with its children) on exit
RUN_PID=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$RUN_PID" ] && PIDS=("$RUN_PID" "${PIDS[@]}")
    if [ "${#PIDS[@]}" -gt 0 ]; then
        echo "== cleanup: stopping ${PIDS[*]} and their children"
        "${DEPLOY[@]}" stop "${PIDS[@]}" || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SL_PORT="$(free_port)"
SUPERLINK="127.0.0.1:$SL_PORT"
CA="$WORK/operator/certs/ca.crt"

echo "== 1. operator: a CA and the SuperLink's certificate (subjectAltName IP:127.0.0.1, DNS:localhost)"
"${DEPLOY[@]}" certs --out "$WORK/operator/certs" --host 127.0.0.1 --host localhost

echo "== 2. each data owner: a SuperNode key pair (ECDSA P-384); the .pub goes to the operator"
for ((k = 0; k < NODES; k++)); do
    "${DEPLOY[@]}" keys --out "$WORK/owner$k" --name "node$k"
done

echo "== 3. operator: the SuperLink on $SUPERLINK (TLS, --enable-supernode-auth); log $OUT/superlink.log"
FLWR_HOME="$WORK/operator/superlink-home" "${DEPLOY[@]}" superlink --certs "$WORK/operator/certs" \
    --host 127.0.0.1 --port "$SL_PORT" --database "$WORK/operator/superlink.db" >"$OUT/superlink.log" 2>&1 &
PIDS+=("$!")
"${DEPLOY[@]}" wait --address "$SUPERLINK" --ca "$CA" --timeout 120

echo "== 4. operator: a flwr connection (TLS) and the owners' public keys registered"
export FLWR_HOME="$WORK/operator/flwr-home"   # the operator's flwr CLI state
"${DEPLOY[@]}" connection --name loopback --address "$SUPERLINK" --ca "$CA"
for ((k = 0; k < NODES; k++)); do
    "${DEPLOY[@]}" register --connection loopback "$WORK/owner$k/node$k.pub"
done

echo "== 5. each data owner: a SuperNode for its partition (node config: partition-id, num-partitions${DATA_DIR:+, data-dir})"
for ((k = 0; k < NODES; k++)); do
    FLWR_HOME="$WORK/owner$k/flwr-home" "${DEPLOY[@]}" supernode --superlink "$SUPERLINK" --ca "$CA" \
        --key "$WORK/owner$k/node$k" --partition-id "$k" --num-partitions "$NODES" --port "$(free_port)" \
        ${DATA_DIR:+--data-dir "$DATA_DIR"} >"$OUT/supernode-$k.log" 2>&1 &
    PIDS+=("$!")
done
"${DEPLOY[@]}" wait --address "$SUPERLINK" --ca "$CA" --connection loopback --nodes "$NODES" --timeout 180

echo "== 6. operator: one run ($METHOD, $NODES clients, $ROUNDS rounds); flwr ls gives its real status"
# in the background + wait, so Ctrl-C or SIGTERM reaches the trap at once (bash defers traps while a
# foreground command runs); the run step itself stops its `flwr run` when it gets SIGTERM
"${DEPLOY[@]}" run --connection loopback --method "$METHOD" --num-clients "$NODES" --rounds "$ROUNDS" \
    --out "$OUT" "$@" &
RUN_PID=$!
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=""

echo "== 7. status (flwr ls, flwr supernode list)"
"${DEPLOY[@]}" status --connection loopback || true
echo "results and logs: $OUT"
exit "$rc"
