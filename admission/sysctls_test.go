package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func TestSafeSysctlsByKernel(t *testing.T) {
	old := SafeSysctls(version.MustParseGeneric("4.4"))
	if strings.Contains(strings.Join(old, ","), "tcp_keepalive_time") || !strings.Contains(strings.Join(old, ","), "ip_local_reserved_ports") {
		t.Errorf("safe on 4.4: %v", old)
	}
	if n := len(SafeSysctls(version.MustParseGeneric("6.18.0"))); n != len(safeSysctls) {
		t.Errorf("safe on 6.18: %d, want all %d", n, len(safeSysctls))
	}
	if n := len(SafeSysctls(nil)); n != 5 {
		t.Errorf("safe on an unknown kernel: %d, want the 5 without a kernel requirement", n)
	}
}

func TestSysctlsAdmit(t *testing.T) {
	h, err := Sysctls(SafeSysctls(nil), []string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(hostNet, hostIPC bool, names ...string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &corev1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want string // "" admits; else a part of the message
	}{
		{"none", &corev1.Pod{}, ""},
		{"safe", pod(false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), ""},
		{"safe with slashes", pod(false, false, "net/ipv4/tcp_syncookies"), ""},
		{"allowed unsafe by name", pod(false, false, "net.core.somaxconn"), ""},
		{"allowed unsafe by prefix", pod(false, false, "kernel.msgmax"), ""},
		{"unsafe", pod(false, false, "kernel.shm_rmid_forced", "kernel.sem"), `forbidden sysctl: "kernel.sem" not allowlisted`},
		{"net with the host's network", pod(true, false, "net.ipv4.tcp_syncookies"), `"net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
		{"ipc with the host's IPC", pod(false, true, "kernel.msgmax"), `"kernel.msgmax" not allowed with host IPC enabled`},
	} {
		r := h.Admit(Attributes{Pod: tt.pod})
		switch {
		case tt.want == "" && !r.Admit:
			t.Errorf("%s: refused: %s", tt.name, r.Message)
		case tt.want != "" && (r.Admit || r.Reason != ReasonSysctlForbidden || !strings.Contains(r.Message, tt.want)):
			t.Errorf("%s: %+v, want SysctlForbidden with %q", tt.name, r, tt.want)
		}
	}
}

func TestSysctlsRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{"vm.swappiness", "kernel.*.x", "Net.core", "net..core"} {
		if _, err := Sysctls(nil, []string{p}); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}
