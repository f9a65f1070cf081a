#!/usr/bin/env bash
# Installs nodelet on a Debian or Ubuntu host with systemd, with or without
# the .deb (k3s-style). Run as root; every command is safe to rerun. The
# .deb enables no service: this script gives a host its role (controlplane,
# node, or both) and enables what that role runs; uninstall disables it.
#
#   install.sh controlplane [--advertise-address IP] [--deb FILE | --bin-dir DIR] [--controlplane-arg ARG]...
#                           [--with-node [--node-name NAME] [--image-dir DIR] [--nodelet-arg ARG]...]
#   install.sh join-command [--ttl D] [--server URL]                                (on the control plane)
#   install.sh node --server URL --token ID.SECRET --discovery-token-ca-cert-hash sha256:HEX
#                   [--name NAME] [--node-ip IP] [--deb FILE | --bin-dir DIR] [--image-dir DIR] [--nodelet-arg ARG]...
#   install.sh node-credentials --name NAME --ip IP --server URL --out DIR      (on the control plane)
#   install.sh node --server URL --credentials DIR [...as above]
#   install.sh uninstall
#
# Run `install.sh --help` for what each command does.
set -euo pipefail

readonly PKG=nodelet
readonly CP_DATA=/var/lib/nodelet-controlplane
readonly NODE_ETC=/etc/nodelet
readonly NODE_IMAGES=/var/lib/nodelet/images
readonly NODE_PKI=/var/lib/nodelet/pki
readonly CP_DEFAULT=/etc/default/nodelet-controlplane
readonly NODE_DEFAULT=/etc/default/nodelet
readonly CONTAINERD_SOCK=/run/containerd/containerd.sock
readonly PORT=6443
# What /etc/default/nodelet always holds (the package's defaults, a node
# that joins by token: its certificates come from the control plane and
# are renewed there); the node's name, address and --nodelet-arg follow.
readonly NODELET_COMMON_ARGS="--image-dir $NODE_IMAGES --pause-binary /usr/lib/nodelet/pause --cluster-dns 10.96.0.10"
readonly NODELET_BASE_ARGS="--bootstrap-kubeconfig $NODE_ETC/bootstrap-kubeconfig --kubeconfig $NODE_ETC/kubeconfig --cert-dir $NODE_PKI $NODELET_COMMON_ARGS"
# A node given its certificates by node-credentials instead.
readonly NODELET_CREDENTIALS_ARGS="--kubeconfig $NODE_ETC/kubeconfig --tls-cert-file $NODE_ETC/serving.crt --tls-private-key-file $NODE_ETC/serving.key $NODELET_COMMON_ARGS"
readonly CONTROLPLANE_BASE_ARGS="--data-dir $CP_DATA"
# Seconds to wait for the API server and for a node.
TIMEOUT=${NODELET_INSTALL_TIMEOUT:-180}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
	cat <<EOF
Usage: $0 COMMAND [options]   (as root, on a host running systemd)

  controlplane [--advertise-address IP] [--deb FILE | --bin-dir DIR] [--controlplane-arg ARG]...
               [--with-node [--node-name NAME] [--image-dir DIR] [--nodelet-arg ARG]...]
      Installs nodelet, writes $CP_DEFAULT (--advertise-address IP
      --tls-san IP and the extra args), enables and starts
      nodelet-controlplane, waits for https://IP:$PORT/readyz, writes
      /root/.kube/config (admin) and prints how to join nodes. IP defaults
      to the default route's address. With --with-node this host is a
      node too (NAME defaults to the host name; then as 'node' below).

  join-command [--ttl D] [--server URL]
      On the control plane: makes a bootstrap token valid for D (default
      24h; 0: forever) and prints the command that joins a node with it,
      the CA's hash pinned (kubeadm's token create --print-join-command).
      URL defaults to the control plane's advertised address.

  node --server URL --token ID.SECRET --discovery-token-ca-cert-hash sha256:HEX
       [--name NAME] [--node-ip IP] [--deb FILE | --bin-dir DIR] [--image-dir DIR] [--nodelet-arg ARG]...
      Installs nodelet, finds the control plane at URL with the token and
      trusts it only if its CA has that hash (writes
      $NODE_ETC/bootstrap-kubeconfig), copies the image archives of
      --image-dir to $NODE_IMAGES/, writes $NODE_DEFAULT, enables and
      starts containerd and the nodelet, which asks the control plane for
      its certificates (kept in $NODE_PKI and renewed before they
      expire), and waits until it runs and the node is Ready (when kubectl
      is installed). NAME defaults to the host name.

  node-credentials --name NAME --ip IP --server URL --out DIR
      On the control plane, to join a node without a token: writes DIR/kubeconfig (user system:node:NAME,
      group system:nodes, server URL), DIR/serving.crt and DIR/serving.key
      (the node's HTTPS certificate for NAME and IP, signed by the cluster
      CA). Copy DIR to the node: it holds the node's private keys.

  node --server URL --credentials DIR [...as above]
      As above, with DIR's credentials copied to $NODE_ETC/ (server set
      to URL) instead of a token. NAME defaults to the credentials' name.

  uninstall
      Stops and disables the services, removes every container of the
      containerd namespace "nodelet", the kubepods cgroups, the mounts under
      /var/lib/nodelet and /run/nodelet, the nodelet's routes, masquerade
      table, bridge and CNI config, purges the package (or removes what
      --bin-dir installed) and deletes all state, the cluster's included.

  Software (controlplane, node): --deb FILE installs the package (missing
  dependencies come from apt); --bin-dir DIR installs nodelet,
  nodelet-controlplane (or controlplane) and pause from DIR, with the units
  and /etc/default files of DIR or of this script's directory (systemd/,
  default/). Without either, what is installed already is used.
  ARGs of --controlplane-arg and --nodelet-arg are single words, e.g.
  --nodelet-arg=--system-reserved=cpu=500m,memory=256Mi.
  NODELET_INSTALL_TIMEOUT (seconds, default 180) bounds every wait.
