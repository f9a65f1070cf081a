#!/usr/bin/env bash
# Runs a command as root in one of the VM lab's guests and passes its
# stdout, stderr and exit code back (like `vagrant ssh -c`); 255 means ssh
# itself failed (the guest is down or not booted yet).
#
#   packaging/lab/ssh.sh VM COMMAND...     VM: cp, node1 or node2
#
# One argument is a shell command line run by the guest's shell
# ('systemctl is-active nodelet && journalctl -u nodelet -n 5'); several
# arguments are one command and its arguments, each passed on unchanged
# (ssh.sh node1 sh -c 'echo $HOSTNAME'). Standard input is passed on too.
# With no command, an interactive login shell.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/common.sh"

[ $# -ge 1 ] || {
	echo "usage: $0 VM [COMMAND...]   (VM: ${VMS[*]})" >&2
	exit 2
}
vm=$1
shift
ip=$(vm_ip "$vm") || exit 2
need_root
load_state

opts=(-i "$IMAGE_DIR/id_ed25519" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
	-o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=8)
if [ $# = 0 ]; then
	exec nsenter --net="/run/netns/$VM_LAB_NETNS" ssh -t "${opts[@]}" "root@$ip"
fi
if [ $# = 1 ]; then
	cmd=$1
else
	cmd=$(printf '%q ' "$@")
fi
exec nsenter --net="/run/netns/$VM_LAB_NETNS" ssh "${opts[@]}" "root@$ip" -- "$cmd"
