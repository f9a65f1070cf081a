package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
)

// TestContainerSpecSeccomp: the container's seccompProfile (else the
// pod's) is applied or refused, never ignored: RuntimeDefault is the
// runtime's default profile for the spec, Localhost a profile below the
// node's directory, Unconfined and none leave the container unconfined,
// and a privileged container is unconfined whatever it asks.
func TestContainerSpecSeccomp(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"profiles/audit.json": `{"defaultAction":"SCMP_ACT_LOG","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}`,
		"broken.json":         `{"defaultAction":`,
		"empty.json":          `{}`,
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var sawCaps []string
	def := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
	cfgFor := func(pod *corev1.Pod) ContainerSpecConfig {
		cfg := containerCfg(pod)
		cfg.Seccomp = SeccompConfig{ProfileRoot: root, RuntimeDefault: func(s *specs.Spec) *specs.LinuxSeccomp {
			sawCaps = s.Process.Capabilities.Bounding
			return def
		}}
		return cfg
	}
	localhost := func(p string) *corev1.SeccompProfile {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
	}
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	for _, tc := range []struct {
		name          string
		pod, ctr      *corev1.SeccompProfile
		privileged    bool
		wantAction    specs.LinuxSeccompAction // "" for none
		wantErrSubstr string
	}{
		{name: "none"},
		{name: "pod RuntimeDefault", pod: runtimeDefault, wantAction: specs.ActErrno},
		{name: "container RuntimeDefault", ctr: runtimeDefault, wantAction: specs.ActErrno},
		{name: "container Unconfined over the pod's RuntimeDefault", pod: runtimeDefault, ctr: unconfined},
		{name: "container Localhost over the pod's Unconfined", pod: unconfined, ctr: localhost("profiles/audit.json"), wantAction: specs.ActLog},
		{name: "privileged", ctr: runtimeDefault, privileged: true},
		{name: "missing profile", ctr: localhost("profiles/none.json"), wantErrSubstr: "no such file"},
		{name: "outside the root", ctr: localhost("../etc/passwd"), wantErrSubstr: "below the node's seccomp directory"},
		{name: "not JSON", ctr: localhost("broken.json"), wantErrSubstr: "decode"},
		{name: "no defaultAction", ctr: localhost("empty.json"), wantErrSubstr: "no defaultAction"},
		{name: "unknown type", ctr: &corev1.SeccompProfile{Type: "Strict"}, wantErrSubstr: `type "Strict" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := basePod()
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: tc.pod}
			pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: tc.ctr, Privileged: ptr(tc.privileged)}
			sawCaps = nil
			s, err := ContainerSpec(cfgFor(pod))
			if tc.wantErrSubstr != "" {
				if !errors.Is(err, ErrSeccompProfile) || !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("err = %v, want ErrSeccompProfile with %q", err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantAction == "" && s.Linux.Seccomp != nil:
				t.Fatalf("seccomp %+v, want none", s.Linux.Seccomp)
			case tc.wantAction != "" && (s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != tc.wantAction):
				t.Fatalf("seccomp %+v, want default action %s", s.Linux.Seccomp, tc.wantAction)
			}
			if tc.wantAction == specs.ActErrno && len(sawCaps) == 0 {
				t.Error("the runtime's default profile was built before the spec's capabilities")
			}
		})
	}
	// --seccomp-default: no profile means RuntimeDefault; Unconfined stays.
	for prof, want := range map[*corev1.SeccompProfile]bool{nil: true, unconfined: false} {
		pod := basePod()
		pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: prof}
		cfg := cfgFor(pod)
		cfg.Seccomp.DefaultToRuntimeDefault = true
		s, err := ContainerSpec(cfg)
		if err != nil || (s.Linux.Seccomp != nil) != want {
			t.Errorf("seccomp-default with %v: %v, seccomp %+v", prof, err, s.Linux.Seccomp)
		}
	}
	// Without a default profile RuntimeDefault is refused, not ignored.
	pod := basePod()
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: runtimeDefault}
	if _, err := ContainerSpec(containerCfg(pod)); !errors.Is(err, ErrSeccompProfile) {
		t.Fatalf("RuntimeDefault without a default profile: %v", err)
	}
}

func TestContainerSpecUnsupportedSecurity(t *testing.T) {
	for name, mutate := range map[string]func(*corev1.Pod){
		"pod AppArmor RuntimeDefault": func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		},
		"container AppArmor Localhost": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("x")}}
		},
		"procMount Unmasked": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr(corev1.UnmaskedProcMount)}
		},
	} {
		pod := basePod()
		mutate(pod)
		if _, err := ContainerSpec(containerCfg(pod)); !errors.Is(err, ErrUnsupportedSecurity) {
			t.Errorf("%s: %v, want ErrUnsupportedSecurity", name, err)
		}
	}
	pod := basePod()
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, ProcMount: ptr(corev1.DefaultProcMount)}
	if _, err := ContainerSpec(containerCfg(pod)); err != nil {
		t.Errorf("Unconfined AppArmor and the default procMount: %v", err)
	}
}

// TestSandboxSpecSeccomp: the pause container gets the pod-level profile
// (not a container's), as upstream's kubelet asks of the runtime.
func TestSandboxSpecSeccomp(t *testing.T) {
	pod := basePod()
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	def := func(*specs.Spec) *specs.LinuxSeccomp { return &specs.LinuxSeccomp{DefaultAction: specs.ActErrno} }
	cfg := SandboxSpecConfig{Pod: pod, Image: pauseImage(), Seccomp: SeccompConfig{RuntimeDefault: def}}
	s, err := SandboxSpec(cfg)
	if err != nil || s.Linux.Seccomp != nil {
		t.Fatalf("container-level profile only: %v, seccomp %+v; want none on the sandbox", err, s.Linux.Seccomp)
	}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if s, err = SandboxSpec(cfg); err != nil || s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Fatalf("pod-level RuntimeDefault: %v, seccomp %+v", err, s.Linux.Seccomp)
	}
	missing := "none.json"
	pod.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &missing}
	cfg.Seccomp.ProfileRoot = t.TempDir()
	if _, err := SandboxSpec(cfg); !errors.Is(err, ErrSeccompProfile) {
		t.Fatalf("missing pod-level Localhost profile: %v", err)
	}
}