EOF
}

say() { echo "install: $*"; }
die() {
	echo "install: error: $*" >&2
	exit 1
}
usage_error() {
	echo "install: $*" >&2
	echo "Run '$0 --help' for usage." >&2
	exit 2
}
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || usage_error "$1 needs a value"; }

# A single word that systemd's $VAR expansion passes through unchanged.
check_word() {
	case $1 in
	"" | *[[:space:]\"\'\\\$\`]*) usage_error "argument '$1': no spaces, quotes, backslashes or \$ (one word per --*-arg)" ;;
	esac
}
check_ip() {
	[[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ || $1 =~ ^[0-9a-fA-F:]+$ ]] || usage_error "'$1' is not an IP address"
}
check_name() {
	[[ $1 =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]] || usage_error "node name '$1': lowercase letters, digits, '-' and '.' only"
}
check_url() {
	[[ $1 =~ ^https://[^[:space:]/]+(:[0-9]+)?/?$ ]] || usage_error "server '$1' is not an https://HOST:PORT URL"
}

require_root() { [ "$(id -u)" = 0 ] || die "run as root"; }
require_systemd() {
	[ -d /run/systemd/system ] || die "systemd is not running on this host; the nodelet services need it"
}

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 2 s until it
# succeeds; fails after SECONDS.
wait_until() {
	local secs=$1 what=$2 start=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS - start >= secs)); then
			echo "install: error: timed out after ${secs}s waiting for $what" >&2
			return 1
		fi
		sleep 2
	done
}

# install_file SRC DST MODE: copies when the content differs; returns 0
# when DST changed, 1 when it was up to date.
install_file() {
	if [ -f "$2" ] && cmp -s "$1" "$2"; then
		chmod "$3" "$2"
		return 1
	fi
	# (Callers test the result, which turns set -e off in here.)
	install -D -m "$3" "$1" "$2.install-tmp" || die "cannot write $2"
	mv -f "$2.install-tmp" "$2" || die "cannot write $2"
	return 0
}

# write_file DST MODE: writes stdin to DST when it differs; returns 0 when
# DST changed.
write_file() {
	local tmp
	tmp=$(mktemp) || die "mktemp failed"
	cat >"$tmp" || die "cannot write $tmp"
	if install_file "$tmp" "$1" "$2"; then
		rm -f "$tmp"
		return 0
	fi
	rm -f "$tmp"
	return 1
}

default_ip() { # the address of the default route's interface
	local dev
	dev=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
	[ -n "$dev" ] && ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}'
}

package_installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null)" = installed ]
}

# ---------------------------------------------------------------------------
# Software: the package, or binaries and units from a directory.

# install_deb FILE: installs the package unless this version is installed
# already (a reinstall would restart running services for nothing).
install_deb() {
	local deb=$1 name version installed dep missing=()
	[ -f "$deb" ] || die "--deb $deb: no such file"
	name=$(dpkg-deb -f "$deb" Package) || die "--deb $deb is not a Debian package"
	[ "$name" = "$PKG" ] || die "--deb $deb is package '$name', not $PKG"
	version=$(dpkg-deb -f "$deb" Version)
	installed=$(dpkg-query -W -f='${Version}' "$PKG" 2>/dev/null || true)
	if package_installed && [ "$installed" = "$version" ]; then
		say "$PKG $version is installed"
		return
	fi
	# Dependencies: names only (the package's are plain names).
	for dep in $(dpkg-deb -f "$deb" Depends | tr ',|' '  ' | sed 's/([^)]*)//g'); do
		dpkg-query -W -f='${db:Status-Status}' "$dep" 2>/dev/null | grep -qx installed || missing+=("$dep")
	done
	export DEBIAN_FRONTEND=noninteractive
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing ${missing[*]} from apt"
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}"
	fi
	say "installing $deb${installed:+ (upgrading from $installed)}"
	# confold: keep the /etc/default files this script wrote.
	dpkg -i --force-confdef --force-confold "$deb"
}

