#!/usr/bin/env bash
# Provisions a node of a cluster of VMs (the Vagrantfile and the QEMU lab
# both run it, as root, inside the guest), after controlplane.sh:
#
#   node.sh --name NAME --ip IP --server URL --share DIR
#
# DIR is the directory shared with the control plane's guest: it holds the
# one nodelet_*.deb, DIR/join (the join command controlplane.sh wrote: a
# bootstrap token and the CA's hash) and optionally DIR/images/ (image
# archives the nodelet imports). Runs `install.sh node --server URL
# --token T --discovery-token-ca-cert-hash H --node-ip IP --name NAME
# --deb DIR/nodelet_*.deb --image-dir DIR/images`.
# install.sh is found as controlplane.sh finds it. Options also take the
# --opt=value form.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
# shellcheck source=common.sh
. "$here/common.sh"

name="" ip="" server="" share=""
while [ $# -gt 0 ]; do
	opt=$1 val=""
	case $opt in
	--*=*) val=${opt#*=} opt=${opt%%=*} ;;
	--name | --ip | --server | --share)
		[ $# -ge 2 ] || die "$opt needs a value"
		val=$2
		shift ;;
	esac
	case $opt in
	--name) name=$val ;;
	--ip) ip=$val ;;
	--server) server=$val ;;
	--share) share=$val ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
	shift
done
[ -n "$name" ] && [ -n "$ip" ] && [ -n "$server" ] && [ -n "$share" ] ||
	die "--name, --ip, --server and --share are required (see --help)"
[ -s "$share/join" ] || die "no $share/join: run controlplane.sh first"
# "PATH/install.sh node --server URL --token T --discovery-token-ca-cert-hash H"
read -r -a join <"$share/join"
[ ${#join[@]} -eq 8 ] && [ "${join[1]}" = node ] && [ "${join[4]}" = --token ] ||
	die "$share/join is not a join command: ${join[*]}"
token=${join[5]} hash=${join[7]}

deb=$(share_deb "$share" "")
images=()
[ -d "$share/images" ] && images=(--image-dir "$share/images")

install_sh=""
find_install_sh "$here" "$share" "$deb"

bash "$install_sh" node --server "$server" --token "$token" --discovery-token-ca-cert-hash "$hash" \
	--node-ip "$ip" --name "$name" --deb "$deb" "${images[@]}"
echo "provision: node $name ($ip) joined $server"
