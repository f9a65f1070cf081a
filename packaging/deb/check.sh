#!/usr/bin/env bash
# Checks the nodelet .deb and the scripts around it without installing
# anything on this host (`make packaging-check` runs it after `make deb`):
#
#   packaging/deb/check.sh [DEB]      (default: the newest _output/deb/nodelet_*_amd64.deb)
#
#  1. the shell scripts parse (bash -n, sh -n) and pass shellcheck; the
#     Vagrantfile parses (ruby -c);
#  2. lintian finds no error in the package;
#  3. its control data: name, version, architecture, dependencies,
#     conffiles, maintainer scripts; its files, modes and link;
#  4. the files themselves (dpkg-deb -x): static binaries that run, the
#     pause archive identical to the one the nodelet builds, units and
#     /etc/default files that agree with install.sh;
#  5. the package's life cycle with the real dpkg in a throwaway root
#     (chroot, private mount and network namespaces, systemd tools
#     stubbed): install, upgrade, remove, purge, and what each maintainer
#     script did: the package enables no unit (the root's .wants links),
#     keeps enabled what was, restarts what runs on upgrade;
#  6. install.sh node-credentials against the packaged control plane,
#     run in a private network namespace with a private /var/lib;
#  7. install.sh in the throwaway root, with systemctl stubbed (the
#     control plane runs): node on a worker (only nodelet.service enabled)
#     and uninstall, then controlplane, node (twice each) and uninstall,
#     with the units each step leaves enabled.
#
# Prints ok/FAIL per check; exits 1 when any check failed.
# NODELET_CHECK_KEEP=1 keeps the work directory (the root, dpkg's logs).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}

deb=${1:-$(ls -t _output/deb/nodelet_*_amd64.deb 2>/dev/null | head -n1)}
[ -n "$deb" ] && [ -f "$deb" ] || {
	echo "check: no package${deb:+ at $deb}; run make deb" >&2
	exit 2
}
[ "$(id -u)" = 0 ] || {
	echo "check: run as root (chroot and namespaces for the life-cycle tests)" >&2
	exit 2
}
# shellcheck source=hosttools/require.sh
. hosttools/require.sh
# Every tool is required, shellcheck included: a skipped check must not pass.
require_tools lintian ruby shellcheck dpkg-deb readelf unshare chroot openssl kubectl python3 ip ldd curl /usr/bin/kill mount umount

failures=0
ok() { echo "ok:   $*"; }
bad() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
# expect WHAT COMMAND...: ok when COMMAND succeeds.
expect() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}

