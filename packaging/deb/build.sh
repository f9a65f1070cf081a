#!/usr/bin/env bash
# Builds the nodelet .deb: `make deb` runs it, `make deb VERSION=0.1.1`
# sets the version (default: packaging/deb/version.sh, from git describe).
# Output: $OUT/nodelet_<version>_amd64.deb (OUT defaults to _output/deb).
#
# Everything the package holds is staged in $OUT/stage and packed by nfpm
# (packaging/nfpm.yaml), run from the Go module proxy at a pinned version:
# nothing needs to be installed beyond Go.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
NFPM=${NFPM:-github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}
OUT=${OUT:-_output/deb}
# Where the units and the /etc/default files come from.
UNIT_DIR=${UNIT_DIR:-packaging/systemd}
DEFAULT_DIR=${DEFAULT_DIR:-packaging/default}
VERSION=${VERSION:-$(packaging/deb/version.sh)}
MAINTAINER=${MAINTAINER:-nodelet maintainers <maintainers@users.noreply.a-seed-607265fc.example>}

die() { echo "deb: $*" >&2; exit 1; }

# A native Debian version: digits first, then [A-Za-z0-9.+~] (no "-",
# which would start a Debian revision).
[[ $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "VERSION=$VERSION is not a valid Debian version (e.g. 0.1.1 or 0.1.0~git12.gabc1234)"
for f in "$UNIT_DIR/nodelet.service" "$UNIT_DIR/nodelet-controlplane.service" "$DEFAULT_DIR/nodelet" "$DEFAULT_DIR/nodelet-controlplane"; do
	[ -f "$f" ] || die "$f is missing (the units and /etc/default files the package ships)"
done

stage=$OUT/stage
rm -rf "$stage"
mkdir -p "$stage/default"
# Reproducible: file times and the changelog's date come from the commit.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

# Static binaries (no libc dependency, any glibc), stripped; -trimpath
# keeps the build machine's paths out of them; grpcnotrace as the
# Makefile's BUILDTAGS (grpc without golang.org/x/net/trace).
build() { # output package
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -tags grpcnotrace -trimpath -ldflags='-s -w' -o "$stage/$1" "$2"
}
echo "deb: building the binaries (version $VERSION)"
build nodelet ./cmd/nodelet
build nodelet-controlplane ./cmd/controlplane
build nodelet-logger ./cmd/nodelet-logger
build pause ./cmd/pause
"$GO" run ./packaging/deb/pauseimage -binary "$stage/pause" -o "$stage/pause.tar" >/dev/null

cp "$UNIT_DIR/nodelet.service" "$UNIT_DIR/nodelet-controlplane.service" "$stage/"
cp "$DEFAULT_DIR/nodelet" "$DEFAULT_DIR/nodelet-controlplane" "$stage/default/"

for page in nodelet.1 nodelet-controlplane.1; do
	gzip -9n <"packaging/deb/$page" >"$stage/$page.gz"
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
	printf 'nodelet (%s) unstable; urgency=medium\n\n' "$VERSION"
	printf '  * Build of commit %s.\n\n' "$commit"
	printf ' -- %s  %s\n' "$MAINTAINER" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$stage/changelog.gz"

deb=$OUT/nodelet_${VERSION}_amd64.deb
rm -f "$deb"
NODELET_STAGE=$stage VERSION=$VERSION MAINTAINER=$MAINTAINER \
	"$GO" run "$NFPM" package --config packaging/nfpm.yaml --packager deb --target "$deb" >/dev/null
echo "deb: $deb"
