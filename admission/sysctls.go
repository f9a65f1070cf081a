package admission

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// ReasonSysctlForbidden is upstream's reason for a pod refused for its
// sysctls.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are upstream kubelet's safe sysctls: namespaced, and without
// effect on other pods. Some are namespaced only from a kernel version on.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
	{"net.ipv4.tcp_slow_start_after_idle", "4.15"},
	{"net.ipv4.tcp_notsent_lowat", "4.6"},
}

// SafeSysctls lists the safe sysctls the kernel (nil: unknown, only those
// safe on every kernel) namespaces.
func SafeSysctls(kernel *version.Version) []string {
	var out []string
	for _, s := range safeSysctls {
		if s.kernel == "" || (kernel != nil && kernel.AtLeast(version.MustParseGeneric(s.kernel))) {
			out = append(out, s.name)
		}
	}
	return out
}

// sysctlPattern is upstream's syntax of a sysctl name or prefix pattern
// (dots or slashes between segments, an optional trailing *).
var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?\*?$`)

const maxSysctlLen = 253

// sysctlAllowlist admits the sysctls it lists (names, or prefixes from
// patterns ending in *), all known to be namespaced by the kernel.
type sysctlAllowlist struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// Sysctls returns upstream's sysctl admit handler: a pod may set the safe
// sysctls and those allowed (upstream's --allowed-unsafe-sysctls, names or
// patterns ending in *), but no net.* sysctl with the host's network, no
// IPC one with the host's IPC namespace, no user one with the host's user
// namespace. A pattern that is malformed or not namespaced is an error.
func Sysctls(safe, allowedUnsafe []string) (Handler, error) {
	w := &sysctlAllowlist{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(append([]string{}, safe...), allowedUnsafe...) {
		if len(p) > maxSysctlLen || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", p, maxSysctlLen, sysctlPattern)
		}
		ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if prefixed {
			w.prefixes[nameOrPrefix] = ns
		} else {
			w.names[nameOrPrefix] = ns
		}
	}
	return w, nil
}

// Admit refuses the pod at its first sysctl not allowed.
func (w *sysctlAllowlist) Admit(a Attributes) Result {
	sc := a.Pod.Spec.SecurityContext
	if sc == nil {
		return Admitted
	}
	spec := a.Pod.Spec
	hostUsers := spec.HostUsers == nil || *spec.HostUsers // the default shares the host's
	for _, s := range sc.Sysctls {
		if err := w.check(s.Name, spec.HostNetwork, spec.HostIPC, hostUsers); err != nil {
			return Result{Reason: ReasonSysctlForbidden, Message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return Admitted
}

func (w *sysctlAllowlist) check(name string, hostNet, hostIPC, hostUsers bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, found := w.names[name]
	if !found {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) ||
		(ns == utilsysctl.UserNamespace && hostUsers) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
