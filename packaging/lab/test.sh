#!/usr/bin/env bash
# The VM lab's test (make vm-lab-test): boots and provisions the lab
# (up.sh), checks the packaged product on real systemd + cgroup v2 guests,
# and always removes the lab at the end. Exits non-zero on the first
# failing check, printing it with the guests' consoles and journals.
#
#   1  the services are active under systemd; node1 and node2 are Ready
#   2  cgroup v2 with the systemd driver: a Burstable pod's slice and limits
#   3  packaging/smoke.sh passes (nginx spread over both nodes)
#   4  systemctl restart nodelet restarts no container
#   5  a .deb upgrade (a bumped version) restarts no container
#   6  a node whose nodelet and containerd stop goes NotReady, its pods run
#      on the other node, and it comes back Ready
#   7  make vm-lab-down leaves nothing behind
#
# Usage: packaging/lab/test.sh [--deb FILE]   (default: the newest
# _output/deb/nodelet_*_amd64.deb, as up.sh). Needs bin/nodelet-lab (make
# build). Timings are printed at the end and kept in
# $VM_LAB_STATE/test-timings.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"
need_root

deb=""
while [ $# -gt 0 ]; do
	case $1 in
	--deb) deb=$2 && shift 2 ;;
	--deb=*) deb=${1#*=} && shift ;;
	*) die "unknown argument $1" ;;
	esac
done
if [ -z "$deb" ]; then
	# shellcheck disable=SC2012 # names without blanks; newest first
	deb=$(ls -t "$REPO_DIR"/_output/deb/nodelet_*_amd64.deb 2>/dev/null | head -n1) || true
	[ -n "$deb" ] || die "no _output/deb/nodelet_*_amd64.deb; run make deb"
