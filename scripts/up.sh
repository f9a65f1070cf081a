#!/usr/bin/env bash
# Runs a single-node cluster on this host: the control plane with embedded
# (bbolt) storage, a private containerd, and a nodelet; applies the nginx
# sample and fetches its page from every pod IP. Ctrl-C drains the node
# (its pods are stopped and removed) and stops everything; the cluster's
# state stays in $DATA_DIR for the next run.
#
# Everything the node makes lives under $DATA_DIR, /run/nodelet-up, the
# cgroup /nodelet-up and the bridge nodelet-up0, so it never touches a
# containerd or CNI setup that is already on the host. What it needs from
# the host it installs first (scripts/deps.sh up); each phase prints what
# it does and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "up: run as root (containers, cgroups and pod networking need it)" >&2; exit 1; }

# Every setting below can be overridden from the environment (the
# end-to-end test of this script runs it in a network namespace of its own).
DATA_DIR=${DATA_DIR:-$PWD/_output/up}
PORT=${PORT:-6443}
NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
RUN_DIR=${RUN_DIR:-/run/nodelet-up} # the containerd socket path must stay short
CGROUP_ROOT=${CGROUP_ROOT:-/nodelet-up}
BRIDGE=${BRIDGE:-nodelet-up0}
read -ra EXTRA_NODELET_ARGS <<<"${NODELET_ARGS:-}"
export KUBECONFIG=$DATA_DIR/admin.kubeconfig

# Phases: each says what it does when it starts and how long it took.
t_start=${EPOCHREALTIME/./}
t_phase=$t_start
phase() { # NAME WHAT
	t_phase=${EPOCHREALTIME/./}
	printf '==> %s: %s\n' "$1" "$2"
}
done_in() { # the time since the phase (or, given "total", since the start)
	local t0=$t_phase
	[ "${1:-}" = total ] && t0=$t_start
	local us=$((${EPOCHREALTIME/./} - t0))
	printf '%d.%d s' $((us / 1000000)) $((us % 1000000 / 100000))
}
ok() { echo "    ok ($(done_in))"; }

phase deps "the host packages the cluster needs (scripts/deps.sh up, from hosttools/tools.list)"
scripts/deps.sh up
# shellcheck source=hosttools/require.sh
. hosttools/require.sh
require_tools containerd ctr runc kubectl busybox ip setsid pgrep go
ok

phase build "bin/controlplane, bin/nodelet, bin/nodelet-logger"
go build -tags grpcnotrace -o bin/ ./cmd/... # the Makefile's BUILDTAGS
ok

