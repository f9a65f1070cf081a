# shellcheck shell=bash
# Sourced by controlplane.sh and node.sh: what both provisioning scripts
# need of the share and of install.sh.

die() {
	echo "provision: $*" >&2
	exit 2
}

# share_deb SHARE HINT: prints the share's one nodelet_*.deb, or dies
# (HINT is added to the message).
share_deb() {
	local debs=("$1"/nodelet_*.deb)
	[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] ||
		die "$1 must hold exactly one nodelet_*.deb (found: ${debs[*]})$2"
	echo "${debs[0]}"
}

# find_install_sh HERE SHARE DEB: sets install_sh to install.sh beside the
# provisioning scripts, in the share, or extracted from the package into a
# temporary directory removed when the script exits. Not for $(...): the
# trap must be the script's own.
find_install_sh() {
	local f
	for f in "$1/../install.sh" "$2/install.sh"; do
		if [ -f "$f" ]; then
			install_sh=$f
			return
		fi
	done
	provision_tmp=$(mktemp -d)
	trap 'rm -rf "$provision_tmp"' EXIT
	install_sh=$provision_tmp/install.sh
	dpkg-deb --fsys-tarfile "$3" | tar -xO ./usr/lib/nodelet/install.sh >"$install_sh" ||
		die "no install.sh beside $1, in $2 or in $3"
}
