#!/usr/bin/env bash
# Installs what the build and the tests need on a Debian 12 machine (as root),
# and checks what cannot be installed from here. Idempotent.
set -euo pipefail

# containerd, runc and the CNI plugins run the nodelet's pods; busybox-static
# and nginx-light are what the test images are built from; docker-registry
# and apache2-utils (htpasswd) give the image pull tests a registry of their
# own on 127.0.0.1 (started by the tests, never as a service).
# lintian, ruby (ruby -c on the Vagrantfile), shellcheck and systemd
# (systemd-analyze verify on the units) are what
# `make packaging-check` and the unit tests check the packaging with.
# qemu-system-x86, qemu-utils, debootstrap and openssh-client run the VM lab
# (make vm-lab: Debian guests under QEMU, reached with ssh).
packages=(ca-certificates git make iproute2 iptables containerd runc containernetworking-plugins busybox-static nginx-light docker-registry apache2-utils
	lintian ruby shellcheck systemd
	qemu-system-x86 qemu-utils debootstrap openssh-client)
missing=()
for pkg in "${packages[@]}"; do
	dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	# Install only: no package may start a service (nginx, containerd) on this host.
	policy=/usr/sbin/policy-rc.d
	created_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' > "$policy"
		chmod +x "$policy"
		created_policy=1
		trap 'rm -f "$policy"' EXIT # also when apt-get fails
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
	if [ -n "$created_policy" ]; then rm -f "$policy"; fi
fi

command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl), found none on PATH" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "deps: kubectl (v1.32) is required by the end-to-end tests, found none on PATH" >&2; exit 1; }

go mod download