pids=()
started_node=false
cleanup() {
	trap - EXIT INT TERM
	if $started_node; then
		echo "up: draining $NODE_NAME (the cluster's objects stay in $DATA_DIR)"
		kubectl cordon "$NODE_NAME" >/dev/null 2>&1 || true
		kubectl delete pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" --wait=true --timeout=90s >/dev/null || true
	fi
	for ((i = ${#pids[@]} - 1; i >= 1; i--)); do # the nodelet and the control plane
		kill "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null || true
	done
	if [ -S "$RUN_DIR/containerd.sock" ] && [ -n "$(ctr --address "$RUN_DIR/containerd.sock" -n nodelet tasks ls -q 2>/dev/null)" ]; then
		echo "up: pods still run after the drain; containerd (pid ${pids[0]}) and bridge $BRIDGE stay up." >&2
		echo "up: the next 'make up' takes them over; see $DATA_DIR/nodelet.log" >&2
		return
	fi
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[0]}" 2>/dev/null && wait "${pids[0]}" 2>/dev/null || true
	fi
	# The node's container logger ends by itself a few seconds after its
	# last container and the nodelet are gone; wait for it, then make sure.
	logger="nodelet-logger --dir $DATA_DIR/nodelet/logger"
	for _ in $(seq 1 50); do
		pgrep -f "$logger" >/dev/null || break
		sleep 0.2
	done
	pkill -f "$logger" 2>/dev/null || true
	ip link del "$BRIDGE" 2>/dev/null || true
	bin/nodelet cleanup-network || true # the pods' masquerade rule, the cluster DNS address (and routes, had there been peers)
	for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		[ -d "$h$CGROUP_ROOT" ] && find "$h$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	rm -rf "$RUN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$DATA_DIR" "$RUN_DIR"

wait_for() { # what, tries (0.2 s apart), command...
	local what=$1 tries=$2
	shift 2
	for _ in $(seq 1 "$tries"); do
		"$@" >/dev/null 2>&1 && return 0
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null || { echo "up: a process exited while waiting for $what; logs in $DATA_DIR/*.log" >&2; exit 1; }
		done
		sleep 0.2
	done
	echo "up: timed out waiting for $what; logs in $DATA_DIR/*.log" >&2
	exit 1
}

# Images: no registry is needed. The nginx and busybox images are built
# from the host's binaries; the nodelet imports them and builds its pause
# image itself.
phase images "nginx and busybox from this host's binaries, into $DATA_DIR/images"
if [ ! -f "$DATA_DIR/images/nginx.tar" ]; then
	go run ./test/images/mkimages -o "$DATA_DIR/images" >/dev/null
fi
ok

phase containerd "a private containerd on $RUN_DIR/containerd.sock"
cat >"$DATA_DIR/containerd.toml" <<EOF
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
oom_score = 0
[grpc]
  address = "$RUN_DIR/containerd.sock"
[ttrpc]
  address = "$RUN_DIR/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA_DIR/containerd/opt"
EOF
# setsid: a Ctrl-C reaches only this script, which drains the node before
# it stops the processes.
setsid containerd --config "$DATA_DIR/containerd.toml" --root "$DATA_DIR/containerd" --state "$RUN_DIR/containerd-state" \
	--address "$RUN_DIR/containerd.sock" >"$DATA_DIR/containerd.log" 2>&1 &
pids+=($!)

wait_for "containerd" 100 ctr --address "$RUN_DIR/containerd.sock" version
ok

phase "control plane" "https://127.0.0.1:$PORT, state in $DATA_DIR (bbolt)"
setsid bin/controlplane --data-dir "$DATA_DIR" --bind-address 127.0.0.1 --secure-port "$PORT" >"$DATA_DIR/controlplane.log" 2>&1 &
pids+=($!)
wait_for "the control plane" 150 kubectl get --raw /readyz
ok

phase node "nodelet $NODE_NAME as system:node:$NODE_NAME, pods on 10.244.0.0/24 (bridge $BRIDGE)"
# The node's address: the default-route interface's (what the nodelet would
# pick itself), else loopback. The API server reaches the nodelet's HTTPS
# API there, with a serving certificate the control plane's CA signs.
dev=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
NODE_IP=$([ -n "$dev" ] && ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}')
NODE_IP=${NODE_IP:-127.0.0.1}
# The node's own identity, as on a real worker: a client certificate for
# system:node:NAME (group system:nodes), never the admin kubeconfig.
NODE_KUBECONFIG=$DATA_DIR/node-$NODE_NAME.kubeconfig
if [ ! -s "$NODE_KUBECONFIG" ]; then
	bin/controlplane kubeconfig --data-dir "$DATA_DIR" --user "system:node:$NODE_NAME" --group system:nodes >"$NODE_KUBECONFIG.tmp"
	mv "$NODE_KUBECONFIG.tmp" "$NODE_KUBECONFIG"
fi
bin/controlplane serving-cert --data-dir "$DATA_DIR" --node-name "$NODE_NAME" --host "$NODE_IP" \
	--cert-file "$DATA_DIR/nodelet-serving.crt" --key-file "$DATA_DIR/nodelet-serving.key"

setsid bin/nodelet --kubeconfig "$NODE_KUBECONFIG" --node-name "$NODE_NAME" --root-dir "$DATA_DIR/nodelet" \
	--node-ip "$NODE_IP" --tls-cert-file "$DATA_DIR/nodelet-serving.crt" --tls-private-key-file "$DATA_DIR/nodelet-serving.key" \
	--pod-log-dir "$DATA_DIR/pods" --containerd-address "$RUN_DIR/containerd.sock" \
	--cni-conf-dir "$DATA_DIR/cni" --bridge-name "$BRIDGE" --netns-dir "$RUN_DIR/netns" \
	--cgroup-root "$CGROUP_ROOT" --image-dir "$DATA_DIR/images" --cluster-dns 10.96.0.10 "${EXTRA_NODELET_ARGS[@]}" >"$DATA_DIR/nodelet.log" 2>&1 &
pids+=($!)
started_node=true
wait_for "node $NODE_NAME to be Ready" 300 sh -c \
	"kubectl get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
kubectl uncordon "$NODE_NAME" >/dev/null # drained by the last Ctrl-C
ok

phase sample "the nginx Deployment (packaging/samples/nginx-deployment.yaml)"
kubectl apply -f packaging/samples/nginx-deployment.yaml
kubectl rollout status deployment/nginx-deployment --timeout=180s
# A restarted node may still be replacing pods it lost (a reboot): retry
# until every pod's current IP answers.
answered=false
for _ in $(seq 1 60); do
	all=true
	report=""
	for ip in $(kubectl get pods -l app=nginx -o jsonpath='{.items[*].status.podIP}'); do
		title=$(busybox wget -q -O- "http://$ip/" 2>/dev/null | grep -o '<title>[^<]*</title>') || all=false
		report+="http://$ip/ answers: ${title:-nothing}"$'\n'
	done
	if $all && [ -n "$report" ]; then
		answered=true
		break
	fi
	sleep 1
done
kubectl get pods -o wide
printf '%s' "$report"
$answered || { echo "up: nginx does not answer on every pod IP; see $DATA_DIR/nodelet.log" >&2; exit 1; }
ok

phase service "the Service nginx-deployment, through its ClusterIP"
# The sample's Service: the nodelet forwards its ClusterIP on the node
# (from pods and from this host) and its cluster DNS names it.
kubectl get service nginx-deployment >/dev/null 2>&1 || kubectl expose deployment nginx-deployment --port 80 >/dev/null
CLUSTER_IP=$(kubectl get service nginx-deployment -o jsonpath='{.spec.clusterIP}')
wait_for "nginx through its Service ($CLUSTER_IP)" 150 busybox wget -q -O /dev/null "http://$CLUSTER_IP/"
echo "http://$CLUSTER_IP/ (Service nginx-deployment) answers"
ok

cat <<MSG

Ready in $(done_in total). A single-node cluster runs on this host: the control plane on
https://127.0.0.1:$PORT (state in $DATA_DIR) and node $NODE_NAME
(logs in $DATA_DIR/*.log). Point kubectl at it:

    export KUBECONFIG=$KUBECONFIG
    kubectl get nodes,deployments,pods -o wide
    kubectl logs deployment/nginx-deployment
    kubectl exec -it deployment/nginx-deployment -- sh
    kubectl port-forward deployment/nginx-deployment 8080:80
    busybox wget -qO- http://$CLUSTER_IP/          # the Service, from this host
    kubectl run client -it --rm --restart=Never --image=busybox:1.36 -- wget -qO- http://nginx-deployment
                                                    # the Service by name, from a pod
    kubectl top nodes; kubectl top pods

Ctrl-C drains the node and stops everything; the cluster's state stays.
MSG
wait "${pids[@]}"
