#!/usr/bin/env bash
# A smoke test of a running nodelet cluster, for users and for the VM lab:
#
#   KUBECONFIG=... packaging/smoke.sh [--node-exec CMD] [--image-tag-new TAG]
#                                     [--namespace NS] [--timeout SECONDS]
#
# In namespace NS (default nodelet-smoke, created and deleted) it applies
# packaging/samples/nginx-deployment.yaml, waits for its pods to be Ready,
# fetches the nginx page from every pod IP from every node, scales to 6
# and checks the pods run on at least 2 nodes, rolls the image to
# nginx:TAG (default 1.23) and back with `kubectl rollout undo`, deletes
# the Deployment and checks that nothing of its pods is left on any node:
# no container of NS in containerd (namespace nodelet), no network
# namespace without its sandbox, no pod directory of a pod that is gone.
# The images must be pre-loaded on the nodes (or pullable).
#
# Checks on a node run there through CMD: `CMD NODE 'shell command line'`,
# e.g. --node-exec packaging/lab/ssh.sh, or --node-exec ssh when the node
# names are ssh host names. Without --node-exec they run here, for the
# node that is this host, and are skipped (SKIP lines) for the others.
# The node-side paths are the package's; for other layouts set
# SMOKE_CONTAINERD_ADDRESS (/run/containerd/containerd.sock),
# SMOKE_CONTAINERD_NAMESPACE (nodelet), SMOKE_NETNS_DIR (/run/nodelet/netns)
# and SMOKE_ROOT_DIR (/var/lib/nodelet).
#
# Prints a PASS, FAIL or SKIP line per check; exits 1 if any check failed,
# 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
manifest=$here/samples/nginx-deployment.yaml
deploy=nginx-deployment
node_exec=""
new_tag=1.23
ns=nodelet-smoke
timeout=300
sock=${SMOKE_CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
ctr_ns=${SMOKE_CONTAINERD_NAMESPACE:-nodelet}
netns_dir=${SMOKE_NETNS_DIR:-/run/nodelet/netns}
root_dir=${SMOKE_ROOT_DIR:-/var/lib/nodelet}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
usage_error() {
	echo "smoke: $*; see --help" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	opt=$1 val=""
	case $opt in
	--*=*) val=${opt#*=} opt=${opt%%=*} ;;
	--node-exec | --image-tag-new | --namespace | --timeout)
		[ $# -ge 2 ] || usage_error "$opt needs a value"
		val=$2
		shift
		;;
	esac
	case $opt in
	--node-exec) node_exec=$val ;;
	--image-tag-new) new_tag=$val ;;
	--namespace) ns=$val ;;
	--timeout) timeout=$val ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
[[ $timeout =~ ^[0-9]+$ ]] || usage_error "--timeout takes seconds"
[ -f "$manifest" ] || usage_error "$manifest is missing"
read -r -a exec_cmd <<<"$node_exec"

failed=0
pass() { echo "PASS: $*"; }
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
skip() { echo "SKIP: $*"; }
# fatal: a failed step the next ones depend on.
fatal() {
	fail "$*"
	echo "smoke: stopping here; kubectl get pods -n $ns -o wide:" >&2
	kubectl get pods -n "$ns" -o wide >&2 2>&1
	exit 1
}
k() { kubectl -n "$ns" "$@"; }

cleanup() {
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
}

# ---------------------------------------------------------------------------
# Nodes

# This host's node: its name is the host name or one of its addresses.
local_names=" $(hostname | tr '[:upper:]' '[:lower:]') $(hostname -I 2>/dev/null) "
is_local_node() { # NAME IP
	[[ $local_names == *" $1 "* || ( -n $2 && $local_names == *" $2 "* ) ]]
}