# install_bins DIR: installs the programs, units and /etc/default files
# from DIR (units and defaults also from this script's directory).
install_bins() {
	local dir=$1 cp unit f changed=false
	[ -d "$dir" ] || die "--bin-dir $dir: no such directory"
	if package_installed; then
		die "the $PKG package is installed: upgrade it with --deb FILE, or run '$0 uninstall' first"
	fi
	for f in nodelet pause; do
		[ -x "$dir/$f" ] || die "--bin-dir $dir has no executable $f"
	done
	cp=$dir/nodelet-controlplane
	[ -x "$cp" ] || cp=$dir/controlplane
	[ -x "$cp" ] || die "--bin-dir $dir has no nodelet-controlplane (or controlplane)"
	install_file "$dir/nodelet" /usr/bin/nodelet 0755 && changed=true
	install_file "$cp" /usr/bin/nodelet-controlplane 0755 && changed=true
	install_file "$dir/pause" /usr/lib/nodelet/pause 0755 && changed=true
	if [ -f "$dir/pause.tar" ]; then
		install_file "$dir/pause.tar" /usr/lib/nodelet/images/pause.tar 0644 || true
	fi
	for unit in nodelet-controlplane.service nodelet.service; do
		f=$dir/$unit
		[ -f "$f" ] || f=$SCRIPT_DIR/systemd/$unit
		[ -f "$f" ] || die "no $unit in $dir or $SCRIPT_DIR/systemd"
		install_file "$f" "/etc/systemd/system/$unit" 0644 && changed=true
	done
	for f in nodelet-controlplane nodelet; do # written again later; the package's defaults if missing
		if [ ! -f "/etc/default/$f" ]; then
			if [ -f "$dir/default/$f" ]; then
				install -m 0644 "$dir/default/$f" "/etc/default/$f"
			elif [ -f "$SCRIPT_DIR/default/$f" ]; then
				install -m 0644 "$SCRIPT_DIR/default/$f" "/etc/default/$f"
			fi
		fi
	done
	mkdir -p "$NODE_ETC"
	systemctl daemon-reload
	if ! command -v containerd >/dev/null || ! command -v runc >/dev/null ||
		{ [ ! -x /usr/lib/cni/bridge ] && [ ! -x /opt/cni/bin/bridge ]; }; then
		say "installing containerd, runc and the CNI plugins from apt"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins
	fi
	if $changed; then
		say "installed the binaries and units of $dir"
		# Like the package's postinst on upgrade: restart what runs.
		systemctl try-restart nodelet-controlplane.service nodelet.service
	else
		say "the binaries of $dir are installed"
	fi
}

install_software() { # DEB BINDIR
	if [ -n "$1" ] && [ -n "$2" ]; then
		usage_error "give --deb or --bin-dir, not both"
	elif [ -n "$1" ]; then
		install_deb "$1"
	elif [ -n "$2" ]; then
		install_bins "$2"
	elif [ -x /usr/bin/nodelet ] && [ -x /usr/bin/nodelet-controlplane ]; then
		say "using the installed nodelet"
	else
		usage_error "nodelet is not installed: give --deb FILE or --bin-dir DIR"
	fi
}

# restart_or_start UNIT CHANGED: enables UNIT and starts it, or restarts
# it when its configuration CHANGED (true/false) while it ran. The package
# enables no unit: this is what makes UNIT start at boot.
restart_or_start() {
	local action=start
	systemctl enable --quiet "$1" || die "cannot enable $1"
	if $2 && systemctl is-active --quiet "$1"; then
		say "restarting $1 (configuration changed)"
		action=restart
	fi
	# The units are Type=notify: this returns once the service is ready.
	if ! systemctl "$action" "$1"; then
		journalctl -u "$1" -n 40 --no-pager >&2 || true
		die "$1 did not start (its journal above)"
	fi
}

# ---------------------------------------------------------------------------
# controlplane

# api_ready IP: /readyz answers "ok", checked against the cluster CA.
api_ready() {
	local url="https://$1:$PORT/readyz"
	if command -v curl >/dev/null; then
		curl -fsS --max-time 5 --cacert "$CP_DATA/ca.crt" "$url" | grep -qx ok
	elif command -v wget >/dev/null; then
		wget -q -T 5 --ca-certificate="$CP_DATA/ca.crt" -O- "$url" | grep -qx ok
	elif command -v kubectl >/dev/null; then
		kubectl --kubeconfig "$CP_DATA/admin.kubeconfig" --server "https://$1:$PORT" --request-timeout 5s get --raw /readyz | grep -qx ok
	else # only that something listens
		[ -f "$CP_DATA/admin.kubeconfig" ] && (exec 3<>"/dev/tcp/$1/$PORT") 2>/dev/null
	fi
}

# kubeconfig_is_ours FILE: FILE trusts this cluster's CA.
kubeconfig_is_ours() {
	[ -f "$1" ] && [ -f "$CP_DATA/ca.crt" ] &&
		grep -q "certificate-authority-data: $(base64 -w0 "$CP_DATA/ca.crt")" "$1"
}

