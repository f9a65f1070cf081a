#!/usr/bin/env bash
# Boots the VM lab and provisions it: the cached Debian 12 image (built
# once by build-image.sh), three QEMU guests (TCG) on a bridge inside the
# network namespace $VM_LAB_NETNS, the .deb built from the working tree
# installed by the shared provisioning scripts (packaging/provision), the
# nodes joined; kubectl on the host reaches the API server through a
# forwarder on 127.0.0.1:$VM_LAB_PORT. The lab stays up; down.sh removes it.
#
#   packaging/lab/up.sh [--deb FILE] [--boot-only] [--controlplane-arg ARG]...
#
#   --deb FILE              the package to install (default: the newest
#                           _output/deb/nodelet_*_amd64.deb)
#   --boot-only             boot the guests and wait for ssh; no provisioning
#   --controlplane-arg ARG  passed on to controlplane.sh (repeatable)
#
# Timings go to $VM_LAB_STATE/timings (boot-to-ssh and boot-to-Ready per VM).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"
# shellcheck source=SCRIPTDIR/../../hosttools/require.sh
. "$REPO_DIR/hosttools/require.sh"

deb=""
boot_only=false
# The provisioning scripts the guests run (shared with the Vagrantfile).
PROVISION_DIR=${VM_LAB_PROVISION_DIR:-$REPO_DIR/packaging/provision}
cp_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--deb) deb=$2 && shift 2 ;;
	--deb=*) deb=${1#*=} && shift ;;
	--boot-only) boot_only=true && shift ;;
	--controlplane-arg) cp_args+=("--controlplane-arg=$2") && shift 2 ;;
	--controlplane-arg=*) cp_args+=("$1") && shift ;;
	*) die "unknown argument $1 (see $0)" ;;
	esac
done

need_root
require_tools qemu-system-x86_64 qemu-img nsenter ssh ip setsid pgrep
if [ -e "/run/netns/$VM_LAB_NETNS" ] || [ -f "$VM_LAB_STATE/env" ]; then
	die "a VM lab is up already (namespace $VM_LAB_NETNS or $VM_LAB_STATE/env); make vm-lab-down removes it"
fi
if ! $boot_only; then
	[ -f "$PROVISION_DIR/controlplane.sh" ] && [ -f "$PROVISION_DIR/node.sh" ] ||
		die "$PROVISION_DIR/controlplane.sh or node.sh is missing"
	if [ -z "$deb" ]; then
		# shellcheck disable=SC2012 # names without blanks; newest first
		deb=$(ls -t "$REPO_DIR"/_output/deb/nodelet_*_amd64.deb 2>/dev/null | head -n1) || true
		[ -n "$deb" ] || die "no _output/deb/nodelet_*_amd64.deb; run make deb"
	fi
	[ -f "$deb" ] || die "$deb: no such package"
	[ -x "$REPO_DIR/bin/nodelet-lab" ] || die "bin/nodelet-lab is missing (the kubectl forwarder); run make build"
	require_tools kubectl go
fi

start=$(now)
IMAGE_DIR=$("$LAB_DIR/build-image.sh")
log "image: $IMAGE_DIR"

# From here on a failure leaves a half-made lab, for a look: down.sh removes it.
up_ok=false
trap '$up_ok || log "up failed; the lab is left as it is (logs in $VM_LAB_STATE/logs); make vm-lab-down removes it"' EXIT

rm -rf "$VM_LAB_STATE"
mkdir -p "$VM_LAB_STATE"/{share,logs,run}
cat >"$VM_LAB_STATE/env" <<EOF
IMAGE_DIR=$IMAGE_DIR
STARTED=$start
EOF
: >"$VM_LAB_STATE/timings"

# The network: a bridge and one tap per guest, all inside the lab's
# namespace; nothing on the host's own interfaces.
ip netns add "$VM_LAB_NETNS"
ip -n "$VM_LAB_NETNS" link set lo up
ip -n "$VM_LAB_NETNS" link add "$VM_LAB_BRIDGE" type bridge
ip -n "$VM_LAB_NETNS" addr add "$VM_LAB_GW/$VM_LAB_PREFIX" dev "$VM_LAB_BRIDGE"
ip -n "$VM_LAB_NETNS" link set "$VM_LAB_BRIDGE" up
for vm in "${VMS[@]}"; do
	ip -n "$VM_LAB_NETNS" tuntap add dev "$(vm_tap "$vm")" mode tap
	ip -n "$VM_LAB_NETNS" link set "$(vm_tap "$vm")" master "$VM_LAB_BRIDGE" up