work=$(mktemp -d /tmp/nodelet-pkgcheck.XXXXXX)
cleanup() {
	# Nothing is mounted outside the private namespaces; the root is plain files.
	if [ -n "${NODELET_CHECK_KEEP:-}" ]; then echo "check: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "== 1. scripts and Vagrantfile"
bash_scripts=(packaging/install.sh packaging/smoke.sh packaging/provision/controlplane.sh packaging/provision/node.sh packaging/provision/common.sh
	packaging/deb/build.sh packaging/deb/check.sh packaging/vagrant/node-exec.sh)
sh_scripts=(packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm packaging/deb/version.sh)
for f in "${bash_scripts[@]}"; do
	expect "bash -n $f" bash -n "$f"
done
for f in "${sh_scripts[@]}"; do
	expect "sh -n $f" sh -n "$f"
done
expect "shellcheck (bash) ${bash_scripts[*]}" shellcheck -S warning "${bash_scripts[@]}"
expect "shellcheck -s sh ${sh_scripts[*]}" shellcheck -S warning -s sh "${sh_scripts[@]}"
expect "ruby -c packaging/vagrant/Vagrantfile" sh -c 'ruby -c packaging/vagrant/Vagrantfile >/dev/null'
expect "install.sh --help" sh -c 'packaging/install.sh --help >/dev/null'
usage_exit() { # exit status 2 and a message for a bad command line
	local rc=0
	"$@" >/dev/null 2>"$work/usage.err" || rc=$?
	[ $rc = 2 ] && [ -s "$work/usage.err" ]
}
expect "install.sh rejects a bad command" usage_exit packaging/install.sh frobnicate
expect "install.sh node rejects a non-https server" usage_exit packaging/install.sh node --server http://10.0.0.1:6443 --credentials /nonexistent
expect "install.sh rejects an argument with spaces" usage_exit packaging/install.sh controlplane --controlplane-arg 'a b'
expect "install.sh node-credentials rejects an upper-case name" usage_exit packaging/install.sh node-credentials --name Node1 --ip 10.0.0.2 --server https://10.0.0.1:6443 --out "$work/x"
mkdir -p "$work/emptyshare"
expect "provision/controlplane.sh wants exactly one .deb in the share" usage_exit packaging/provision/controlplane.sh --ip 10.0.0.1 --share "$work/emptyshare"
expect "provision/node.sh wants the join command in the share" usage_exit packaging/provision/node.sh --name n1 --ip 10.0.0.2 --server https://10.0.0.1:6443 --share "$work/emptyshare"
expect "smoke.sh --help" sh -c 'packaging/smoke.sh --help >/dev/null'
expect "version.sh prints a Debian version" sh -c 'packaging/deb/version.sh | grep -Eq "^[0-9][A-Za-z0-9.+~]*$"'

echo "== 2. lintian $deb"
lintian_out=$(lintian --pedantic "$deb" 2>&1 | grep -v '^running with root privileges' || true)
[ -z "$lintian_out" ] || printf '%s\n' "$lintian_out" | sed 's/^/     /'
echo "     lintian: $(grep -c '^E:' <<<"$lintian_out") error(s), $(grep -c '^W:' <<<"$lintian_out") warning(s), $(grep -c '^[IP]:' <<<"$lintian_out") info/pedantic"
if grep -q '^E:' <<<"$lintian_out"; then bad "lintian reports errors"; else ok "lintian: no errors"; fi

echo "== 3. control data and file list"
field() { dpkg-deb -f "$deb" "$1"; }
version=$(field Version)
expect "Package: nodelet" test "$(field Package)" = nodelet
expect "Version $version is the file name's" test "$(basename "$deb")" = "nodelet_${version}_amd64.deb"
expect "Architecture: amd64" test "$(field Architecture)" = amd64
depends=$(field Depends)
for d in containerd runc containernetworking-plugins; do
	expect "Depends on $d" grep -Eq "(^|, )$d( |,|$)" <<<"$depends"
done
dpkg-deb -e "$deb" "$work/control"
expect "conffiles: the two /etc/default files" test "$(sort "$work/control/conffiles")" = "$(printf '%s\n' /etc/default/nodelet /etc/default/nodelet-controlplane)"
for s in postinst prerm postrm; do
	expect "$s is an executable sh script" sh -c "test -x '$work/control/$s' && head -n1 '$work/control/$s' | grep -qx '#!/bin/sh' && sh -n '$work/control/$s' && cmp -s '$work/control/$s' packaging/deb/$s"
done
contents=$(dpkg-deb -c "$deb")
has() { # MODE PATH: PATH is in the package with MODE (e.g. -rwxr-xr-x), owned by root
	grep -Eq "^$1 root/root .* \./${2#/}( |$)" <<<"$contents"
}
for f in /usr/bin/nodelet /usr/bin/nodelet-controlplane /usr/lib/nodelet/pause /usr/lib/nodelet/nodelet-logger /usr/lib/nodelet/install.sh; do
	expect "$f, 0755" has -rwxr-xr-x "$f"
done
for f in /usr/lib/nodelet/images/pause.tar /lib/systemd/system/nodelet.service /lib/systemd/system/nodelet-controlplane.service \
	/etc/default/nodelet /etc/default/nodelet-controlplane /usr/share/doc/nodelet/copyright /usr/share/doc/nodelet/changelog.gz \
	/usr/share/man/man1/nodelet.1.gz /usr/share/man/man1/nodelet-controlplane.1.gz; do
	expect "$f, 0644" has -rw-r--r-- "$f"
done
expect "/var/lib/nodelet/images/pause.tar links to the packaged archive" \
	grep -q '\./var/lib/nodelet/images/pause.tar -> /usr/lib/nodelet/images/pause.tar$' <<<"$contents"

echo "== 4. the files"
root=$work/extract
dpkg-deb -x "$deb" "$root"
static() { ! readelf -lW "$1" | grep -q 'program interpreter'; }
for f in usr/bin/nodelet usr/bin/nodelet-controlplane usr/lib/nodelet/pause usr/lib/nodelet/nodelet-logger; do
	expect "$f is a static ELF executable" static "$root/$f"
done
expect "nodelet --help lists --pause-binary and --image-dir" sh -c "'$root/usr/bin/nodelet' --help 2>&1 | grep -q -- -pause-binary && '$root/usr/bin/nodelet' --help 2>&1 | grep -q -- -image-dir"
expect "nodelet cleanup-network exists" sh -c "'$root/usr/bin/nodelet' cleanup-network --help 2>&1 | grep -q 'Usage of nodelet cleanup-network'"
expect "nodelet-controlplane has kubeconfig and serving-cert" sh -c "'$root/usr/bin/nodelet-controlplane' kubeconfig --help 2>&1 | grep -q -- -server && '$root/usr/bin/nodelet-controlplane' serving-cert --help 2>&1 | grep -q -- -cert-file"
"$GO" run ./packaging/deb/pauseimage -binary "$root/usr/lib/nodelet/pause" -o "$work/pause.tar" >/dev/null
expect "pause.tar is the archive the nodelet builds from its pause binary" cmp -s "$root/usr/lib/nodelet/images/pause.tar" "$work/pause.tar"
expect "pause.tar names registry.k8s.io/pause:3.10-nodelet" sh -c "tar -xOf '$root/usr/lib/nodelet/images/pause.tar' index.json | grep -q 'registry.k8s.io/pause:3.10-nodelet'"
unit=$root/lib/systemd/system
expect "nodelet.service runs /usr/bin/nodelet \$NODELET_ARGS from /etc/default/nodelet" sh -c \
	"grep -qx 'ExecStart=/usr/bin/nodelet \$NODELET_ARGS' '$unit/nodelet.service' && grep -qx 'EnvironmentFile=-/etc/default/nodelet' '$unit/nodelet.service'"
expect "nodelet.service has KillMode=process (a restart kills no pod)" grep -qx 'KillMode=process' "$unit/nodelet.service"
expect "nodelet-controlplane.service runs /usr/bin/nodelet-controlplane \$CONTROLPLANE_ARGS" sh -c \
	"grep -qx 'ExecStart=/usr/bin/nodelet-controlplane \$CONTROLPLANE_ARGS' '$unit/nodelet-controlplane.service' && grep -qx 'EnvironmentFile=-/etc/default/nodelet-controlplane' '$unit/nodelet-controlplane.service'"
# install.sh rewrites the /etc/default files starting from the package's
# values: they must be the same.
default_of() { # FILE VAR
	(
		set +u
		# shellcheck disable=SC1090
		. "$1"
		eval "echo \"\$$2\""
	)
}
base_of() { # install.sh's readonly NAME="..." value, expanded
	bash -c "$(grep -E "^readonly (PKG|CP_DATA|NODE_ETC|NODE_IMAGES|NODE_PKI|NODELET_COMMON_ARGS)=" packaging/install.sh); $(grep -E "^readonly $1=" packaging/install.sh); echo \"\$$1\""
}
expect "install.sh's NODELET_BASE_ARGS are the packaged NODELET_ARGS" \
	test "$(default_of "$root/etc/default/nodelet" NODELET_ARGS)" = "$(base_of NODELET_BASE_ARGS)"
expect "install.sh's CONTROLPLANE_BASE_ARGS are the packaged CONTROLPLANE_ARGS" \
	test "$(default_of "$root/etc/default/nodelet-controlplane" CONTROLPLANE_ARGS)" = "$(base_of CONTROLPLANE_BASE_ARGS)"
expect "the packaged install.sh is packaging/install.sh" cmp -s "$root/usr/lib/nodelet/install.sh" packaging/install.sh

echo "== 5. life cycle with dpkg in a throwaway root"
R=$work/root
mkdir -p "$R"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,dev,tmp,run,var/log,var/lib/dpkg/{info,updates,triggers}}
ln -s usr/bin "$R/bin"
ln -s usr/sbin "$R/sbin"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
: >"$R/var/lib/dpkg/available"
for p in containerd runc containernetworking-plugins; do # the dependencies, as installed
	printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nSection: admin\nMaintainer: check\nArchitecture: amd64\nVersion: 1.0\nDescription: stand-in\n\n' "$p"
