#!/usr/bin/env bash
# Provisions the control plane of a cluster of VMs (the Vagrantfile and
# the QEMU lab both run it, as root, inside the guest):
#
#   controlplane.sh --ip IP --share DIR [--nodes "node1=IP1 node2=IP2"] [--controlplane-arg ARG]...
#
# DIR is shared read-write with the nodes' guests and holds exactly one
# nodelet_*.deb. Runs `install.sh controlplane --advertise-address IP
# --deb DIR/nodelet_*.deb` (the control plane only: make this guest a node
# too with node.sh), then `install.sh join-command`, whose command (a
# bootstrap token and the CA's hash) it writes to DIR/join for node.sh:
# nodes join by token. --nodes is accepted for older callers and only
# checked. install.sh is taken
# from ../install.sh (as in the source tree), else from DIR/install.sh,
# else from the package. Options also take the --opt=value form.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# shellcheck source=common.sh
. "$here/common.sh"

ip="" share="" nodes="" args=()
while [ $# -gt 0 ]; do
	opt=$1 val=""
	case $opt in
	--*=*) val=${opt#*=} opt=${opt%%=*} ;;
	--ip | --share | --nodes | --controlplane-arg)
		[ $# -ge 2 ] || die "$opt needs a value"
		val=$2
		shift ;;
	esac
	case $opt in
	--ip) ip=$val ;;
	--share) share=$val ;;
	--nodes) nodes=$val ;;
	--controlplane-arg) args+=(--controlplane-arg "$val") ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
	shift
done
[ -n "$ip" ] && [ -n "$share" ] || die "--ip and --share are required (see --help)"
[ -d "$share" ] || die "--share $share: no such directory"

deb=$(share_deb "$share" "; run 'make deb' and copy _output/deb/*.deb there")

install_sh=""
find_install_sh "$here" "$share" "$deb"

server="https://$ip:6443"
bash "$install_sh" controlplane --advertise-address "$ip" --deb "$deb" "${args[@]}"
for pair in $nodes; do
	name=${pair%%=*} nip=${pair#*=}
	[ -n "$name" ] && [ -n "$nip" ] && [ "$name" != "$pair" ] || die "--nodes: '$pair' is not NAME=IP"
done
# The token outlives a slow lab's last node (a day); written atomically,
# since nodes wait for the file to appear.
bash "$install_sh" join-command --server "$server" --ttl 24h >"$share/join.tmp"
mv "$share/join.tmp" "$share/join"
echo "provision: control plane $ip ready; nodes join with $share/join"
