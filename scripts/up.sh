#!/usr/bin/env bash
# Runs a single-node cluster on this host: the control plane with embedded
# (bbolt) storage, a private containerd, and a nodelet; applies the nginx
# sample and fetches its page from every pod IP. Ctrl-C drains the node
# (its pods are stopped and removed) and stops everything; the cluster's
# state stays in $DATA_DIR for the next run.
#
# Everything the node makes lives under $DATA_DIR, /run/nodelet-up, the
# cgroup /nodelet-up and the bridge nodelet-up0, so it never touches a
# containerd or CNI setup that is already on the host.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "up: run as root (containers, cgroups and pod networking need it)" >&2; exit 1; }
for bin in containerd runc kubectl busybox; do
	command -v $bin >/dev/null || { echo "up: $bin is missing; run scripts/deps.sh" >&2; exit 1; }
done

DATA_DIR=${DATA_DIR:-$PWD/_output/up}
PORT=${PORT:-6443}
NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
RUN_DIR=/run/nodelet-up # the containerd socket path must stay short
CGROUP_ROOT=/nodelet-up
BRIDGE=nodelet-up0
export KUBECONFIG=$DATA_DIR/admin.kubeconfig
mkdir -p "$DATA_DIR" "$RUN_DIR"

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
	ip link del "$BRIDGE" 2>/dev/null || true
	bin/nodelet cleanup-network || true # the pods' masquerade rule, the cluster DNS address (and routes, had there been peers)
	for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		[ -d "$h$CGROUP_ROOT" ] && find "$h$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	rm -rf "$RUN_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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
if [ ! -f "$DATA_DIR/images/nginx.tar" ]; then
	go run ./test/images/mkimages -o "$DATA_DIR/images" >/dev/null
fi

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

setsid bin/controlplane --data-dir "$DATA_DIR" --bind-address 127.0.0.1 --secure-port "$PORT" >"$DATA_DIR/controlplane.log" 2>&1 &
pids+=($!)
wait_for "the control plane" 150 kubectl get --raw /readyz
wait_for "containerd" 100 ctr --address "$RUN_DIR/containerd.sock" version

# The node's address: the default-route interface's (what the nodelet would
# pick itself), else loopback. The API server reaches the nodelet's HTTPS
# API there, with a serving certificate the control plane's CA signs.
dev=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
NODE_IP=$([ -n "$dev" ] && ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}')
NODE_IP=${NODE_IP:-127.0.0.1}
bin/controlplane serving-cert --data-dir "$DATA_DIR" --node-name "$NODE_NAME" --host "$NODE_IP" \
	--cert-file "$DATA_DIR/nodelet-serving.crt" --key-file "$DATA_DIR/nodelet-serving.key"

setsid bin/nodelet --kubeconfig "$KUBECONFIG" --node-name "$NODE_NAME" --root-dir "$DATA_DIR/nodelet" \
	--node-ip "$NODE_IP" --tls-cert-file "$DATA_DIR/nodelet-serving.crt" --tls-private-key-file "$DATA_DIR/nodelet-serving.key" \
	--pod-log-dir "$DATA_DIR/pods" --containerd-address "$RUN_DIR/containerd.sock" \
	--cni-conf-dir "$DATA_DIR/cni" --bridge-name "$BRIDGE" --netns-dir "$RUN_DIR/netns" \
	--cgroup-root "$CGROUP_ROOT" --image-dir "$DATA_DIR/images" --cluster-dns 10.96.0.10 >"$DATA_DIR/nodelet.log" 2>&1 &
pids+=($!)
started_node=true
wait_for "node $NODE_NAME to be Ready" 300 sh -c \
	"kubectl get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
kubectl uncordon "$NODE_NAME" >/dev/null # drained by the last Ctrl-C

kubectl apply -f packaging/samples/nginx-deployment.yaml
kubectl rollout status deployment/nginx-deployment --timeout=180s
# A restarted node may still be replacing pods it lost (a reboot): retry
# until every pod's current IP answers.
answered=false
for _ in $(seq 1 60); do
	ok=true
	report=""
	for ip in $(kubectl get pods -l app=nginx -o jsonpath='{.items[*].status.podIP}'); do
		title=$(busybox wget -q -O- "http://$ip/" 2>/dev/null | grep -o '<title>[^<]*</title>') || ok=false
		report+="http://$ip/ answers: ${title:-nothing}"$'\n'
	done
	if $ok && [ -n "$report" ]; then
		answered=true
		break
	fi
	sleep 1
done
kubectl get pods -o wide
printf '%s' "$report"
$answered || { echo "up: nginx does not answer on every pod IP; see $DATA_DIR/nodelet.log" >&2; exit 1; }

# The sample's Service: the nodelet forwards its ClusterIP on the node
# (from pods and from this host) and its cluster DNS names it.
kubectl get service nginx-deployment >/dev/null 2>&1 || kubectl expose deployment nginx-deployment --port 80 >/dev/null
CLUSTER_IP=$(kubectl get service nginx-deployment -o jsonpath='{.spec.clusterIP}')
wait_for "nginx through its Service ($CLUSTER_IP)" 150 busybox wget -q -O /dev/null "http://$CLUSTER_IP/"
echo "http://$CLUSTER_IP/ (Service nginx-deployment) answers"

cat <<MSG

A single-node cluster runs on this host: the control plane on
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
