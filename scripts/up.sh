#!/usr/bin/env bash
# Runs a single-node cluster on this host with embedded (bbolt) storage and
# applies the nginx sample. Ctrl-C stops it; state stays in $DATA_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA_DIR=${DATA_DIR:-$PWD/_output/up}
PORT=${PORT:-6443}
KUBECONFIG_FILE=$DATA_DIR/admin.kubeconfig
mkdir -p "$DATA_DIR"

bin/controlplane --data-dir "$DATA_DIR" --bind-address 127.0.0.1 --secure-port "$PORT" &
cp_pid=$!
trap 'kill $cp_pid 2>/dev/null; wait $cp_pid 2>/dev/null' EXIT INT TERM

for _ in $(seq 1 100); do
	if [ -f "$KUBECONFIG_FILE" ] && kubectl --kubeconfig "$KUBECONFIG_FILE" get --raw /readyz >/dev/null 2>&1; then
		break
	fi
	kill -0 $cp_pid 2>/dev/null || { echo "up: the control plane exited" >&2; exit 1; }
	sleep 0.1
done

kubectl --kubeconfig "$KUBECONFIG_FILE" apply -f packaging/samples/nginx-deployment.yaml
cat <<MSG

The control plane is running on https://127.0.0.1:$PORT (data in $DATA_DIR).
Point kubectl at it:

    export KUBECONFIG=$KUBECONFIG_FILE
    kubectl get deployments,namespaces

The controllers have turned the nginx Deployment into a ReplicaSet and pods;
they stay Pending until a node joins (the nodelet is the next issue).
Ctrl-C stops the control plane; its state stays in $DATA_DIR.
MSG
wait $cp_pid