# on_node NODE LINE: runs the shell command line on NODE; status 125 when
# it cannot be run there.
on_node() {
	if [ ${#exec_cmd[@]} -gt 0 ]; then
		"${exec_cmd[@]}" "$1" "$2"
	elif is_local_node "$1" "${node_ip[$1]:-}"; then
		sh -c "$2"
	else
		return 125
	fi
}

declare -A node_ip=()
nodes=()
while read -r name ip ready; do
	[ -n "$name" ] || continue
	node_ip[$name]=$ip
	if [ "$ready" = True ]; then nodes+=("$name"); fi
done < <(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.addresses[?(@.type=="InternalIP")].address} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null)
[ ${#nodes[@]} -gt 0 ] || fatal "no Ready node (is KUBECONFIG set? kubectl get nodes: $(kubectl get nodes 2>&1 | tail -n 3))"
pass "${#nodes[@]} Ready node(s): ${nodes[*]}"
if [ ${#exec_cmd[@]} -eq 0 ]; then
	for n in "${nodes[@]}"; do
		is_local_node "$n" "${node_ip[$n]}" || echo "smoke: node $n is not this host: its checks are skipped (use --node-exec)"
	done
fi

# ---------------------------------------------------------------------------
# Deploy

trap cleanup EXIT
if kubectl get namespace "$ns" >/dev/null 2>&1; then
	# Left by an interrupted run: start from scratch.
	k delete deployment "$deploy" --ignore-not-found --wait=true --timeout="${timeout}s" >/dev/null 2>&1
else
	kubectl create namespace "$ns" >/dev/null || fatal "create namespace $ns"
fi
k apply -f "$manifest" >/dev/null || fatal "kubectl apply -f $manifest"
pass "applied $(basename "$manifest") in namespace $ns"

image_of() { k get deployment "$deploy" -o jsonpath='{.spec.template.spec.containers[0].image}'; }
base_image=$(image_of)

# rolled_out WHAT: waits for the Deployment's rollout, for the old pods
# to be gone (exactly .spec.replicas pods, all with the template's image)
# and for every pod to be Ready.
rolled_out() {
	local image replicas pods deadline=$((SECONDS + timeout))
	if ! k rollout status deployment/"$deploy" --timeout="${timeout}s" >/dev/null; then
		fail "$1: rollout did not finish in ${timeout}s"
		return 1
	fi
	image=$(image_of)
	replicas=$(k get deployment "$deploy" -o jsonpath='{.spec.replicas}')
	while :; do
		pods=$(k get pods -l app=nginx -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}')
		[ "$(grep -c . <<<"$pods")" = "$replicas" ] && [ "$(sort -u <<<"$pods")" = "$image" ] && break
		if [ $SECONDS -ge $deadline ]; then
			fail "$1: want $replicas pod(s) of $image, have: $(sort <<<"$pods" | uniq -c | tr -s ' \n' ' ')"
			return 1
		fi
		sleep 2
	done
	if ! k wait pods -l app=nginx --for=condition=Ready --timeout="${timeout}s" >/dev/null; then
		fail "$1: pods not Ready in ${timeout}s"
		return 1
	fi
	pass "$1: $replicas pod(s) Ready with $image"
}

rolled_out "deployment $deploy" || fatal "the sample does not run"

# ---------------------------------------------------------------------------
# The page from every pod IP from every node

# http_line IP: a shell command line that prints http://IP/ with whatever
# the node has (curl, wget, busybox, else bash's /dev/tcp).
http_line() {
	local u="http://$1/"
	echo "if command -v curl >/dev/null 2>&1; then curl -fsS -m 5 $u; elif command -v wget >/dev/null 2>&1; then wget -q -T 5 -O- $u; elif command -v busybox >/dev/null 2>&1; then busybox wget -q -T 5 -O- $u; else timeout 5 bash -c 'exec 3<>/dev/tcp/$1/80 && printf \"GET / HTTP/1.0\\r\\n\\r\\n\" >&3 && cat <&3'; fi"
}

pods_ips=$(k get pods -l app=nginx -o jsonpath='{range .items[*]}{.status.podIP}{" "}{end}')
for n in "${nodes[@]}"; do
	ok=0 bad=()
	for ip in $pods_ips; do
		got=""
		for _ in 1 2 3 4 5; do # routes to a new node's pods may take a moment
			got=$(on_node "$n" "$(http_line "$ip")" 2>/dev/null)
			rc=$?
			[ $rc -eq 125 ] && break
			[[ $got == *"Welcome to nginx"* ]] && break
			sleep 2
		done
		if [ $rc -eq 125 ]; then break; fi
		if [[ $got == *"Welcome to nginx"* ]]; then ok=$((ok + 1)); else bad+=("$ip"); fi
	done
	if [ $rc -eq 125 ]; then
		skip "page from the pods, from node $n (not this host; no --node-exec)"
	elif [ ${#bad[@]} -eq 0 ]; then
		pass "node $n fetches the nginx page from all $ok pod IP(s)"
	else
		fail "node $n gets no nginx page from ${bad[*]}"
	fi
done

# ---------------------------------------------------------------------------
# Scale, spread, roll, undo

k scale deployment "$deploy" --replicas=6 >/dev/null || fail "kubectl scale --replicas=6"
if rolled_out "scaled to 6"; then
	spread=$(k get pods -l app=nginx -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c .)
	if [ ${#nodes[@]} -lt 2 ]; then
		skip "spread over 2 nodes: the cluster has one Ready node"
	elif [ "$spread" -ge 2 ]; then
		pass "the 6 pods run on $spread nodes"
	else
		fail "the 6 pods run on $spread node(s), want at least 2"
	fi
fi

new_image=${base_image%:*}:$new_tag
k set image deployment/"$deploy" nginx="$new_image" >/dev/null || fail "kubectl set image nginx=$new_image"
rolled_out "set image $new_image"
k rollout undo deployment/"$deploy" >/dev/null || fail "kubectl rollout undo"
if rolled_out "rollout undo"; then
	[ "$(image_of)" = "$base_image" ] || fail "rollout undo: the image is $(image_of), want $base_image"
fi

# ---------------------------------------------------------------------------
# Delete, and nothing left on the nodes

k delete deployment "$deploy" --wait=true --timeout="${timeout}s" >/dev/null || fail "kubectl delete deployment"
deadline=$((SECONDS + timeout))
while [ -n "$(k get pods -l app=nginx -o name 2>/dev/null)" ]; do
	if [ $SECONDS -ge $deadline ]; then
		fail "pods still there ${timeout}s after the Deployment's deletion: $(k get pods -l app=nginx -o name | tr '\n' ' ')"
		break
	fi
	sleep 2
done
[ -n "$(k get pods -l app=nginx -o name 2>/dev/null)" ] || pass "the Deployment and its pods are gone"

# What a node has left, run there (sh): containers of our pods, network
# namespaces that no sandbox names (label io.nodelet.sandbox.netns), pod
# directories (ROOT/pods, ROOT/pod-files); one section each.
leftover_script=$(cat <<'EOF'
ctr() { command ctr --address '@SOCK@' --namespace '@CTRNS@' "$@"; }
echo '#ours'
ctr containers ls -q 'labels."io.nodelet.pod.namespace"=="@NS@"' || exit 1
echo '#strays'
for f in $(ls '@NETNS@' 2>/dev/null); do
	[ -n "$(ctr containers ls -q "labels.\"io.nodelet.sandbox.netns\"==\"@NETNS@/$f\"")" ] || echo "$f"
done
echo '#pods'
for d in '@ROOT@/pods' '@ROOT@/pod-files'; do ls "$d" 2>/dev/null; done
true
EOF
)
leftover_script=${leftover_script//@SOCK@/$sock}
leftover_script=${leftover_script//@CTRNS@/$ctr_ns}
leftover_script=${leftover_script//@NS@/$ns}
leftover_script=${leftover_script//@NETNS@/$netns_dir}
leftover_script=${leftover_script//@ROOT@/$root_dir}
section() { # NAME < output
	awk -v s="#$1" '/^#/ { on = ($0 == s); next } on && NF { print }'
}
live_uids=" $(kubectl get pods -A -o jsonpath='{.items[*].metadata.uid}') "
for n in "${nodes[@]}"; do
	out=""
	for _ in $(seq 1 $((timeout / 5 + 1))); do # the node may still be tearing down
		out=$(on_node "$n" "$leftover_script" 2>&1)
		rc=$?
		[ $rc -eq 0 ] || break
		leaks=()
		ours=$(section ours <<<"$out")
		[ -z "$ours" ] || leaks+=("containers $(echo "$ours" | tr '\n' ' ')")
		for f in $(section strays <<<"$out"); do
			leaks+=("netns $f")
		done
		for d in $(section pods <<<"$out"); do
			[[ $live_uids == *" $d "* ]] || leaks+=("pod dir $d")
		done
		[ ${#leaks[@]} -eq 0 ] && break
		sleep 5
	done
	if [ $rc -eq 125 ]; then
		skip "nothing left on node $n (not this host; no --node-exec)"
	elif [ $rc -ne 0 ]; then
		fail "cannot list containers, netns and pod dirs on node $n: $(echo "$out" | tail -n 2)"
	elif [ ${#leaks[@]} -eq 0 ]; then
		pass "nothing left on node $n (no container of $ns, no stray netns or pod dir)"
	else
		fail "left on node $n: ${leaks[*]}"
	fi
done

if [ $failed -gt 0 ]; then
	echo "smoke: $failed check(s) failed"
	exit 1
fi
echo "smoke: all checks passed"