write_admin_kubeconfig() { # SERVER
	local dst=/root/.kube/config tmp
	if [ -f "$dst" ] && ! kubeconfig_is_ours "$dst"; then
		dst=/root/.kube/nodelet.kubeconfig
		say "/root/.kube/config belongs to another cluster; writing $dst (export KUBECONFIG=$dst)"
	fi
	if kubeconfig_is_ours "$dst" && grep -q "server: $1\$" "$dst"; then
		say "$dst is up to date"
		return
	fi
	tmp=$(mktemp)
	nodelet-controlplane kubeconfig --data-dir "$CP_DATA" --user admin --group system:masters --server "$1" >"$tmp"
	install -D -m 0600 "$tmp" "$dst"
	rm -f "$tmp"
	say "wrote $dst (admin, server $1)"
}

cmd_controlplane() {
	local ip="" deb="" bindir="" node_name="" image_dir="" with_node=false args=() node_args=()
	while [ $# -gt 0 ]; do
		case $1 in
		--advertise-address) need_value "$@"; ip=$2; shift ;;
		--advertise-address=*) ip=${1#*=} ;;
		--deb) need_value "$@"; deb=$2; shift ;;
		--deb=*) deb=${1#*=} ;;
		--bin-dir) need_value "$@"; bindir=$2; shift ;;
		--bin-dir=*) bindir=${1#*=} ;;
		--controlplane-arg) need_value "$@"; check_word "$2"; args+=("$2"); shift ;;
		--controlplane-arg=*) check_word "${1#*=}"; args+=("${1#*=}") ;;
		--node-name) need_value "$@"; node_name=$2; shift ;;
		--node-name=*) node_name=${1#*=} ;;
		--image-dir) need_value "$@"; image_dir=$2; shift ;;
		--image-dir=*) image_dir=${1#*=} ;;
		--nodelet-arg) need_value "$@"; node_args+=(--nodelet-arg "$2"); shift ;;
		--nodelet-arg=*) node_args+=(--nodelet-arg "${1#*=}") ;;
		--with-node) with_node=true ;;
		-h | --help) usage; exit 0 ;;
		*) usage_error "controlplane: unknown argument '$1'" ;;
		esac
		shift
	done
	if ! $with_node && { [ -n "$node_name" ] || [ -n "$image_dir" ] || [ ${#node_args[@]} -gt 0 ]; }; then
		usage_error "--node-name, --image-dir and --nodelet-arg need --with-node"
	fi
	require_root
	require_systemd
	if [ -z "$ip" ]; then
		ip=$(default_ip) || true
		[ -n "$ip" ] || usage_error "no default route to take the address from: give --advertise-address IP"
		say "advertising $ip (the default route's address)"
	fi
	check_ip "$ip"
	node_name=${node_name:-$(hostname | tr '[:upper:]' '[:lower:]')}
	! $with_node || check_name "$node_name"
	local server="https://$ip:$PORT" changed=false

	install_software "$deb" "$bindir"
	if ! $with_node && [ ! -f "$NODE_ETC/kubeconfig" ]; then
		# Not a node (yet): the nodelet's unit stays off. (The package
		# enables nothing; older ones enabled both units.)
		systemctl disable --now nodelet.service >/dev/null 2>&1 || true
	fi
	write_file "$CP_DEFAULT" 0644 <<EOF && changed=true
# Written by packaging/install.sh controlplane; rerun it to change this.
# The arguments of nodelet-controlplane (see nodelet-controlplane --help).
CONTROLPLANE_ARGS="$CONTROLPLANE_BASE_ARGS --advertise-address $ip --tls-san $ip${args[*]:+ ${args[*]}}"
EOF
	restart_or_start nodelet-controlplane.service "$changed"
	say "waiting for $server/readyz"
	if ! wait_until "$TIMEOUT" "the API server at $server/readyz" api_ready "$ip"; then
		journalctl -u nodelet-controlplane.service -n 30 --no-pager >&2 || true
		exit 1
	fi
	say "the control plane is ready at $server"
	write_admin_kubeconfig "$server"

	if $with_node; then
		# This host is a node too, joining by token like any other.
		local own
		own=$(new_token 1h)
		[ -z "$image_dir" ] || node_args+=(--image-dir "$image_dir")
		cmd_node --server "$server" --token "${own% *}" --discovery-token-ca-cert-hash "${own#* }" \
			--name "$node_name" --node-ip "$ip" "${node_args[@]}"
	fi

	local deb_hint=${deb:+ --deb $(basename "$deb")} join
	join=$(new_token 24h)
	cat <<EOF

The control plane runs at $server; kubectl on this host uses it as root
(/root/.kube/config). To add a node, run there (the token works for 24
hours; '$0 join-command' makes another):

  $0 node --server $server --token ${join% *} --discovery-token-ca-cert-hash ${join#* }$deb_hint
EOF
}

# ---------------------------------------------------------------------------
# join-command

# new_token TTL: makes a bootstrap token and prints "TOKEN HASH".
new_token() {
	local out words
	out=$(nodelet-controlplane token create --data-dir "$CP_DATA" --ttl "$1" --description "made by install.sh") ||
		die "could not create a bootstrap token (is the control plane running?)"
	read -r -d '' -a words <<<"$out" || true
	[ ${#words[@]} -eq 2 ] || die "unexpected output of nodelet-controlplane token create: $out"
	echo "${words[0]} ${words[1]}"
}

cmd_join_command() {
	local ttl=24h server=""
	while [ $# -gt 0 ]; do
		case $1 in
		--ttl) need_value "$@"; ttl=$2; shift ;;
		--ttl=*) ttl=${1#*=} ;;
		--server) need_value "$@"; server=$2; shift ;;
		--server=*) server=${1#*=} ;;
		-h | --help) usage; exit 0 ;;
		*) usage_error "join-command: unknown argument '$1'" ;;
		esac
		shift
	done
	[[ $ttl =~ ^([0-9]+h)?([0-9]+m)?([0-9]+s)?$ && -n $ttl ]] || [ "$ttl" = 0 ] || usage_error "--ttl '$ttl' is not a duration such as 24h"
	require_root
	command -v nodelet-controlplane >/dev/null || die "nodelet-controlplane is not installed (run '$0 controlplane' first)"
	[ -f "$CP_DATA/ca.key" ] || die "no cluster CA in $CP_DATA: this is not the control plane, or it never started"
	if [ -z "$server" ]; then
		local ip
		ip=$(sed -n 's/.*--advertise-address[= ]\([^ "]*\).*/\1/p' "$CP_DEFAULT" 2>/dev/null | head -n1)
		[ -n "$ip" ] || usage_error "no --advertise-address in $CP_DEFAULT: give --server URL"
		server="https://$ip:$PORT"
	fi
	check_url "$server"
	local join
	join=$(new_token "$ttl")
	echo "$0 node --server $server --token ${join% *} --discovery-token-ca-cert-hash ${join#* }"
}

# ---------------------------------------------------------------------------
# node-credentials

cmd_node_credentials() {
	local name="" ip="" server="" out=""
	while [ $# -gt 0 ]; do
		case $1 in
		--name) need_value "$@"; name=$2; shift ;;
		--name=*) name=${1#*=} ;;
		--ip) need_value "$@"; ip=$2; shift ;;
		--ip=*) ip=${1#*=} ;;
		--server) need_value "$@"; server=$2; shift ;;
		--server=*) server=${1#*=} ;;
		--out) need_value "$@"; out=$2; shift ;;
		--out=*) out=${1#*=} ;;
		-h | --help) usage; exit 0 ;;
		*) usage_error "node-credentials: unknown argument '$1'" ;;
		esac
		shift
	done
	[ -n "$name" ] && [ -n "$ip" ] && [ -n "$server" ] && [ -n "$out" ] ||
		usage_error "node-credentials needs --name, --ip, --server and --out"
	check_name "$name"
	check_ip "$ip"
	check_url "$server"
	require_root
	command -v nodelet-controlplane >/dev/null || die "nodelet-controlplane is not installed (run '$0 controlplane' first)"
	[ -f "$CP_DATA/ca.key" ] || die "no cluster CA in $CP_DATA: this is not the control plane, or it never started"

	# The same request against the same CA: keep what is there, so that a
	# rerun does not restart the node for new but equivalent certificates.
	local params
	params="name=$name ip=$ip server=$server ca=$(sha256sum <"$CP_DATA/ca.crt" | cut -d' ' -f1)"
	if [ -f "$out/params" ] && [ "$(cat "$out/params")" = "$params" ] &&
		[ -s "$out/kubeconfig" ] && [ -s "$out/serving.crt" ] && [ -s "$out/serving.key" ]; then
		say "credentials of node $name in $out are up to date"
		return
	fi
	mkdir -p "$out"
	chmod 0700 "$out" 2>/dev/null || true
	local tmp
	tmp=$(mktemp -d)
	# Never the admin kubeconfig: the node's own identity, in system:nodes.
	nodelet-controlplane kubeconfig --data-dir "$CP_DATA" --user "system:node:$name" --group system:nodes \
		--server "$server" >"$tmp/kubeconfig"
	nodelet-controlplane serving-cert --data-dir "$CP_DATA" --node-name "$name" --host "$ip" \
		--cert-file "$tmp/serving.crt" --key-file "$tmp/serving.key"
	install -m 0600 "$tmp/kubeconfig" "$out/kubeconfig"
	install -m 0600 "$tmp/serving.key" "$out/serving.key"
	install -m 0644 "$tmp/serving.crt" "$out/serving.crt"
	echo "$params" >"$out/params"
	rm -rf "$tmp"
	say "wrote the credentials of node $name ($ip) to $out"
}