done >"$R/var/lib/dpkg/status"
touch "$R/var/lib/dpkg/info/containerd.list" "$R/var/lib/dpkg/info/runc.list" "$R/var/lib/dpkg/info/containernetworking-plugins.list"
mknod -m 666 "$R/dev/null" c 1 3
copy_host() { # host programs, with the libraries they link
	local b l
	for b in "$@"; do
		b=$(type -P "$b")
		cp -L "$b" "$R/usr/bin/"
		ldd "$b" 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | while read -r l; do
			[ -e "$R$l" ] || { mkdir -p "$R$(dirname "$l")" && cp -L "$l" "$R$l"; }
		done
	done
}
copy_host dpkg dpkg-deb dpkg-query dpkg-split dpkg-trigger dpkg-divert dpkg-statoverride dash rm mkdir chmod find awk sort grep rmdir cat ln readlink env tar diff sed ls
ln -s dash "$R/usr/bin/sh"
for s in ldconfig start-stop-daemon; do
	printf '#!/bin/sh\nexit 0\n' >"$R/usr/sbin/$s"
done
# The systemd tools the maintainer scripts call record every call.
# deb-systemd-helper also keeps its state as the real one does, for units
# whose [Install] is WantedBy=multi-user.target (packaging/units_test.go
# holds the units to that): a state file per unit naming its link, the link
# itself (/etc/systemd/system/multi-user.target.wants/UNIT, as systemctl
# enable makes it) and masks. was-enabled is true when every link of the
# state file exists, so also when there is no state file (a fresh install).
for s in deb-systemd-invoke systemctl; do
	cat >"$R/usr/bin/$s" <<'EOF'
#!/bin/sh
echo "${0##*/} $*" >>/var/log/stub.log
EOF
done
cat >"$R/usr/bin/deb-systemd-helper" <<'EOF'
#!/bin/sh
echo "deb-systemd-helper $*" >>/var/log/stub.log
[ "$1" = --quiet ] && shift
action=$1
shift
state=/var/lib/systemd/deb-systemd-helper-enabled
masked=/var/lib/systemd/deb-systemd-helper-masked
rc=0
case $action in is-enabled | was-enabled | debian-installed) rc=1 ;; esac
for unit in "$@"; do
	file=$state/$unit.dsh-also
	link=/etc/systemd/system/multi-user.target.wants/$unit
	mask=/etc/systemd/system/$unit
	case $action in
	debian-installed) [ ! -f "$file" ] || rc=0 ;;
	is-enabled) [ ! -L "$link" ] || rc=0 ;;
	was-enabled)
		all=true
		if [ -f "$file" ]; then
			while read -r l; do [ -L "$l" ] || all=false; done <"$file"
		fi
		! $all || rc=0
		;;
	update-state)
		mkdir -p "$state"
		echo "$link" >"$file"
		;;
	enable)
		mkdir -p "$state" "${link%/*}"
		echo "$link" >"$file"
		[ -L "$link" ] || ln -s "/lib/systemd/system/$unit" "$link"
		;;
	disable | purge)
		if [ -f "$file" ]; then
			while read -r l; do rm -f "$l"; done <"$file"
		fi
		[ "$action" = disable ] || rm -f "$file"
		;;
	mask)
		if [ ! -e "$mask" ] && [ ! -L "$mask" ]; then
			mkdir -p "$masked" "${mask%/*}"
			ln -s /dev/null "$mask"
			: >"$masked/$unit"
		fi
		;;
	unmask)
		if [ -e "$masked/$unit" ] && [ "$(readlink "$mask")" = /dev/null ]; then rm -f "$mask"; fi
		rm -f "$masked/$unit"
		;;
	esac
