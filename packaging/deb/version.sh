#!/bin/sh
# Prints the package version for the current checkout, valid for Debian
# and ordered the way releases are:
#   tag v0.2.0 on HEAD             -> 0.2.0
#   5 commits after tag v0.2.0     -> 0.2.0+git5.gabc1234   (after 0.2.0)
#   no tag (BASE_VERSION 0.1.0)    -> 0.1.0~git109.gabc1234 (before 0.1.0)
#   uncommitted changes            -> ... .dirty appended
# The commit count keeps untagged builds ordered (dpkg upgrades from an
# older build to a newer one). Override it all with `make deb VERSION=...`.
set -eu
base=${BASE_VERSION:-0.1.0}
cd "$(dirname "$0")/../.."
if ! desc=$(git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null); then
	echo "$base"
	exit 0
fi
dirty=
case $desc in *-dirty) dirty=.dirty desc=${desc%-dirty} ;; esac
case $desc in
v[0-9]*-[0-9]*-g[0-9a-f]*) # v0.2.0-5-gabc1234
	sha=${desc##*-g}
	rest=${desc%-g*}
	count=${rest##*-}
	tag=${rest%-*}
	v="${tag#v}+git$count.g$sha" ;;
v[0-9]*) v=${desc#v} ;;
*) v="$base~git$(git rev-list --count HEAD).g$desc" ;;
esac
# Debian allows [A-Za-z0-9.+~] in a version without revision; a tag like
# v1.0.0-rc.1 becomes 1.0.0~rc.1 (before 1.0.0).
printf '%s%s\n' "$v" "$dirty" | sed 's/-/~/g; s/[^A-Za-z0-9.+~]//g'