done

boot() { # vm
	local vm=$1 ip overlay
	ip=$(vm_ip "$vm")
	overlay=$VM_LAB_STATE/run/$vm.qcow2
	qemu-img create -q -f qcow2 -F qcow2 -b "$IMAGE_DIR/base.qcow2" "$overlay"
	now >"$VM_LAB_STATE/run/$vm.booted"
	in_netns qemu-system-x86_64 -name "$vm,process=vmlab-$vm" \
		-accel tcg,thread=multi,tb-size=256 -cpu max -m "$VM_LAB_MEM" -smp "$VM_LAB_SMP" \
		-nodefaults -no-user-config -display none -no-reboot \
		-kernel "$IMAGE_DIR/vmlinuz" -initrd "$IMAGE_DIR/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 mitigations=off loglevel=4 lab.hostname=$vm lab.ip=$ip/$VM_LAB_PREFIX lab.gw=$VM_LAB_GW" \
		-drive "file=$overlay,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
		-netdev "tap,id=net0,ifname=$(vm_tap "$vm"),script=no,downscript=no" \
		-device "virtio-net-pci,netdev=net0,mac=$(vm_mac "$vm")" \
		-virtfs "local,path=$VM_LAB_STATE/share,mount_tag=share,security_model=none,id=share" \
		-device virtio-rng-pci \
		-serial "file:$VM_LAB_STATE/logs/$vm.console" \
		-pidfile "$VM_LAB_STATE/run/$vm.pid" -daemonize
}

wait_ssh() { # vm: until the guest answers on ssh (TCG: boots take 30-90 s)
	local vm=$1 deadline=$((SECONDS + 600)) pid
	pid=$(cat "$VM_LAB_STATE/run/$vm.pid")
	until "$LAB_DIR/ssh.sh" "$vm" true </dev/null >/dev/null 2>&1; do
		kill -0 "$pid" 2>/dev/null || {
			tail -n 30 "$VM_LAB_STATE/logs/$vm.console" >&2
			die "$vm: QEMU exited (console above, in $VM_LAB_STATE/logs/$vm.console)"
		}
		[ $SECONDS -lt $deadline ] || {
			tail -n 30 "$VM_LAB_STATE/logs/$vm.console" >&2
			die "$vm: no ssh after 600 s (console above)"
		}
		sleep 2
	done
	echo "$vm ssh $(elapsed "$(cat "$VM_LAB_STATE/run/$vm.booted")")" >>"$VM_LAB_STATE/timings"
	log "$vm is up ($(vm_ip "$vm")): ssh after $(elapsed "$(cat "$VM_LAB_STATE/run/$vm.booted")") s"
}

for vm in "${VMS[@]}"; do
	boot "$vm"
done
log "booting ${VMS[*]} (consoles in $VM_LAB_STATE/logs/)"

# What the guests need, on the share (/mnt/share in every guest): the
# package, the provisioning scripts and the test images (built from this
# machine's binaries: the guests run the same Debian).
if ! $boot_only; then
	cp "$deb" "$VM_LAB_STATE/share/"
	cp -r "$PROVISION_DIR" "$VM_LAB_STATE/share/provision"
	# The provisioning scripts look for install.sh beside them (../install.sh).
	if [ -f "$REPO_DIR/packaging/install.sh" ]; then
		cp "$REPO_DIR/packaging/install.sh" "$VM_LAB_STATE/share/install.sh"
	fi
	(cd "$REPO_DIR" && go run ./test/images/mkimages -o "$VM_LAB_STATE/share/images" >/dev/null)
fi

for vm in "${VMS[@]}"; do
	wait_ssh "$vm"
done
if $boot_only; then
	log "guests up in $(elapsed "$start") s; packaging/lab/ssh.sh VM COMMAND... runs commands in them"
	up_ok=true
	exit 0
fi

# The control plane, then the nodes (both at once).
nodes_arg=""
for n in "${NODES[@]}"; do
	nodes_arg+="${nodes_arg:+ }$n=$(vm_ip "$n")"
done
log "provisioning cp ($(basename "$deb"))"
if ! "$LAB_DIR/ssh.sh" cp bash /mnt/share/provision/controlplane.sh --ip "$(vm_ip cp)" --share /mnt/share \
	--nodes "$nodes_arg" "${cp_args[@]}" </dev/null >"$VM_LAB_STATE/logs/provision-cp.log" 2>&1; then
	tail -n 40 "$VM_LAB_STATE/logs/provision-cp.log" >&2
	die "provisioning cp failed (above; all of it in $VM_LAB_STATE/logs/provision-cp.log)"
