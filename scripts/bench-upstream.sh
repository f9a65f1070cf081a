#!/usr/bin/env bash
# Builds upstream Kubernetes from the Go module proxy into a cache outside
# the repository, then runs the workload benchmarks against it (the ones
# docs/benchmarks.md records beside the nodelet's). Not part of make test
# or make bench: the first build takes the better part of an hour on
# 2 cores.
#
#   scripts/bench-upstream.sh build     build what is missing, print the bin dir
#   scripts/bench-upstream.sh run [go test -bench regexp] [extra go test args]
#
# What is built (CGO_ENABLED=0, -trimpath, -s -w), each once:
#   kube-apiserver, kube-controller-manager, kube-scheduler from
#     k8s.io/kubernetes v1.37.2 (its staging modules replaced by v0.37.2);
#   etcd from go.etcd.io/etcd/server/v3 v3.7.0, the etcd that 1.37 names
#     in build/dependencies.yaml (Debian's etcd-server is 3.4);
#   kubelet from k8s.io/kubernetes v1.34.4 (staging at v0.34.4): the last
#     kubelet that runs on the cgroup v1 hosts here (failCgroupV1: false),
#     within the version skew a 1.37 API server allows.
#
# The cache is $NODELET_UPSTREAM_CACHE (default /var/cache/nodelet-upstream);
# binaries land in its bin/. `run` puts that bin/ first on PATH and sets
# NODELET_UPSTREAM_BIN, which the benchmarks in test/e2e/upstream_*_test.go
# need (they are skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache=${NODELET_UPSTREAM_CACHE:-/var/cache/nodelet-upstream}
bin=$cache/bin

cp_version=v1.37.2   # kube-apiserver, kube-controller-manager, kube-scheduler
etcd_version=v3.7.0  # go.etcd.io/etcd/server/v3
kubelet_version=v1.34.4

# module DIR K8S_VERSION EXTRA_REQUIRE...: a throwaway module in DIR that
# requires k8s.io/kubernetes at K8S_VERSION with each of the staging modules
# its go.mod replaces by ./staging/src/... mapped to the matching v0.x.y.
module() {
	local dir=$1 version=$2
	shift 2
	local staging=v0.${version#v1.}
	mkdir -p "$dir"
	local gomod
	gomod=$(cd "$dir" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
	{
		echo "module nodelet-upstream-build"
		echo
		echo "go $(go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/')"
		echo
		echo "require k8s.io/kubernetes $version"
		for req in "$@"; do echo "require $req"; done
		echo
		echo "replace ("
		awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " " v}' "$gomod"
		echo ")"
	} >"$dir/go.mod"
}

# build DIR VERSION OUT PACKAGE...: go build the packages of DIR's module
# to OUT (bin/ for several), stamped with VERSION as upstream's release
# builds are (the API server derives its emulation version from it).
build() {
	local dir=$1 version=$2 out=$3
	shift 3
	mkdir -p "$bin"
	(cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitVersion=$version" \
		-o "$out" "$@")
}

cmd_build() {
	if [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/kube-controller-manager" ] ||
		[ ! -x "$bin/kube-scheduler" ] || [ ! -x "$bin/etcd" ]; then
		echo "bench-upstream: building kube-apiserver, kube-controller-manager, kube-scheduler $cp_version and etcd $etcd_version into $bin" >&2
		module "$cache/src/controlplane-$cp_version" "$cp_version" "go.etcd.io/etcd/server/v3 $etcd_version"
		build "$cache/src/controlplane-$cp_version" "$cp_version" "$bin/" k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
		build "$cache/src/controlplane-$cp_version" "$cp_version" "$bin/etcd" go.etcd.io/etcd/server/v3
	fi
	if [ ! -x "$bin/kubelet" ]; then
		echo "bench-upstream: building kubelet $kubelet_version into $bin" >&2
		module "$cache/src/kubelet-$kubelet_version" "$kubelet_version"
		build "$cache/src/kubelet-$kubelet_version" "$kubelet_version" "$bin/" k8s.io/kubernetes/cmd/kubelet
	fi
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		echo "$b: $("$bin/$b" --version)" >&2
	done
	echo "etcd: $("$bin/etcd" --version | head -1)" >&2
	echo "$bin"
}

cmd_run() {
	local pattern=${1:-Upstream}
	shift || true
	cmd_build >/dev/null
	export PATH="$bin:$PATH" NODELET_UPSTREAM_BIN=$bin
	cd "$repo"
	go test -run '^$' -bench "$pattern" -benchtime 1x -timeout 60m "$@" ./test/e2e/
}

case ${1:-} in
build) cmd_build ;;
run)
	shift
	cmd_run "$@"
	;;
*)
	echo "usage: $0 build | run [BENCH_REGEXP] [GO_TEST_ARGS...]" >&2
	exit 2
	;;
esac
