#!/usr/bin/env bash
# Installs what the build and the tests need on a Debian 12 machine (as root),
# and checks what cannot be installed from here. Idempotent.
set -euo pipefail

need_apt=()
for pkg in ca-certificates git make; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need_apt[@]}"
fi

command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl), found none on PATH" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "deps: kubectl (v1.32) is required by the end-to-end tests, found none on PATH" >&2; exit 1; }

go mod download
