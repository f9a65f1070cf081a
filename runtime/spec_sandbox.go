package runtime

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// SandboxSpecConfig is everything the pause container's spec depends on.
type SandboxSpecConfig struct {
	Pod   *corev1.Pod
	Image ImageConfig // the pause image's configuration
	// RootfsPath is spec.root.path ("rootfs", relative to the bundle, when
	// empty).
	RootfsPath string
	// NetNSPath is the network namespace prepared for the pod; ignored for
	// host-network pods.
	NetNSPath string
	// CgroupsPath is the cgroup of the pod (cgroupfs path or systemd
	// "slice:prefix:name").
	CgroupsPath string
	// ShmPath is the host tmpfs shared as /dev/shm by the pod's containers;
	// empty leaves the pause container a private tmpfs.
	ShmPath string
	// ClusterDomain makes the hostname fully qualified under
	// setHostnameAsFQDN.
	ClusterDomain string
	// OOMScoreAdjFloor is the lowest oom_score_adj this machine lets the
	// nodelet set (its own, read from /proc/self/oom_score_adj by the
	// caller); upstream's -998 is raised to it. The zero value clamps to 0.
	OOMScoreAdjFloor int
	// Seccomp applies the pod-level seccompProfile to the pause
	// container, as upstream's kubelet asks of the runtime.
	Seccomp SeccompConfig
}

// SandboxSpec builds the OCI spec of a pod's pause container, as
// containerd's CRI plugin does: its own network (the given namespace),
// IPC, UTS, mount and PID namespaces (host ones for hostNetwork, hostIPC,
// hostPID), the pod's hostname, a read-only rootfs, the default
// capabilities, 2 cpu shares, oom_score_adj -998 clamped to the floor, and
// the pod's namespaced sysctls.
func SandboxSpec(cfg SandboxSpecConfig) (*specs.Spec, error) {
	pod := cfg.Pod
	args, err := processArgs(nil, nil, cfg.Image)
	if err != nil {
		return nil, fmt.Errorf("sandbox spec of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	user, err := sandboxUser(pod, cfg.Image)
	if err != nil {
		return nil, fmt.Errorf("sandbox spec of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	oom := clampOOMScoreAdj(SandboxOOMScoreAdj, cfg.OOMScoreAdjFloor)
	s := &specs.Spec{
		Version: OCIVersion,
		Root:    &specs.Root{Path: rootfsPath(cfg.RootfsPath), Readonly: true},
		Process: &specs.Process{
			Args:            args,
			Env:             mergeEnv([]string{defaultPath}, cfg.Image.Env),
			Cwd:             workingDir("", cfg.Image),
			User:            user,
			Capabilities:    capabilitySet(DefaultCapabilities()),
			NoNewPrivileges: true,
			OOMScoreAdj:     &oom,
		},
		Linux: &specs.Linux{
			CgroupsPath: cfg.CgroupsPath,
			Namespaces:  sandboxNamespaces(pod, cfg.NetNSPath),
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				CPU:     &specs.LinuxCPU{Shares: u64(SandboxCPUShares)},
			},
			MaskedPaths:   defaultMaskedPaths(),
			ReadonlyPaths: defaultReadonlyPaths(),
			Sysctl:        podSysctls(pod),
		},
	}
	if !pod.Spec.HostNetwork {
		if s.Hostname, err = SandboxHostname(pod, cfg.ClusterDomain); err != nil {
			return nil, fmt.Errorf("sandbox spec: %w", err)
		}
	}
	var extra []specs.Mount
	if cfg.ShmPath != "" {
		extra = append(extra, specs.Mount{
			Destination: "/dev/shm", Type: "bind", Source: cfg.ShmPath,
			Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"},
		})
	}
	s.Mounts = mergeMounts(defaultMounts(false), extra)
	var podProfile *corev1.SeccompProfile
	if sc := pod.Spec.SecurityContext; sc != nil {
		podProfile = sc.SeccompProfile
	}
	if err := applySeccomp(s, podProfile, false, cfg.Seccomp); err != nil {
		return nil, fmt.Errorf("sandbox spec of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return s, nil
}

func sandboxNamespaces(pod *corev1.Pod, netns string) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if !pod.Spec.HostNetwork {
		ns = append(ns,
			specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: netns},
			specs.LinuxNamespace{Type: specs.UTSNamespace})
	}
	if !pod.Spec.HostIPC {
		ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace})
	}
	if !pod.Spec.HostPID {
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	return ns
}

// sandboxUser is the pod-level runAsUser/runAsGroup, else the image's
// numeric user, else root; the supplemental groups and fsGroup are added.
func sandboxUser(pod *corev1.Pod, img ImageConfig) (specs.User, error) {
	var u specs.User
	sc := pod.Spec.SecurityContext
	uid, name, gid := parseImageUser(img.User)
	switch {
	case sc != nil && sc.RunAsUser != nil:
		u.UID = uint32(*sc.RunAsUser)
	case uid != nil:
		u.UID = uint32(*uid)
		if gid != nil {
			u.GID = uint32(*gid)
		}
	case name != "":
		return u, fmt.Errorf("pause image user %q is not numeric", img.User)
	}
	if sc != nil && sc.RunAsGroup != nil {
		u.GID = uint32(*sc.RunAsGroup)
	}
	u.AdditionalGids = additionalGids(u.GID, sc)
	return u, nil
}

// additionalGids is the primary group, the pod's supplementalGroups and its
// fsGroup, without duplicates.
func additionalGids(primary uint32, sc *corev1.PodSecurityContext) []uint32 {
	gids := []uint32{primary}
	seen := map[uint32]bool{primary: true}
	add := func(g int64) {
		if !seen[uint32(g)] {
			seen[uint32(g)] = true
			gids = append(gids, uint32(g))
		}
	}
	if sc != nil {
		for _, g := range sc.SupplementalGroups {
			add(g)
		}
		if sc.FSGroup != nil {
			add(*sc.FSGroup)
		}
	}
	return gids
}

func podSysctls(pod *corev1.Pod) map[string]string {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		out[s.Name] = s.Value
	}
	return out
}

// capabilitySet puts caps in the bounding, effective and permitted sets
// (not inheritable, as containerd since CVE-2022-24769).
func capabilitySet(caps []string) *specs.LinuxCapabilities {
	sorted := append([]string(nil), caps...)
	sort.Strings(sorted)
	return &specs.LinuxCapabilities{
		Bounding:  sorted,
		Effective: append([]string(nil), sorted...),
		Permitted: append([]string(nil), sorted...),
	}
}

func rootfsPath(p string) string {
	if p == "" {
		return "rootfs"
	}
	return p
}

func workingDir(dir string, img ImageConfig) string {
	if dir == "" {
		dir = img.WorkingDir
	}
	if dir == "" {
		dir = "/"
	}
	return dir
}