done
exit $rc
EOF
chmod 0755 "$R"/usr/sbin/* "$R"/usr/bin/deb-systemd-* "$R/usr/bin/systemctl"
cp "$deb" "$R/tmp/v1.deb"
# The upgrade: the same package with a higher version.
dpkg-deb -R "$deb" "$work/v2"
sed -i "s/^Version: .*/Version: ${version}+check2/" "$work/v2/DEBIAN/control"
dpkg-deb -Znone -b "$work/v2" "$R/tmp/v2.deb" >/dev/null
rm -rf "$work/v2"

in_root() { # COMMAND...: in the root, with private mounts, network and pids
	unshare --mount --net --pid --fork chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"
}
calls() { cat "$R/var/log/stub.log" 2>/dev/null; }
called() { grep -qx -- "$1" "$R/var/log/stub.log"; }
not_called() { ! grep -q -- "$1" "$R/var/log/stub.log"; }
status_of() { in_root dpkg-query -W -f='${db:Status-Status}' nodelet 2>/dev/null || true; }

# enabled: the nodelet units enabled in the root $R (their .wants links,
# made by systemctl enable or deb-systemd-helper enable), sorted, on one
# line.
enabled() {
	local l out=""
	for l in "$R"/etc/systemd/system/*.wants/nodelet*.service; do
		[ -L "$l" ] && out+="${out:+ }${l##*/}"
	done
	echo "$out"
}
# enabled_is UNITS: exactly UNITS ("" for none) are enabled.
enabled_is() {
	local got
	got=$(enabled)
	[ "$got" = "$1" ] || echo "     enabled: ${got:-nothing} (want ${1:-nothing})"
	[ "$got" = "$1" ]
}
# no_enable_call: no stub was asked to enable a unit.
no_enable_call() { ! grep -Eq ' (enable|reenable|preset)( |$)' "$R/var/log/stub.log"; }
wants=$R/etc/systemd/system/multi-user.target.wants

# Fresh install, systemd running: enable nothing, start nothing.
mkdir -p "$R/run/systemd/system"
: >"$R/var/log/stub.log"
if in_root dpkg -i /tmp/v1.deb >"$work/dpkg.log" 2>&1; then ok "dpkg -i installs $version"; else bad "dpkg -i: $(tail -n 5 "$work/dpkg.log")"; fi
expect "installed" test "$(status_of)" = installed
expect "postinst enables no unit (no .wants link in the root)" enabled_is ""
expect "postinst asks for no enable" no_enable_call
for u in nodelet-controlplane.service nodelet.service; do
	expect "postinst records $u's links for purge (deb-systemd-helper update-state)" sh -c \
		"grep -qx 'deb-systemd-helper update-state $u' '$R/var/log/stub.log' && test -f '$R/var/lib/systemd/deb-systemd-helper-enabled/$u.dsh-also'"
done
expect "postinst starts nothing on a fresh install" not_called deb-systemd-invoke
expect "postinst makes /etc/nodelet" test -d "$R/etc/nodelet"
expect "the files are unpacked" test -x "$R/usr/bin/nodelet" -a -f "$R/lib/systemd/system/nodelet.service"

# Upgrade of a host that install.sh never gave a role, with
# /etc/default/nodelet rewritten.
echo 'NODELET_ARGS="--kubeconfig /etc/nodelet/kubeconfig --node-name check"' >"$R/etc/default/nodelet"
: >"$R/var/log/stub.log"
if in_root dpkg -i /tmp/v2.deb >"$work/dpkg.log" 2>&1; then ok "dpkg -i upgrades to ${version}+check2"; else bad "upgrade: $(tail -n 5 "$work/dpkg.log")"; fi
expect "prerm stops nothing on upgrade" not_called "deb-systemd-invoke stop"
for u in nodelet-controlplane.service nodelet.service; do
	expect "postinst try-restarts $u on upgrade" called "deb-systemd-invoke try-restart $u"
done
expect "the upgrade enables no unit" enabled_is ""
expect "the upgrade asks for no enable" no_enable_call
expect "postinst reloads systemd" called "systemctl --system daemon-reload"
expect "the upgrade keeps the rewritten /etc/default/nodelet" grep -q -- '--node-name check' "$R/etc/default/nodelet"

# A worker: install.sh node enabled nodelet.service (systemctl enable
# makes this link). Reinstalling (the upgrade path: prerm upgrade,
# postinst configure with the old version) keeps that and enables nothing.
mkdir -p "$wants"
ln -sfn /lib/systemd/system/nodelet.service "$wants/nodelet.service"
: >"$R/var/log/stub.log"
if in_root dpkg -i /tmp/v2.deb >"$work/dpkg.log" 2>&1; then ok "dpkg -i reinstalls ${version}+check2 on a worker"; else bad "reinstall: $(tail -n 5 "$work/dpkg.log")"; fi
expect "the worker's upgrade keeps nodelet.service enabled and enables nothing else" enabled_is nodelet.service
expect "postinst asks for no enable of nodelet-controlplane.service" not_called "enable nodelet-controlplane.service"
for u in nodelet-controlplane.service nodelet.service; do
	expect "postinst try-restarts $u on the worker" called "deb-systemd-invoke try-restart $u"
done
[ $failures = 0 ] || calls | sed 's/^/     stub: /'

# Remove: stop the services, clean up the network; conffiles and state stay.
mkdir -p "$R/var/lib/nodelet/pods/0000-uid/volumes" "$R/var/lib/nodelet-controlplane" "$R/var/log/pods/ns_pod_uid" \
	"$R/etc/cni/net.d" "$R/run/nodelet/netns"