fi

# kubectl on the host: a forwarder from 127.0.0.1 into the namespace (the
# serving certificate names 127.0.0.1), and a kubeconfig pointing at it.
setsid "$REPO_DIR/bin/nodelet-lab" forward --listen "127.0.0.1:$VM_LAB_PORT" --netns "/run/netns/$VM_LAB_NETNS" \
	--to "$(vm_ip cp):6443" </dev/null >"$VM_LAB_STATE/logs/forward.log" 2>&1 &
echo $! >"$VM_LAB_STATE/run/forward.pid"
# The control plane writes its admin kubeconfig into its data directory.
"$LAB_DIR/ssh.sh" cp 'cat /var/lib/nodelet-controlplane/admin.kubeconfig 2>/dev/null || cat /mnt/share/admin.kubeconfig' \
	</dev/null >"$VM_LAB_STATE/kubeconfig.guest" ||
	die "no admin kubeconfig on cp (/var/lib/nodelet-controlplane/admin.kubeconfig)"
sed -E "s#server: https://[^[:space:]]+#server: https://127.0.0.1:$VM_LAB_PORT#" "$VM_LAB_STATE/kubeconfig.guest" >"$VM_LAB_STATE/kubeconfig"
rm -f "$VM_LAB_STATE/kubeconfig.guest"
export KUBECONFIG=$VM_LAB_STATE/kubeconfig
deadline=$((SECONDS + 120))
until kubectl get --raw /readyz >/dev/null 2>&1; do
	if ! kill -0 "$(cat "$VM_LAB_STATE/run/forward.pid")" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
		cat "$VM_LAB_STATE/logs/forward.log" >&2
		die "kubectl on the host does not reach the API server through 127.0.0.1:$VM_LAB_PORT (port taken? set VM_LAB_PORT)"
	fi
	sleep 1
done

log "provisioning ${NODES[*]}"
pids=()
for n in "${NODES[@]}"; do
	"$LAB_DIR/ssh.sh" "$n" bash /mnt/share/provision/node.sh --name "$n" --ip "$(vm_ip "$n")" \
		--server "$VM_LAB_SERVER" --share /mnt/share </dev/null >"$VM_LAB_STATE/logs/provision-$n.log" 2>&1 &
	pids+=($!)
done
failed=()
for i in "${!NODES[@]}"; do
	wait "${pids[i]}" || failed+=("${NODES[i]}")
done
for n in "${failed[@]}"; do
	tail -n 40 "$VM_LAB_STATE/logs/provision-$n.log" >&2
	log "provisioning $n failed (above; all of it in $VM_LAB_STATE/logs/provision-$n.log)"
done
[ ${#failed[@]} = 0 ] || exit 1

for n in "${NODES[@]}"; do
	deadline=$((SECONDS + 600))
	until [ "$(kubectl get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
		[ $SECONDS -lt $deadline ] || {
			"$LAB_DIR/ssh.sh" "$n" journalctl -u nodelet -n 50 --no-pager </dev/null >&2 || true
			die "node $n not Ready after 600 s (its nodelet's journal above)"
		}
		sleep 2
	done
	echo "$n ready $(elapsed "$(cat "$VM_LAB_STATE/run/$n.booted")")" >>"$VM_LAB_STATE/timings"
	log "node $n Ready $(elapsed "$(cat "$VM_LAB_STATE/run/$n.booted")") s after its VM started"
done
up_ok=true

kubectl get nodes -o wide
log "lab up in $(elapsed "$start") s"
cat <<MSG

The VM lab runs: cp ($(vm_ip cp), the control plane), node1 ($(vm_ip node1)) and node2
($(vm_ip node2)), QEMU guests on a bridge inside the network namespace $VM_LAB_NETNS.

    export KUBECONFIG=$VM_LAB_STATE/kubeconfig
    kubectl get nodes,pods -o wide
    packaging/lab/ssh.sh node1 systemctl status nodelet
    packaging/lab/ssh.sh cp journalctl -u nodelet-controlplane -n 50

Serial consoles: $VM_LAB_STATE/logs/*.console; /mnt/share in every guest is
$VM_LAB_STATE/share. make vm-lab-down removes the lab (the image stays cached
in $VM_LAB_CACHE).
MSG
