package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
)

// ErrSeccompProfile is a seccompProfile the node cannot apply: an unknown
// type, a Localhost profile that is missing, outside the profile root or
// not a profile. The container is not created (CreateContainerError),
// never run unconfined instead.
var ErrSeccompProfile = errors.New("seccomp profile")

// SeccompConfig is how ContainerSpec applies a container's seccompProfile.
type SeccompConfig struct {
	// ProfileRoot holds Localhost profiles (upstream: ROOT-DIR/seccomp);
	// localhostProfile is relative to it.
	ProfileRoot string
	// RuntimeDefault returns the runtime's default profile for a spec
	// (containerd's contrib/seccomp.DefaultProfile, which allows what the
	// spec's capabilities need); nil refuses RuntimeDefault.
	RuntimeDefault func(*specs.Spec) *specs.LinuxSeccomp
	// DefaultToRuntimeDefault gives RuntimeDefault to a container (and a
	// sandbox) that names no profile, as upstream's --seccomp-default.
	DefaultToRuntimeDefault bool
}

// EffectiveSeccomp is the container's seccompProfile, else the pod's, as
// upstream's kubelet resolves it; nil (and Unconfined) means none, as
// upstream without --seccomp-default.
func EffectiveSeccomp(pod *corev1.Pod, c *corev1.Container) *corev1.SeccompProfile {
	if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		return sc.SeccompProfile
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		return sc.SeccompProfile
	}
	return nil
}

// applySeccomp sets s.Linux.Seccomp for profile p. A privileged container
// runs unconfined whatever its profile, as containerd's CRI plugin.
func applySeccomp(s *specs.Spec, p *corev1.SeccompProfile, privileged bool, cfg SeccompConfig) error {
	if p == nil && cfg.DefaultToRuntimeDefault {
		p = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	if p == nil || privileged {
		return nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeUnconfined:
		return nil
	case corev1.SeccompProfileTypeRuntimeDefault:
		if cfg.RuntimeDefault == nil {
			return fmt.Errorf("%w RuntimeDefault: this runtime has no default profile", ErrSeccompProfile)
		}
		s.Linux.Seccomp = cfg.RuntimeDefault(s)
		return nil
	case corev1.SeccompProfileTypeLocalhost:
		prof, err := LocalhostSeccomp(cfg.ProfileRoot, p.LocalhostProfile)
		if err != nil {
			return err
		}
		s.Linux.Seccomp = prof
		return nil
	default:
		return fmt.Errorf("%w type %q is not supported (RuntimeDefault, Localhost or Unconfined)", ErrSeccompProfile, p.Type)
	}
}

// ErrUnsupportedSecurity is a container security setting the node does
// not enforce (AppArmor, procMount Unmasked): the container is not created
// rather than run with less confinement than it asked for. Admission
// refuses such pods first; this covers ephemeral containers added later.
var ErrUnsupportedSecurity = errors.New("unsupported security setting")

// checkUnsupportedSecurity refuses c's AppArmor profile other than
// Unconfined and procMount Unmasked.
func checkUnsupportedSecurity(pod *corev1.Pod, c *corev1.Container) error {
	profiles := []*corev1.AppArmorProfile{}
	if sc := pod.Spec.SecurityContext; sc != nil {
		profiles = append(profiles, sc.AppArmorProfile)
	}
	sc := c.SecurityContext
	if sc != nil {
		profiles = append(profiles, sc.AppArmorProfile)
	}
	for _, p := range profiles {
		if p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined {
			return fmt.Errorf("%w: AppArmor profile %s: this node does not apply AppArmor profiles", ErrUnsupportedSecurity, p.Type)
		}
	}
	if sc != nil && sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
		return fmt.Errorf("%w: procMount Unmasked is not supported by this node", ErrUnsupportedSecurity)
	}
	return nil
}

// LocalhostSeccomp reads the Localhost profile rel below root: an OCI
// (Docker-format) seccomp profile in JSON, as containerd loads it
// (contrib/seccomp.WithProfile).
func LocalhostSeccomp(root string, rel *string) (*specs.LinuxSeccomp, error) {
	if rel == nil || *rel == "" {
		return nil, fmt.Errorf("%w Localhost: localhostProfile is not set", ErrSeccompProfile)
	}
	if root == "" {
		return nil, fmt.Errorf("%w Localhost %q: the node has no seccomp profile directory", ErrSeccompProfile, *rel)
	}
	if !filepath.IsLocal(*rel) {
		return nil, fmt.Errorf("%w Localhost %q: must be a path below the node's seccomp directory %s", ErrSeccompProfile, *rel, root)
	}
	path := filepath.Join(root, *rel)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w Localhost %q: %w", ErrSeccompProfile, *rel, err)
	}
	var prof specs.LinuxSeccomp
	if err := json.Unmarshal(b, &prof); err != nil {
		return nil, fmt.Errorf("%w Localhost %q: decode %s: %w", ErrSeccompProfile, *rel, path, err)
	}
	if prof.DefaultAction == "" {
		return nil, fmt.Errorf("%w Localhost %q: %s has no defaultAction", ErrSeccompProfile, *rel, path)
	}
	return &prof, nil
}