fi
if [ -e "/run/netns/$VM_LAB_NETNS" ] || [ -f "$VM_LAB_STATE/env" ]; then
	# A lab with nothing running in it is what a killed run leaves behind
	# (SIGKILL skips the trap): clear it. A live lab is someone's, so refuse.
	mapfile -t live < <(lab_pids)
	if [ ${#live[@]} -gt 0 ]; then
		die "a VM lab is up already (pids ${live[*]}); make vm-lab-down first (the test makes its own)"
	fi
	log "clearing what a killed VM lab left behind (no process of it runs)"
	"$LAB_DIR/down.sh"
fi

SSH=$LAB_DIR/ssh.sh
export KUBECONFIG=$VM_LAB_STATE/kubeconfig
TEST_NS=vmlab-test
upgrade_dir=$REPO_DIR/_output/vm-lab-upgrade
timings=()
current="setup"
started=false
dumped=false

# The control plane notices a dead node within 20 s and evicts its pods 10 s
# later (check 6); the defaults would take minutes.
CP_ARGS=(--controlplane-arg=--node-monitor-grace-period=20s
	--controlplane-arg=--default-unreachable-toleration-seconds=10
	--controlplane-arg=--default-not-ready-toleration-seconds=10)

g() { "$SSH" "$@" </dev/null; } # a command in a guest (never reads our stdin)

dump() {
	$dumped && return 0
	dumped=true
	echo "======== logs for the failing check [$current] ========" >&2
	for vm in "${VMS[@]}"; do
		echo "---- $vm: serial console (tail) ----" >&2
		tail -n 25 "$VM_LAB_STATE/logs/$vm.console" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/\r//g' >&2 || true
		echo >&2
	done
	if [ -f "$VM_LAB_STATE/env" ]; then
		echo "---- cp: journalctl -u nodelet-controlplane -n 50 ----" >&2
		timeout 60 "$SSH" cp journalctl -u nodelet-controlplane -n 50 --no-pager </dev/null >&2 2>&1 || true
		for n in "${NODES[@]}"; do
			echo "---- $n: journalctl -u nodelet -n 50 ----" >&2
			timeout 60 "$SSH" "$n" journalctl -u nodelet -n 50 --no-pager </dev/null >&2 2>&1 || true
		done
		if [ -f "$KUBECONFIG" ]; then
			echo "---- kubectl get nodes,pods -A -o wide ----" >&2
			timeout 30 kubectl get nodes,pods -A -o wide >&2 2>&1 || true
		fi
	fi
	echo "======== end of logs ========" >&2
}

fail() {
	log "FAIL [$current]: $*"
	dump
	exit 1
}

check() {
	current=$1
	log "---- check $1"
}

finish() {
	local rc=$?
	trap - EXIT
	set +e
	if [ $rc != 0 ]; then
		log "FAIL [$current] (exit $rc)"
		dump
	fi
	if $started; then
		cp "$VM_LAB_STATE/timings" "$VM_LAB_STATE/test-timings" 2>/dev/null
		current="7 vm-lab-down leaves nothing"
		log "---- check $current"
		if ! "$LAB_DIR/down.sh"; then
			log "FAIL [$current]"
			rc=1
		fi
		left=$(leftovers)
		if [ -n "$left" ]; then
			printf '%s\n' "$left" >&2
			log "FAIL [$current]: the above is left after down.sh"
			rc=1
		elif [ -n "$(pgrep -f 'qemu-system.*vmlab-' || true)" ]; then
			pgrep -af 'qemu-system.*vmlab-' >&2
			log "FAIL [$current]: QEMU processes are left"
			rc=1
		fi
	fi
	rm -rf "$upgrade_dir"
	if [ ${#timings[@]} -gt 0 ]; then
		echo "==== VM lab timings ====" | tee -a "$VM_LAB_STATE/test-timings"
		printf '%s\n' "${timings[@]}" | tee -a "$VM_LAB_STATE/test-timings"
	fi
	if [ $rc = 0 ]; then
		log "PASS: all VM lab checks"
	else
		log "FAIL: the VM lab test failed (see above)"
	fi
	exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM

# until SECONDS CMD...: retries CMD every 3 s until it succeeds or time runs out.
until_ok() {
	local t=$1 deadline
	shift
	deadline=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 3
	done
}

node_ready() { # node -> True, False, Unknown
	kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null
}
is_ready() { [ "$(node_ready "$1")" = True ]; }
not_ready() { local s; s=$(node_ready "$1") && [ -n "$s" ] && [ "$s" != True ]; }

# A node's pods in the test namespace: NAME UID NODE PHASE CONTAINER-IDS RESTARTS, one a line.
pods_on() { # node
	kubectl get pods -n "$TEST_NS" --field-selector "spec.nodeName=$1" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.spec.nodeName} {.status.phase} {.status.containerStatuses[*].containerID} {.status.containerStatuses[*].restartCount}{"\n"}{end}'
}
# The containers the node's containerd runs, with their PIDs.
tasks_on() { # node
	g "$1" 'ctr -n nodelet tasks ls 2>/dev/null | sort'
}
snapshot() { # node file: what must not change across a nodelet restart or upgrade
	{
		pods_on "$1"
		echo "-- containerd tasks"
		tasks_on "$1"
	} >"$2"
}
same_containers() { # node before-file after-file what
	if ! diff -u "$2" "$3" >&2; then
		fail "$4 restarted or recreated containers on $1 (diff of pods and containerd tasks above)"
	fi
}
main_pid() { # vm unit
	g "$1" systemctl show -p MainPID --value "$2"
}
wait_pods_running() { # node count
	local t=300 deadline
	deadline=$((SECONDS + t))
	until [ "$(kubectl get pods -n "$TEST_NS" --field-selector "spec.nodeName=$1,status.phase=Running" -o name 2>/dev/null | wc -l)" -ge "$2" ] &&
		[ -z "$(kubectl get pods -n "$TEST_NS" --field-selector "spec.nodeName=$1" -o jsonpath='{range .items[*]}{.status.containerStatuses[*].ready}{"\n"}{end}' 2>/dev/null | grep -v '^true\( true\)*$')" ]; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 3
	done
}

# The bumped package for check 5, built now while no guest takes the CPU.
base_version=$(basename "$deb")
base_version=${base_version#nodelet_}
base_version=${base_version%_amd64.deb}
new_version=$base_version+vmlabupgrade1
log "building the upgrade package $new_version (make deb VERSION=$new_version)"
rm -rf "$upgrade_dir"
mkdir -p "$upgrade_dir"
OUT=$upgrade_dir make -s -C "$REPO_DIR" deb VERSION="$new_version" >"$upgrade_dir/build.log" 2>&1 ||
	{
		cat "$upgrade_dir/build.log" >&2
		die "make deb VERSION=$new_version failed"
	}
new_deb=$(ls "$upgrade_dir"/nodelet_"$new_version"_amd64.deb 2>/dev/null || ls "$REPO_DIR"/_output/deb/nodelet_"$new_version"_amd64.deb)
if [ "$(dirname "$new_deb")" != "$upgrade_dir" ]; then
	mv "$new_deb" "$upgrade_dir/"
	new_deb=$upgrade_dir/$(basename "$new_deb")
fi

current="vm-lab-up"
t0=$(now)
started=true
"$LAB_DIR/up.sh" --deb "$deb" "${CP_ARGS[@]}" || fail "up.sh failed"
t_up=$(elapsed "$t0")
while read -r vm what secs; do
	case $what in
	ssh) timings+=("$vm: VM start to ssh: ${secs} s") ;;
	ready) timings+=("$vm: VM start to Node Ready: ${secs} s") ;;
	esac
done <"$VM_LAB_STATE/timings"
timings+=("up.sh (cached image, boot + provision, both nodes Ready): ${t_up} s")

check "1 services active under systemd, nodes Ready"
[ "$(g cp systemctl is-active nodelet-controlplane)" = active ] || fail "nodelet-controlplane is not active on cp"
for n in "${NODES[@]}"; do
	for unit in containerd nodelet; do
		[ "$(g "$n" systemctl is-active "$unit")" = active ] || fail "$unit is not active on $n"
	done
done
g cp systemctl is-active nodelet >/dev/null && fail "cp runs a nodelet (it should only run the control plane)"
until_ok 120 sh -c "[ \"\$(kubectl get nodes -o name | sort | tr '\n' ' ')\" = 'node/node1 node/node2 ' ]" ||
	fail "the nodes are not exactly node1 and node2: $(kubectl get nodes -o name | tr '\n' ' ')"
for n in "${NODES[@]}"; do
	until_ok 120 is_ready "$n" || fail "node $n is not Ready"
done
kubectl get nodes -o wide

check "3 packaging/smoke.sh (nginx on both nodes)"
t3=$(now)
"$REPO_DIR/packaging/smoke.sh" --node-exec "$SSH" || fail "packaging/smoke.sh failed"
timings+=("smoke.sh: $(elapsed "$t3") s")
timings+=("up.sh start to smoke test passed (cached image): $(elapsed "$t0") s")

check "2 cgroup v2 with the systemd driver (Burstable pod on node1)"
kubectl create namespace "$TEST_NS" >/dev/null
kubectl apply -n "$TEST_NS" -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: burstable
spec:
  nodeName: node1
  terminationGracePeriodSeconds: 2
  containers:
  - name: sleep
    image: docker.io/library/busybox:1.36
    command: ["sleep", "100000"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 500m, memory: 128Mi}
EOF
until_ok 300 kubectl wait -n "$TEST_NS" --for=condition=Ready pod/burstable --timeout=5s || fail "pod burstable is not Ready on node1"
qos=$(kubectl get pod -n "$TEST_NS" burstable -o jsonpath='{.status.qosClass}')
[ "$qos" = Burstable ] || fail "pod burstable has QoS class '$qos', not Burstable"
uid=$(kubectl get pod -n "$TEST_NS" burstable -o jsonpath='{.metadata.uid}')
slice=/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${uid//-/_}.slice
[ "$(g node1 stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || fail "node1's /sys/fs/cgroup is not cgroup v2"
g node1 test -d "$slice" || fail "no pod slice $slice on node1 (the systemd driver's name); kubepods: $(g node1 find /sys/fs/cgroup/kubepods.slice -maxdepth 2 -type d | tr '\n' ' ')"
declare -A want=([memory.max]=134217728 [cpu.weight]=4 [cpu.max]="50000 100000")
for f in memory.max cpu.weight cpu.max; do
	got=$(g node1 cat "$slice/$f")
	[ "$got" = "${want[$f]}" ] || fail "$slice/$f is '$got', want '${want[$f]}'"
	echo "node1: $f of the pod's slice: $got"
done
# The container's own cgroup sits inside the pod's slice, and systemd knows it.
g node1 "systemctl show -p ActiveState --value $(basename "$slice")" | grep -qx active ||
	fail "systemd does not show $(basename "$slice") as an active slice"

# Pods for checks 4-6: a Deployment spread over both nodes.
kubectl apply -n "$TEST_NS" -f - <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 4
  selector:
    matchLabels: {app: vmlab-web}
  template:
    metadata:
      labels: {app: vmlab-web}
    spec:
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {app: vmlab-web}
      containers:
      - name: nginx
        image: docker.io/library/nginx:1.22
        resources:
          requests: {cpu: 10m, memory: 16Mi}
EOF
until_ok 300 kubectl rollout status -n "$TEST_NS" deployment/web --timeout=5s || fail "deployment web did not roll out"
wait_pods_running node1 1 || fail "no Ready pod of the test on node1"
kubectl get pods -n "$TEST_NS" -o wide

check "4 systemctl restart nodelet on node1 restarts no container"
snapshot node1 "$VM_LAB_STATE/before-restart"
pods=$(pods_on node1 | wc -l)
[ "$pods" -gt 0 ] || fail "no pods on node1 to compare"
pid_before=$(main_pid node1 nodelet)
g node1 systemctl restart nodelet || fail "systemctl restart nodelet failed on node1"
[ "$(g node1 systemctl is-active nodelet)" = active ] || fail "nodelet is not active on node1 after the restart"
pid_after=$(main_pid node1 nodelet)
[ "$pid_after" != "$pid_before" ] || fail "the nodelet's MainPID is still $pid_before: it did not restart"
until_ok 120 is_ready node1 || fail "node1 not Ready after the nodelet restart"
sleep 20 # room for a wrongly restarted container to show up
wait_pods_running node1 "$pods" || true
snapshot node1 "$VM_LAB_STATE/after-restart"
same_containers node1 "$VM_LAB_STATE/before-restart" "$VM_LAB_STATE/after-restart" "systemctl restart nodelet"
echo "node1: nodelet pid $pid_before -> $pid_after; the same $pods pods, container IDs, restart counts and containerd task PIDs"

check "5 a .deb upgrade to $new_version (cp and node1) restarts no container"
mkdir -p "$VM_LAB_STATE/share/upgrade"
cp "$new_deb" "$VM_LAB_STATE/share/upgrade/"
snapshot node1 "$VM_LAB_STATE/before-upgrade"
pods=$(pods_on node1 | wc -l)
pid_before=$(main_pid node1 nodelet)
cp_pid_before=$(main_pid cp nodelet-controlplane)
for vm in cp node1; do
	g "$vm" env DEBIAN_FRONTEND=noninteractive dpkg -i "/mnt/share/upgrade/$(basename "$new_deb")" >"$VM_LAB_STATE/logs/upgrade-$vm.log" 2>&1 ||
		{
			cat "$VM_LAB_STATE/logs/upgrade-$vm.log" >&2
			fail "dpkg -i $(basename "$new_deb") failed on $vm"
		}
	got=$(g "$vm" dpkg-query -W -f '${Version}' nodelet)
	[ "$got" = "$new_version" ] || fail "$vm has nodelet $got after the upgrade, not $new_version"
done
until_ok 120 sh -c "[ \"\$('$SSH' cp systemctl is-active nodelet-controlplane </dev/null)\" = active ]" || fail "nodelet-controlplane not active on cp after the upgrade"
until_ok 120 sh -c "[ \"\$('$SSH' node1 systemctl is-active nodelet </dev/null)\" = active ]" || fail "nodelet not active on node1 after the upgrade"
until_ok 120 kubectl get --raw /readyz || fail "the API server is not ready after the upgrade"
until_ok 120 is_ready node1 || fail "node1 not Ready after the upgrade"
# The package restarts running services on upgrade (try-restart).
[ "$(main_pid node1 nodelet)" != "$pid_before" ] || fail "the upgrade did not restart the nodelet on node1 (MainPID $pid_before)"
[ "$(main_pid cp nodelet-controlplane)" != "$cp_pid_before" ] || fail "the upgrade did not restart nodelet-controlplane on cp"
sleep 20
wait_pods_running node1 "$pods" || true
snapshot node1 "$VM_LAB_STATE/after-upgrade"
same_containers node1 "$VM_LAB_STATE/before-upgrade" "$VM_LAB_STATE/after-upgrade" "the upgrade"
echo "cp and node1 run nodelet $new_version (services restarted); node1's $pods pods kept their containers"

check "6 node2 stops (nodelet, containerd): NotReady, its pods move to node1, it comes back"
on_node2=$(kubectl get pods -n "$TEST_NS" -l app=vmlab-web --field-selector spec.nodeName=node2 -o name | wc -l)
[ "$on_node2" -gt 0 ] || fail "no pod of deployment web on node2 to move"
replicas=$(kubectl get deployment -n "$TEST_NS" web -o jsonpath='{.spec.replicas}')
t6=$(now)
g node2 systemctl stop nodelet containerd || fail "systemctl stop nodelet containerd failed on node2"
until_ok 180 not_ready node2 || fail "node2 still Ready 180 s after its nodelet stopped"
timings+=("node2 stopped -> NotReady: $(elapsed "$t6") s")
on_node1_running() {
	[ "$(kubectl get pods -n "$TEST_NS" -l app=vmlab-web --field-selector spec.nodeName=node1,status.phase=Running -o name | wc -l)" -ge "$replicas" ]
}
until_ok 300 on_node1_running || fail "deployment web does not run all $replicas pods on node1 300 s after node2 went away"
timings+=("node2 stopped -> all $replicas pods Running on node1: $(elapsed "$t6") s")
kubectl get pods -n "$TEST_NS" -o wide
g node2 systemctl start containerd nodelet || fail "systemctl start containerd nodelet failed on node2"
until_ok 300 is_ready node2 || fail "node2 not Ready 300 s after its nodelet started again"
timings+=("node2 restarted -> Ready: $(elapsed "$t6") s after it stopped")
# Its old pods were deleted meanwhile: the nodelet removes them, and the
# API server forgets them.
gone() { [ -z "$(kubectl get pods -n "$TEST_NS" --field-selector spec.nodeName=node2 -o name)" ]; }
until_ok 300 gone || fail "node2's deleted pods are still there: $(kubectl get pods -n "$TEST_NS" --field-selector spec.nodeName=node2 -o name | tr '\n' ' ')"
for unit in containerd nodelet; do
	[ "$(g node2 systemctl is-active "$unit")" = active ] || fail "$unit is not active on node2 after the start"
done
kubectl get nodes -o wide

current="done"
log "checks 1-6 passed; check 7 is make vm-lab-down"
