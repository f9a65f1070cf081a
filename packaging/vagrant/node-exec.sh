#!/usr/bin/env bash
# Runs a shell command line as root in one of the Vagrant VMs, for
# packaging/smoke.sh --node-exec (called as: node-exec.sh NODE 'command line').
#
#   KUBECONFIG=_output/vagrant/share/admin.kubeconfig \
#     packaging/smoke.sh --node-exec packaging/vagrant/node-exec.sh
set -euo pipefail
[ $# = 2 ] || {
	echo "usage: $0 NODE 'shell command line'" >&2
	exit 2
}
cd "$(dirname "$0")"
exec vagrant ssh "$1" -c "sudo sh -c $(printf %q "$2")" -- -q
