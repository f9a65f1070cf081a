#!/usr/bin/env bash
# Removes the VM lab: the guests (QEMU), their overlays and share, the
# ssh clients and the kubectl forwarder, the network namespace with its
# bridge and taps. The cached base image stays (build-image.sh); so do the
# serial consoles and provisioning logs in $VM_LAB_STATE/logs until the
# next make vm-lab-up. Safe to run on a half-made lab or none.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"
need_root

stop_pids() { # signal, pids...
	local sig=$1
	shift
	[ $# -gt 0 ] || return 0
	kill "-$sig" "$@" 2>/dev/null || true
}

# QEMU first (SIGTERM: it exits at once; the guests' disks are throwaway).
qemus=()
for vm in "${VMS[@]}"; do
	f=$VM_LAB_STATE/run/$vm.pid
	[ -f "$f" ] || continue
	pid=$(cat "$f")
	if [ -n "$pid" ] && grep -qs "process=vmlab-$vm" "/proc/$pid/cmdline"; then
		qemus+=("$pid")
	fi
done
stop_pids TERM "${qemus[@]}"
# Then everything else of the lab's (ssh clients, the forwarder, a QEMU
# whose pid file is gone).
mapfile -t rest < <(lab_pids)
stop_pids TERM "${rest[@]}"
for _ in $(seq 1 50); do
	mapfile -t rest < <(lab_pids)
	[ ${#rest[@]} -gt 0 ] || break
	sleep 0.2
done
stop_pids KILL "${rest[@]}"
sleep 0.2

if [ -e "/run/netns/$VM_LAB_NETNS" ]; then
	ip netns del "$VM_LAB_NETNS" # its bridge and taps go with it
fi
# Anything mounted under the state directory (nothing, normally).
awk -v s="$VM_LAB_STATE/" 'index($2, s) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
	umount -l "$m" || true
done
rm -rf "$VM_LAB_STATE/run" "$VM_LAB_STATE/share" "$VM_LAB_STATE/env" "$VM_LAB_STATE/kubeconfig"

left=$(leftovers)
if [ -n "$left" ]; then
	printf '%s\n' "$left" >&2
	die "the lab is not entirely gone (above)"
fi
log "the VM lab is down (image cached in $VM_LAB_CACHE; logs in $VM_LAB_STATE/logs)"
