# shellcheck shell=bash
# Sourced by the project's scripts: the shell side of package hosttools.
#
#   require_tools TOOL...
#
# Returns when every TOOL is listed in hosttools/tools.list and installed.
# Otherwise it names each that is not, with its Debian package, and exits
# 1: a tool the list does not name is refused on every machine, so a
# script cannot come to depend on what one machine happens to have.
_hosttools_list="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tools.list"

require_tools() {
	local tool pkg problems=()
	for tool in "$@"; do
		pkg=$(awk -v t="$tool" '$1 !~ /^#/ && $1 == t {print $2; exit}' "$_hosttools_list")
		if [ -z "$pkg" ]; then
			problems+=("$tool is not in hosttools/tools.list (add it there with its Debian package)")
		elif [[ $tool == /* ]] && [ ! -e "$tool" ] || [[ $tool != /* ]] && ! command -v "$tool" >/dev/null 2>&1; then
			if [ "$pkg" = - ]; then
				problems+=("$tool is not installed (it comes with the machine; see hosttools/tools.list)")
			else
				problems+=("$tool is not installed (Debian package $pkg; run make deps)")
			fi
		fi
	done
	[ ${#problems[@]} -eq 0 ] && return 0
	for tool in "${problems[@]}"; do
		echo "$(basename "$0"): $tool" >&2
	done
	exit 1
}