echo state >"$R/var/lib/nodelet-controlplane/state.db"
echo key >"$R/etc/nodelet/kubeconfig"
printf '{\n  "cniVersion": "1.0.0",\n  "name": "nodelet",\n  "generatedBy": "nodelet",\n  "plugins": []\n}\n' >"$R/etc/cni/net.d/10-nodelet.conflist"
printf '{"cniVersion": "1.0.0", "name": "other", "plugins": []}\n' >"$R/etc/cni/net.d/20-other.conflist"
: >"$R/var/log/stub.log"
if in_root dpkg -r nodelet >"$work/dpkg.log" 2>&1; then ok "dpkg -r"; else bad "dpkg -r: $(tail -n 5 "$work/dpkg.log")"; fi
expect "prerm stops both services" called "deb-systemd-invoke stop nodelet.service nodelet-controlplane.service"
expect "prerm ran nodelet cleanup-network without error" sh -c "! grep -q 'cleanup-network failed' '$work/dpkg.log'"
for u in nodelet-controlplane.service nodelet.service; do
	expect "postrm masks $u" called "deb-systemd-helper mask $u"
done
expect "removed: config-files left" test "$(status_of)" = config-files
expect "the binaries are gone" test ! -e "$R/usr/bin/nodelet" -a ! -e "$R/usr/bin/nodelet-controlplane"
expect "the conffiles and the state stay" test -f "$R/etc/default/nodelet" -a -f "$R/var/lib/nodelet-controlplane/state.db" -a -f "$R/etc/nodelet/kubeconfig"

# Purge: everything goes but what is not the nodelet's.
: >"$R/var/log/stub.log"
if in_root dpkg --purge nodelet >"$work/dpkg.log" 2>&1; then ok "dpkg --purge"; else bad "dpkg --purge: $(tail -n 5 "$work/dpkg.log")"; fi
for u in nodelet-controlplane.service nodelet.service; do
	expect "postrm purges and unmasks $u" sh -c "grep -qx 'deb-systemd-helper purge $u' '$R/var/log/stub.log' && grep -qx 'deb-systemd-helper unmask $u' '$R/var/log/stub.log'"
done
for d in /var/lib/nodelet /var/lib/nodelet-controlplane /etc/nodelet /var/log/pods /run/nodelet /etc/default/nodelet /etc/default/nodelet-controlplane /etc/cni/net.d/10-nodelet.conflist; do
	expect "purge removes $d" test ! -e "$R$d"
done
expect "purge keeps another CNI config" test -f "$R/etc/cni/net.d/20-other.conflist"
expect "purge removes nodelet.service's link (made by install.sh, not the package)" enabled_is ""
expect "purge removes the masks" test ! -e "$R/etc/systemd/system/nodelet.service" -a ! -L "$R/etc/systemd/system/nodelet.service" \
	-a ! -L "$R/etc/systemd/system/nodelet-controlplane.service"
expect "purge removes deb-systemd-helper's state of the units" sh -c "! ls '$R'/var/lib/systemd/deb-systemd-helper-*/nodelet* >/dev/null 2>&1"
expect "purged: not installed" sh -c "case '$(status_of)' in '' | not-installed) true ;; *) false ;; esac"
expect "nothing of the package is left in the dpkg database" test ! -e "$R/var/lib/dpkg/info/nodelet.list"

echo "== 6. install.sh node-credentials against the packaged control plane"
# A private network (loopback only) and a private /var/lib, so that the
# control plane's data directory exists only in here.
cat >"$work/creds.sh" <<'EOF'
set -eu
root=$1 work=$2 repo=$3
ip link set lo up
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/nodelet-controlplane
export PATH=$root/usr/bin:$PATH HOME=$work/home
"$root/usr/bin/nodelet-controlplane" --data-dir /var/lib/nodelet-controlplane --bind-address 127.0.0.1 \
	--advertise-address 127.0.0.1 >"$work/controlplane.log" 2>&1 &
cp=$!
trap 'kill $cp 2>/dev/null; wait $cp 2>/dev/null' EXIT
for _ in $(seq 1 300); do # up to a minute on a busy machine
	kubectl --kubeconfig /var/lib/nodelet-controlplane/admin.kubeconfig get --raw /readyz >/dev/null 2>&1 && break
	sleep 0.2
done
cp /var/lib/nodelet-controlplane/ca.crt "$work/ca.crt"
out=$work/creds
"$repo/packaging/install.sh" node-credentials --name node-x --ip 127.0.0.1 --server https://127.0.0.1:6443 --out "$out"
sha256sum "$out/kubeconfig" "$out/serving.crt" "$out/serving.key" >"$work/sums1"
"$repo/packaging/install.sh" node-credentials --name node-x --ip 127.0.0.1 --server https://127.0.0.1:6443 --out "$out" >"$work/rerun.log"
sha256sum "$out/kubeconfig" "$out/serving.crt" "$out/serving.key" >"$work/sums2"
kubectl --kubeconfig "$out/kubeconfig" get --raw /readyz >"$work/readyz" 2>&1 || true
kubectl --kubeconfig "$out/kubeconfig" get nodes >"$work/getnodes" 2>&1 && echo ok >"$work/getnodes.ok" || true
EOF
if unshare --mount --net --fork bash "$work/creds.sh" "$root" "$work" "$PWD" >"$work/creds.log" 2>&1; then
	ok "node-credentials ran"