# ---------------------------------------------------------------------------
# node

# node_ready NAME: the Node's Ready condition is True.
node_ready() {
	[ "$(kubectl --kubeconfig "$NODE_ETC/kubeconfig" --request-timeout 5s get node "$1" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# join_by_token SERVER TOKEN HASH: kubeadm's token discovery of the control
# plane (its CA must have HASH) writes the bootstrap kubeconfig; the
# nodelet asks for its certificates with it. A node that joined with the
# same server and token keeps its certificates (a rerun changes nothing);
# another join starts afresh. Returns 0 when something changed.
join_by_token() {
	local params="server=$1 token=${2%%.*} hash=$3" tmp
	if [ "$(cat "$NODE_ETC/join" 2>/dev/null)" = "$params" ] && [ -s "$NODE_ETC/bootstrap-kubeconfig" ]; then
		say "already joined $1 with this token"
		return 1
	fi
	tmp=$(mktemp)
	if ! nodelet bootstrap-kubeconfig --server "$1" --token "$2" --discovery-token-ca-cert-hash "$3" --out "$tmp"; then
		rm -f "$tmp"
		die "could not join $1 with this token (see above)"
	fi
	install_file "$tmp" "$NODE_ETC/bootstrap-kubeconfig" 0600 || true
	rm -f "$tmp"
	# Credentials of an earlier join (or of node-credentials) are not this one's.
	rm -f "$NODE_ETC/kubeconfig" "$NODE_ETC/serving.crt" "$NODE_ETC/serving.key"
	rm -rf "$NODE_PKI"
	echo "$params" >"$NODE_ETC/join"
	say "found the control plane at $1 (CA $3)"
}

# install_credentials SERVER DIR: node-credentials' files into $NODE_ETC
# (the kubeconfig's server set to SERVER). Returns 0 when something changed.
install_credentials() {
	local changed=1 tmp
	tmp=$(mktemp)
	sed "s#^\([[:space:]]*server:\).*#\1 $1#" "$2/kubeconfig" >"$tmp"
	install_file "$tmp" "$NODE_ETC/kubeconfig" 0600 && changed=0
	rm -f "$tmp"
	install_file "$2/serving.crt" "$NODE_ETC/serving.crt" 0644 && changed=0
	install_file "$2/serving.key" "$NODE_ETC/serving.key" 0600 && changed=0
	rm -f "$NODE_ETC/bootstrap-kubeconfig" "$NODE_ETC/join"
	return $changed
}

# stays_active UNIT: active now and 10 s later (not crash-looping).
stays_active() {
	systemctl is-active --quiet "$1" && sleep 10 && systemctl is-active --quiet "$1"
}

cmd_node() {
	local server="" creds="" token="" hash="" name="" node_ip="" deb="" bindir="" image_dir="" args=()
	while [ $# -gt 0 ]; do
		case $1 in
		--server) need_value "$@"; server=$2; shift ;;
		--server=*) server=${1#*=} ;;
		--credentials) need_value "$@"; creds=$2; shift ;;
		--credentials=*) creds=${1#*=} ;;
		--token) need_value "$@"; token=$2; shift ;;
		--token=*) token=${1#*=} ;;
		--discovery-token-ca-cert-hash) need_value "$@"; hash=$2; shift ;;
		--discovery-token-ca-cert-hash=*) hash=${1#*=} ;;
		--name) need_value "$@"; name=$2; shift ;;
		--name=*) name=${1#*=} ;;
		--node-ip) need_value "$@"; node_ip=$2; shift ;;
		--node-ip=*) node_ip=${1#*=} ;;
		--deb) need_value "$@"; deb=$2; shift ;;
		--deb=*) deb=${1#*=} ;;
		--bin-dir) need_value "$@"; bindir=$2; shift ;;
		--bin-dir=*) bindir=${1#*=} ;;
		--image-dir) need_value "$@"; image_dir=$2; shift ;;
		--image-dir=*) image_dir=${1#*=} ;;
		--nodelet-arg) need_value "$@"; check_word "$2"; args+=("$2"); shift ;;
		--nodelet-arg=*) check_word "${1#*=}"; args+=("${1#*=}") ;;
		-h | --help) usage; exit 0 ;;
		*) usage_error "node: unknown argument '$1'" ;;
		esac
		shift
	done
	[ -n "$server" ] || usage_error "node needs --server"
	if [ -n "$token" ]; then
		[ -z "$creds" ] || usage_error "node takes --token or --credentials, not both"
		[[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || usage_error "--token '$token' is not a bootstrap token ID.SECRET"
		[[ $hash =~ ^sha256:[0-9a-f]{64}$ ]] || usage_error "--token needs --discovery-token-ca-cert-hash sha256:HEX (the second line of nodelet-controlplane token create)"
	else
		[ -n "$creds" ] || usage_error "node needs --token (and --discovery-token-ca-cert-hash) or --credentials"
	fi
	check_url "$server"
	[ -z "$node_ip" ] || check_ip "$node_ip"
	[ -n "$image_dir" ] && [ ! -d "$image_dir" ] && die "--image-dir $image_dir: no such directory"
	local f
	if [ -n "$creds" ]; then
		for f in kubeconfig serving.crt serving.key; do
			[ -s "$creds/$f" ] || die "--credentials $creds has no $f (make them with '$0 node-credentials' on the control plane)"
		done
	fi
	# Credentials name their node: system:node:NAME.
	local cred_name=""
	[ -z "$creds" ] || cred_name=$(sed -n 's/^name=\([^ ]*\) .*/\1/p' "$creds/params" 2>/dev/null || true)
	if [ -z "$name" ]; then
		name=${cred_name:-$(hostname | tr '[:upper:]' '[:lower:]')}
	elif [ -n "$cred_name" ] && [ "$cred_name" != "$name" ]; then
		die "the credentials in $creds are for node $cred_name, not $name"
	fi
	check_name "$name"
	require_root
	require_systemd

	install_software "$deb" "$bindir"
	if [ ! -f "$CP_DATA/ca.key" ]; then
		# A worker: the control plane's unit stays off. (The package
		# enables nothing; older ones enabled both units.)
		systemctl disable --now nodelet-controlplane.service >/dev/null 2>&1 || true
	fi

	local changed=false base_args=$NODELET_CREDENTIALS_ARGS
	mkdir -p "$NODE_ETC"
	chmod 0700 "$NODE_ETC"
	if [ -n "$token" ]; then
		join_by_token "$server" "$token" "$hash" && changed=true
		base_args=$NODELET_BASE_ARGS
	else
		install_credentials "$server" "$creds" && changed=true
	fi

	mkdir -p "$NODE_IMAGES"
	if [ -n "$image_dir" ]; then
		local n=0
		for f in "$image_dir"/*.tar "$image_dir"/*.tar.gz "$image_dir"/*.tgz "$image_dir"/*.oci; do
			[ -f "$f" ] || continue
			# New images are imported when the nodelet starts.
			install_file "$f" "$NODE_IMAGES/$(basename "$f")" 0644 && changed=true
			n=$((n + 1))
		done
		say "$n image archive(s) of $image_dir in $NODE_IMAGES"
	fi

	write_file "$NODE_DEFAULT" 0644 <<EOF && changed=true
# Written by packaging/install.sh node; rerun it to change this.
# The arguments of the nodelet (see nodelet --help).
NODELET_ARGS="$base_args --node-name $name${node_ip:+ --node-ip $node_ip}${args[*]:+ ${args[*]}}"
EOF

	systemctl enable --now containerd.service >/dev/null 2>&1 || die "cannot start containerd"
	wait_until 60 "containerd's socket $CONTAINERD_SOCK" test -S "$CONTAINERD_SOCK" || exit 1
	restart_or_start nodelet.service "$changed"
	say "waiting for the nodelet to run"
	if ! wait_until "$TIMEOUT" "nodelet.service to stay active" stays_active nodelet.service; then
		journalctl -u nodelet.service -n 30 --no-pager >&2 || true
		exit 1
	fi
	if command -v kubectl >/dev/null; then
		say "waiting for node $name to be Ready"
		if ! wait_until "$TIMEOUT" "node $name to be Ready" node_ready "$name"; then
			journalctl -u nodelet.service -n 30 --no-pager >&2 || true
			exit 1
		fi
		say "node $name is Ready"
	else
		say "the nodelet runs (no kubectl here to check that node $name is Ready)"
	fi
}

# ---------------------------------------------------------------------------
# uninstall

# nodelet_flag NAME DEFAULT: the value of --NAME in /etc/default/nodelet.
nodelet_flag() {
	local words="" want=--$1 prev=""
	[ -f "$NODE_DEFAULT" ] && words=$(
		set +u
		# shellcheck disable=SC1090
		. "$NODE_DEFAULT" >/dev/null 2>&1
		echo "${NODELET_ARGS:-}"
	)
	local a value=$2
	for a in $words; do
		if [ "$prev" = "$want" ]; then
			value=$a
		elif [ "${a%%=*}" = "$want" ]; then
			value=${a#*=}
		fi
		prev=$a
	done
	echo "$value"
}

# umount_under DIR: unmounts every mount at or below DIR, deepest first.
umount_under() {
	local m
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "install: cannot unmount $m" >&2
		done
}

remove_containers() { # SOCKET NAMESPACE
	local sock=$1 ns=$2 id started=false
	command -v ctr >/dev/null || return 0
	if [ ! -S "$sock" ] && [ "$sock" = "$CONTAINERD_SOCK" ] && systemctl cat containerd.service >/dev/null 2>&1; then
		# The shims outlive a stopped containerd; it must run to kill them.
		systemctl start containerd.service && started=true
		wait_until 30 "containerd" test -S "$sock" || true
	fi
	[ -S "$sock" ] || return 0
	local ctr=(ctr --address "$sock" --namespace "$ns")
	for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
		"${ctr[@]}" tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
		"${ctr[@]}" tasks delete --force "$id" >/dev/null 2>&1 || true
	done
	local n=0
	for id in $("${ctr[@]}" containers ls -q 2>/dev/null); do
		"${ctr[@]}" containers delete "$id" >/dev/null 2>&1 || true
		n=$((n + 1))
	done
	for id in $("${ctr[@]}" images ls -q 2>/dev/null); do
		"${ctr[@]}" images remove "$id" >/dev/null 2>&1 || true
	done
	for id in $("${ctr[@]}" leases ls -q 2>/dev/null); do
		"${ctr[@]}" leases delete "$id" >/dev/null 2>&1 || true
	done
	ctr --address "$sock" namespaces remove "$ns" >/dev/null 2>&1 || true
	say "removed $n container(s) and the images of containerd namespace $ns"
	if $started; then systemctl stop containerd.service || true; fi
}

remove_cgroups() { # CGROUP_ROOT
	local root=${1%/} h
	if systemctl list-units --all --plain --no-legend 'kubepods*.slice' 2>/dev/null | grep -q .; then
		systemctl stop kubepods.slice >/dev/null 2>&1 || true
	fi
	for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		for d in "$h${root#/}/kubepods" "$h${root#/}/kubepods.slice"; do
			d=${d//\/\//\/}
			[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	done
	if [ "$root" != "" ]; then
		for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
			[ -d "$h${root#/}" ] && rmdir "$h${root#/}" 2>/dev/null || true
		done
	fi
}

cmd_uninstall() {
	case ${1:-} in
	-h | --help) usage; exit 0 ;;
	"") ;;
	*) usage_error "uninstall takes no arguments" ;;
	esac
	require_root
	local root_dir ns sock bridge cni_dir netns_dir log_dir cgroup_root
	root_dir=$(nodelet_flag root-dir /var/lib/nodelet)
	ns=$(nodelet_flag containerd-namespace nodelet)
	sock=$(nodelet_flag containerd-address "$CONTAINERD_SOCK")
	bridge=$(nodelet_flag bridge-name nodelet0)
	cni_dir=$(nodelet_flag cni-conf-dir /etc/cni/net.d)
	netns_dir=$(nodelet_flag netns-dir /run/nodelet/netns)
	log_dir=$(nodelet_flag pod-log-dir /var/log/pods)
	cgroup_root=$(nodelet_flag cgroup-root /)

	if [ -d /run/systemd/system ]; then
		say "stopping the services"
		systemctl disable --now nodelet.service nodelet-controlplane.service >/dev/null 2>&1 || true
	fi
	remove_containers "$sock" "$ns"
	remove_cgroups "$cgroup_root"
	umount_under /run/nodelet
	umount_under "$netns_dir"
	umount_under "$root_dir"
	if command -v nodelet >/dev/null; then
		nodelet cleanup-network || echo "install: nodelet cleanup-network failed" >&2
	fi
	if [ -d "/sys/class/net/$bridge" ]; then
		ip link delete "$bridge" || true
	fi
	local conf
	for conf in "$cni_dir"/*.conflist; do
		if grep -qs '"generatedBy": *"nodelet"' "$conf"; then rm -f "$conf"; fi
	done

	# The admin kubeconfig, only if it is this cluster's.
	for conf in /root/.kube/config /root/.kube/nodelet.kubeconfig; do
		if kubeconfig_is_ours "$conf"; then rm -f "$conf"; fi
	done

	if dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null | grep -qvx not-installed; then
		say "purging the $PKG package"
		DEBIAN_FRONTEND=noninteractive dpkg --purge "$PKG"
	fi
	# What --bin-dir installed (nothing a package owns).
	local f
	for f in /usr/bin/nodelet /usr/bin/nodelet-controlplane /usr/lib/nodelet \
		/etc/systemd/system/nodelet.service /etc/systemd/system/nodelet-controlplane.service \
		"$NODE_DEFAULT" "$CP_DEFAULT"; do
		[ -e "$f" ] || continue
		if dpkg -S "$f" >/dev/null 2>&1; then
			echo "install: keeping $f (it belongs to a package)" >&2
			continue
		fi
		rm -rf "$f"
	done
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
		systemctl reset-failed nodelet.service nodelet-controlplane.service >/dev/null 2>&1 || true
	fi
	for f in "$root_dir" /var/lib/nodelet "$CP_DATA" "$NODE_ETC" /run/nodelet "$netns_dir" "$log_dir"; do
		case $f in
		/*/*) rm -rf --one-file-system "$f" ;; # never /, /var, /run, ...
		*) echo "install: not removing '$f'" >&2 ;;
		esac
	done
	say "nodelet is uninstalled"
}

main() {
	[ $# -gt 0 ] || usage_error "missing command"
	local cmd=$1
	shift
	case $cmd in
	controlplane) cmd_controlplane "$@" ;;
	join-command) cmd_join_command "$@" ;;
	node-credentials) cmd_node_credentials "$@" ;;
	node) cmd_node "$@" ;;
	uninstall) cmd_uninstall "$@" ;;
	-h | --help | help) usage ;;
	*) usage_error "unknown command '$cmd'" ;;
	esac
}

main "$@"
