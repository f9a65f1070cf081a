#!/usr/bin/env bash
# Installs what the project's make targets need on a Debian 12 machine (as
# root), from the one list of host tools, hosttools/tools.list, then checks
# that every tool of that list is there. Idempotent, and quick when
# everything is installed.
#
#   scripts/deps.sh [TARGET...]   TARGET: up, test, deb, vm-lab (default: all)
#
# `make deps` and `make test` install for every target, `make up` for up.
set -euo pipefail
cd "$(dirname "$0")/.."
list=hosttools/tools.list
# shellcheck source=hosttools/require.sh
. hosttools/require.sh

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(up test deb vm-lab)
for t in "${targets[@]}"; do
	case $t in up | test | deb | vm-lab) ;; *)
		echo "deps: unknown target $t (want up, test, deb or vm-lab)" >&2
		exit 2
		;;
	esac
done

# The tools (and their packages) the targets need: lines whose third field
# names one of them.
want=$(IFS=,; echo ",${targets[*]},")
mapfile -t rows < <(awk -v want="$want" '
	$1 !~ /^#/ && NF == 3 {
		n = split($3, ts, ",")
		for (i = 1; i <= n; i++) if (index(want, "," ts[i] ",")) { print $1, $2; break }
	}' "$list")
tools=()
packages=()
for row in "${rows[@]}"; do
	tools+=("${row%% *}")
	pkg=${row#* }
	[ "$pkg" = - ] || packages+=("$pkg")
done

missing=()
for pkg in $(printf '%s\n' "${packages[@]}" | sort -u); do
	dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || { echo "deps: ${missing[*]} must be installed; run as root" >&2; exit 1; }
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Install only: no package may start a service (nginx, containerd) on this host.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		trap 'rm -f "$policy"' EXIT # also when apt-get fails
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# etcd-server also enables etcd.service for the next boot: the tests
	# start etcd of their own on free ports, and a system etcd on
	# 127.0.0.1:2379 is nothing the project wants on a build machine.
	if printf '%s\n' "${missing[@]}" | grep -qx etcd-server && command -v systemctl >/dev/null; then
		systemctl disable etcd.service >/dev/null 2>&1 || true
	fi
fi

# Every tool of the list is there now; a wrong package in the list, or a
# tool the machine was supposed to bring (Go, kubectl), fails here, named.
require_tools "${tools[@]}"

go mod download