else
	bad "node-credentials: $(tail -n 5 "$work/creds.log") (control plane log: $(tail -n 3 "$work/controlplane.log" 2>/dev/null))"
fi
c=$work/creds
mode() { stat -c %a "$1" 2>/dev/null; }
expect "kubeconfig and serving.key are 0600, serving.crt 0644" \
	test "$(mode "$c/kubeconfig") $(mode "$c/serving.key") $(mode "$c/serving.crt")" = "600 600 644"
client_subject() {
	sed -n 's/^ *client-certificate-data: //p' "$c/kubeconfig" | base64 -d | openssl x509 -noout -subject -nameopt RFC2253 2>/dev/null
}
expect "the kubeconfig is system:node:node-x in system:nodes (not admin)" sh -c "[ \"\$1\" = 'subject=CN=system:node:node-x,O=system:nodes' ]" _ "$(client_subject)"
expect "the kubeconfig names https://127.0.0.1:6443" grep -q 'server: https://127.0.0.1:6443$' "$c/kubeconfig"
expect "serving.crt is signed by the cluster CA" sh -c "openssl verify -CAfile '$work/ca.crt' '$c/serving.crt' >/dev/null 2>&1"
expect "serving.crt names node-x and 127.0.0.1" sh -c \
	"openssl x509 -noout -ext subjectAltName -in '$c/serving.crt' | grep -q 'DNS:node-x' && openssl x509 -noout -ext subjectAltName -in '$c/serving.crt' | grep -q 'IP Address:127.0.0.1'"
expect "the node's kubeconfig reaches the API server" sh -c "grep -qx ok '$work/readyz' && test -f '$work/getnodes.ok'"
expect "a rerun keeps the credentials (same files)" sh -c "cmp -s '$work/sums1' '$work/sums2' && grep -q 'up to date' '$work/rerun.log'"

echo "== 7. install.sh node on a worker, controlplane, node and uninstall in the throwaway root (systemd stubbed)"
# The root of section 5 (the package purged; its deb-systemd-helper stand-in
# stays), with the tools install.sh uses and a systemctl that runs the real
# control plane (so that /readyz, the admin kubeconfig and node-credentials
# are real), keeps the other units' state in files and enables with the
# .wants links deb-systemd-helper's stand-in knows. No kubectl in there:
# install.sh then skips the Ready wait. The worker's credentials are
# section 6's.
copy_host bash id dirname cmp install mv mktemp cp tr cut sha256sum base64 basename hostname sleep curl stat touch seq head tail umount kill
mkdir -p "$R/proc" "$R/root" "$R/share/images" "$R/run/containerd" "$R/var/lib/stub-systemd"
echo fake-image >"$R/share/images/extra.tar"
cat >"$R/usr/bin/systemctl" <<'EOF'
#!/bin/bash
# systemctl stand-in: nodelet-controlplane.service runs for real, the other
# units are state files, enabled units have their .wants link (WantedBy=
# multi-user.target); every call is recorded.
echo "systemctl $*" >>/var/log/stub.log
st=/var/lib/stub-systemd
wants=/etc/systemd/system/multi-user.target.wants
args=() quiet=false now=false
for a in "$@"; do
	case $a in
	--system | --no-pager | --plain | --no-legend | --all) ;;
	--quiet) quiet=true ;;
	--now) now=true ;;
	*) args+=("$a") ;;
	esac
done
cmd=${args[0]:-} units=("${args[@]:1}")
active() {
	if [ "$1" = nodelet-controlplane.service ]; then
		[ -f $st/cp.pid ] && kill -0 "$(cat $st/cp.pid)" 2>/dev/null
	else
		[ -f "$st/$1.active" ]
	fi
}
stop() {
	if [ "$1" = nodelet-controlplane.service ] && [ -f $st/cp.pid ]; then
		kill "$(cat $st/cp.pid)" 2>/dev/null
		rm -f $st/cp.pid
	fi
	rm -f "$st/$1.active"
}
start() {
	stop "$1"
	if [ "$1" = nodelet-controlplane.service ]; then
		set -a
		. /etc/default/nodelet-controlplane
		set +a
		# shellcheck disable=SC2086
		/usr/bin/nodelet-controlplane $CONTROLPLANE_ARGS >>/var/log/controlplane.log 2>&1 &
		echo $! >$st/cp.pid
	else
		touch "$st/$1.active"
	fi
}
case $cmd in
enable) for u in "${units[@]}"; do
	mkdir -p $wants
	ln -sfn "/lib/systemd/system/$u" "$wants/$u"
	if $now; then start "$u"; fi
