# shellcheck shell=bash disable=SC2034
# Shared by the VM lab's scripts (sourced, not run). The lab: Debian 12
# guests under QEMU (TCG: KVM does not work on the build machines), one
# control plane (cp) and two nodes, on a network that exists only inside a
# network namespace the lab creates (a bridge and one tap per guest).
#
# Paths: the base image is built once into $VM_LAB_CACHE/<hash of the build
# inputs>/ (outside the clone); everything of one run (overlays, serial
# logs, the 9p share, pid files, the host's kubeconfig) lives in
# $VM_LAB_STATE. One lab per machine: the namespace and tap names are fixed.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$LAB_DIR/../.." && pwd)

VM_LAB_CACHE=${VM_LAB_CACHE:-/var/cache/nodelet-vm-lab}
VM_LAB_STATE=${VM_LAB_STATE:-$REPO_DIR/_output/vm-lab}
VM_LAB_NETNS=nodelet-vmlab
VM_LAB_BRIDGE=vmlab0
VM_LAB_PORT=${VM_LAB_PORT:-16443} # the API server, forwarded to 127.0.0.1 on the host
VM_LAB_GW=10.241.0.1
VM_LAB_PREFIX=24
VM_LAB_SERVER=https://10.241.0.10:6443

# Guest memory and vCPUs (1 vCPU each: TCG on 2 host cores).
VM_LAB_MEM=${VM_LAB_MEM:-1536}
VM_LAB_SMP=${VM_LAB_SMP:-1}

VMS=(cp node1 node2)
NODES=(node1 node2)

vm_ip() {
	case $1 in
	cp) echo 10.241.0.10 ;;
	node1) echo 10.241.0.11 ;;
	node2) echo 10.241.0.12 ;;
	*)
		echo "vm-lab: unknown VM '$1' (cp, node1, node2)" >&2
		return 1
		;;
	esac
}

vm_tap() { echo "vmlab-$1"; }

vm_mac() {
	local ip
	ip=$(vm_ip "$1") || return 1
	printf '52:54:00:f1:00:%02x\n' "${ip##*.}"
}

log() { printf '%s vm-lab: %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "$*"
	exit 1
}

need_root() {
	[ "$(id -u)" = 0 ] || die "run as root (network namespaces, taps and QEMU need it)"
}

# The state file up.sh writes: IMAGE_DIR (the cached image and the ssh key).
load_state() {
	[ -f "$VM_LAB_STATE/env" ] || die "no lab is up (no $VM_LAB_STATE/env); run make vm-lab-up"
	# shellcheck disable=SC1091
	. "$VM_LAB_STATE/env"
}

# Runs its arguments inside the lab's network namespace. nsenter, not
# `ip netns exec`: the latter also remounts /sys in a new mount namespace.
in_netns() { nsenter --net="/run/netns/$VM_LAB_NETNS" "$@"; }

now() { date +%s.%N | cut -c1-14; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# What of the lab still exists, one line each: processes (QEMU, ssh
# clients, the forwarder), the namespace, links named like its taps or
# bridge on the host, overlays, the state file and mounts. Empty: clean.
leftovers() {
	local pid cmd
	for pid in $(lab_pids); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
		echo "process $pid: ${cmd:0:160}"
	done
	[ ! -e "/run/netns/$VM_LAB_NETNS" ] || echo "network namespace $VM_LAB_NETNS"
	ip -o link show 2>/dev/null | awk -F': ' -v b="$VM_LAB_BRIDGE" '$2 ~ "^(vmlab-|" b ")" { print "host link " $2 }'
	for f in "$VM_LAB_STATE"/run/*.qcow2 "$VM_LAB_STATE/env"; do
		[ ! -e "$f" ] || echo "file $f"
	done
	awk -v s="$VM_LAB_STATE" -v c="$VM_LAB_CACHE/.build" -v n="/run/netns/$VM_LAB_NETNS" \
		'index($2, s) == 1 || index($2, c) == 1 || $2 == n { print "mount " $2 }' /proc/mounts
}

# The lab's processes: whatever runs in its namespace (QEMU, ssh), and
# processes whose command line names its state directory, its namespace
# or a guest's address (the forwarder, ssh clients), except this shell's
# own ancestry.
lab_pids() {
	local self=$$ p ancestors=" " pid
	p=$self
	while [ -n "$p" ] && [ "$p" != 0 ]; do
		ancestors+="$p "
		p=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null) || break
	done
	{
		[ ! -e "/run/netns/$VM_LAB_NETNS" ] || ip netns pids "$VM_LAB_NETNS" 2>/dev/null
		pgrep -f -- "$VM_LAB_STATE/" || true
		pgrep -f -- "/run/netns/$VM_LAB_NETNS" || true
		pgrep -f -- 'root@10\.241\.0\.1[0-2]( |$)' || true
	} | sort -un | while read -r pid; do
		case $ancestors in *" $pid "*) continue ;; esac
		echo "$pid"
	done
}