done ;;
disable) for u in "${units[@]}"; do rm -f "$wants/$u"; if $now; then stop "$u"; fi; done ;;
start) for u in "${units[@]}"; do active "$u" || start "$u"; done ;;
restart) for u in "${units[@]}"; do start "$u"; done ;;
stop) for u in "${units[@]}"; do stop "$u"; done ;;
try-restart) for u in "${units[@]}"; do if active "$u"; then start "$u"; fi; done ;;
is-active) for u in "${units[@]}"; do active "$u" || { $quiet || echo inactive; exit 3; }; done; $quiet || echo active ;;
is-enabled) for u in "${units[@]}"; do [ -L "$wants/$u" ] || exit 1; done ;;
cat) exit 1 ;; # no containerd unit to start for the uninstall
*) ;;
esac
exit 0
EOF
printf '#!/bin/sh\ntail -n 20 /var/log/controlplane.log 2>/dev/null\n' >"$R/usr/bin/journalctl"
chmod 0755 "$R/usr/bin/systemctl" "$R/usr/bin/journalctl"
cp packaging/install.sh "$R/install.sh"
rm -rf "$R/share/worker-credentials"
[ ! -d "$work/creds" ] || cp -a "$work/creds" "$R/share/worker-credentials"
: >"$R/var/log/stub.log"
{
	declare -f enabled
	cat <<'EOF'
set -u
R=$1
ip link set lo up
mount -t proc proc "$R/proc"
# containerd's socket, for install.sh's wait (nothing listens).
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$R/run/containerd/containerd.sock"
run() { # NAME COMMAND...: runs in the root, output in NAME.log, status in NAME.rc
	local name=$1
	shift
	chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root NODELET_INSTALL_TIMEOUT=120 "$@" >"$R/$name.log" 2>&1
	echo $? >"$R/$name.rc"
}
snap() { # NAME PATH...: copies of what a step left, for the checks
	mkdir -p "$R/snap/$1"
	local p=$1
	shift
	for f in "$@"; do cp -a "$R$f" "$R/snap/$p/" 2>/dev/null; done
}
# A worker first: no control plane on this host.
run worker bash /install.sh node --server https://127.0.0.1:6443 --credentials /share/worker-credentials --deb /tmp/v1.deb
enabled >"$R/enabled-worker"
cp "$R/var/log/stub.log" "$R/stub-after-worker.log"
run worker-uninstall bash /install.sh uninstall
enabled >"$R/enabled-worker-uninstall"
: >"$R/var/log/stub.log"
# Then the control plane, and a node beside it.
run cp1 bash /install.sh controlplane --advertise-address 127.0.0.1 --deb /tmp/v1.deb
enabled >"$R/enabled-cp1"
snap cp1 /etc/default/nodelet-controlplane /root/.kube/config
run cp2 bash /install.sh controlplane --advertise-address 127.0.0.1 --deb /tmp/v1.deb
run creds bash /install.sh node-credentials --name n1 --ip 127.0.0.1 --server https://127.0.0.1:6443 --out /share/credentials/n1
run node1 bash /install.sh node --server https://127.0.0.1:6443 --credentials /share/credentials/n1 --name n1 --node-ip 127.0.0.2 --image-dir /share/images --nodelet-arg --log-level=debug
enabled >"$R/enabled-node1"
cp "$R/var/log/stub.log" "$R/stub-after-node1.log"
snap node1 /etc/default/nodelet /etc/nodelet/kubeconfig /etc/nodelet/serving.crt /etc/nodelet/serving.key /var/lib/nodelet/images/extra.tar
: >"$R/var/log/stub.log"
run node2 bash /install.sh node --server https://127.0.0.1:6443 --credentials /share/credentials/n1 --name n1 --node-ip 127.0.0.2 --image-dir /share/images --nodelet-arg --log-level=debug
cp "$R/var/log/stub.log" "$R/stub-after-node2.log"
# The same host joins by token instead (kubeadm's discovery against the
# real control plane), then again with the same token.
run join bash /install.sh join-command --ttl 1h
run badhash bash -c "$(sed 's/sha256:[0-9a-f]*/sha256:0000000000000000000000000000000000000000000000000000000000000000/' "$R/join.log" | tail -n1) --name n2"
run token1 bash -c "$(tail -n1 "$R/join.log") --name n2 --node-ip 127.0.0.3"
snap token1 /etc/default/nodelet /etc/nodelet/bootstrap-kubeconfig
: >"$R/var/log/stub.log"
run token2 bash -c "$(tail -n1 "$R/join.log") --name n2 --node-ip 127.0.0.3"
cp "$R/var/log/stub.log" "$R/stub-after-token2.log"
run uninstall bash /install.sh uninstall
enabled >"$R/enabled-uninstall"
chroot "$R" /usr/bin/systemctl stop nodelet-controlplane.service
EOF
} >"$work/flow.sh"
unshare --mount --net --pid --fork bash "$work/flow.sh" "$R" >"$work/flow.log" 2>&1 || true
rc_of() { cat "$R/$1.rc" 2>/dev/null || echo none; }
log_of() { tail -n 8 "$R/$1.log" 2>/dev/null | sed 's/^/     | /'; }
step() { # NAME WHAT
	if [ "$(rc_of "$1")" = 0 ]; then ok "$2"; else
		bad "$2 (exit $(rc_of "$1"))"
		log_of "$1"
	fi
}
# enabled_after STEP UNITS: exactly UNITS ("" for none) were enabled after STEP.
enabled_after() {
	local got
	got=$(cat "$R/enabled-$1" 2>/dev/null || echo "(not recorded)")
	[ "$got" = "$2" ] || echo "     enabled after $1: ${got:-nothing} (want ${2:-nothing})"
	[ "$got" = "$2" ]
}
step worker "install.sh node on a worker (no control plane; the credentials of section 6)"
expect "the package enabled nothing on the worker (no deb-systemd-helper enable)" sh -c \
	"! grep -Eq '^deb-systemd-helper (--quiet )?(enable|reenable) ' '$R/stub-after-worker.log'"
expect "after install.sh node on a worker only nodelet.service is enabled" enabled_after worker nodelet.service
step worker-uninstall "install.sh uninstall on the worker"
expect "after install.sh uninstall on the worker nothing is enabled" enabled_after worker-uninstall ""
step cp1 "install.sh controlplane --deb: installs, starts, waits for /readyz"
expect "CONTROLPLANE_ARGS: packaged ones + --advertise-address and --tls-san" grep -qx \
	'CONTROLPLANE_ARGS="--data-dir /var/lib/nodelet-controlplane --advertise-address 127.0.0.1 --tls-san 127.0.0.1"' "$R/snap/cp1/nodelet-controlplane"
expect "after install.sh controlplane only nodelet-controlplane.service is enabled (no node here yet)" enabled_after cp1 nodelet-controlplane.service
expect "/root/.kube/config: admin, https://127.0.0.1:6443, 0600" sh -c \
	"grep -q 'server: https://127.0.0.1:6443$' '$R/snap/cp1/config' && [ \"\$(stat -c %a '$R/snap/cp1/config')\" = 600 ]"
expect "controlplane prints the join command (a token and the CA hash)" grep -Eq 'install.sh node --server https://127.0.0.1:6443 --token [a-z0-9]{6}\.[a-z0-9]{16} --discovery-token-ca-cert-hash sha256:[0-9a-f]{64}' "$R/cp1.log"
step cp2 "install.sh controlplane again (idempotent)"
expect "the rerun installs nothing and restarts nothing" sh -c "grep -q 'is installed' '$R/cp2.log' && ! grep -q 'restarting' '$R/cp2.log' && grep -q 'up to date' '$R/cp2.log'"
step creds "install.sh node-credentials"
step node1 "install.sh node: credentials, images, /etc/default/nodelet, containerd and nodelet started"
expect "NODELET_ARGS: packaged ones + name, address, --nodelet-arg" grep -qx \
	'NODELET_ARGS="--kubeconfig /etc/nodelet/kubeconfig --tls-cert-file /etc/nodelet/serving.crt --tls-private-key-file /etc/nodelet/serving.key --image-dir /var/lib/nodelet/images --pause-binary /usr/lib/nodelet/pause --cluster-dns 10.96.0.10 --node-name n1 --node-ip 127.0.0.2 --log-level=debug"' \
	"$R/snap/node1/nodelet"
expect "/etc/nodelet: kubeconfig 0600, serving.crt 0644, serving.key 0600" test \
	"$(stat -c %a "$R/snap/node1/kubeconfig" "$R/snap/node1/serving.crt" "$R/snap/node1/serving.key" 2>/dev/null | tr '\n' ' ')" = "600 644 600 "
expect "the image archives are in /var/lib/nodelet/images" test -f "$R/snap/node1/extra.tar"
expect "node enables and starts containerd and the nodelet" sh -c \
	"grep -qx 'systemctl enable --now containerd.service' '$R/stub-after-node1.log' && grep -qx 'systemctl start nodelet.service' '$R/stub-after-node1.log'"
expect "node leaves the control plane of its host alone" sh -c "! grep -q 'disable --now nodelet-controlplane' '$R/stub-after-node1.log'"
expect "after install.sh node beside the control plane both units are enabled" enabled_after node1 "nodelet-controlplane.service nodelet.service"
step node2 "install.sh node again (idempotent)"
expect "the rerun restarts nothing" sh -c "! grep -q 'restart' '$R/stub-after-node2.log'"
step join "install.sh join-command"
expect "a control plane with another CA hash is refused" sh -c "[ \"\$(cat '$R/badhash.rc')\" != 0 ] && grep -q 'sha256:0000' '$R/badhash.log'"
step token1 "install.sh node --token: discovery with the pinned CA, the bootstrap kubeconfig, nodelet started"
expect "NODELET_ARGS: the packaged (bootstrap) ones + name and address" grep -qx \
	'NODELET_ARGS="--bootstrap-kubeconfig /etc/nodelet/bootstrap-kubeconfig --kubeconfig /etc/nodelet/kubeconfig --cert-dir /var/lib/nodelet/pki --image-dir /var/lib/nodelet/images --pause-binary /usr/lib/nodelet/pause --cluster-dns 10.96.0.10 --node-name n2 --node-ip 127.0.0.3"' \
	"$R/snap/token1/nodelet"
expect "/etc/nodelet/bootstrap-kubeconfig: 0600, the token, the server" sh -c \
	"[ \"\$(stat -c %a '$R/snap/token1/bootstrap-kubeconfig')\" = 600 ] && grep -q 'server: https://127.0.0.1:6443' '$R/snap/token1/bootstrap-kubeconfig' && grep -q 'token: ' '$R/snap/token1/bootstrap-kubeconfig'"
step token2 "install.sh node --token again (idempotent)"
expect "the token rerun restarts nothing" sh -c "! grep -q 'restart' '$R/stub-after-token2.log' && grep -q 'already joined' '$R/token2.log'"
step uninstall "install.sh uninstall"
expect "uninstall stops and disables both services" grep -q 'systemctl disable --now nodelet.service nodelet-controlplane.service' "$R/var/log/stub.log"
expect "after install.sh uninstall nothing is enabled" enabled_after uninstall ""
expect "uninstall purges the package" sh -c "! chroot '$R' dpkg-query -W nodelet >/dev/null 2>&1"
for d in /var/lib/nodelet /var/lib/nodelet-controlplane /etc/nodelet /etc/default/nodelet /usr/bin/nodelet /root/.kube/config; do
	expect "after uninstall: no $d" test ! -e "$R$d"
done

echo
if [ $failures -gt 0 ]; then
	echo "packaging-check: $failures check(s) failed"
	exit 1
fi
echo "packaging-check: all checks passed ($deb)"
