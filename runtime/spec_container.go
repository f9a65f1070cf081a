package runtime

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ContainerSpecConfig is everything an app or init container's spec
// depends on. Paths are host paths the caller has already prepared.
type ContainerSpecConfig struct {
	Pod       *corev1.Pod
	Container *corev1.Container
	Image     ImageConfig
	// RootfsPath is spec.root.path ("rootfs" when empty).
	RootfsPath string
	// SandboxPID is the pause process whose namespaces the container joins.
	SandboxPID uint32
	// TargetPID, when set, is the process of the container whose PID
	// namespace an ephemeral container joins (targetContainerName).
	TargetPID   uint32
	CgroupsPath string
	Env         EnvContext
	// Volumes maps a volume name to its prepared host directory (or file).
	Volumes map[string]VolumeSource
	// SubPaths are the host paths of the volumeMounts with a subPath (or a
	// subPathExpr that expands to one), by index in the container's
	// VolumeMounts: resolved inside their volume and created by the caller
	// (volumes.Manager.PrepareSubPath), never joined here.
	SubPaths map[int]string
	// Hostname is set as $HOSTNAME (SandboxHostname, or the node's name for
	// host-network pods); empty sets none.
	Hostname string
	// Files shared by the pod's containers, bind-mounted when not empty.
	HostsPath          string // /etc/hosts (read-write, as the kubelet mounts it)
	ResolvConfPath     string // /etc/resolv.conf
	HostnamePath       string // /etc/hostname
	ShmPath            string // /dev/shm of the sandbox
	TerminationLogPath string // the file behind terminationMessagePath
	// MemoryCapacity of the node, for the oom_score_adj of Burstable pods.
	MemoryCapacity int64
	// OOMScoreAdjFloor: see SandboxSpecConfig.
	OOMScoreAdjFloor int
	// CgroupNamespace gives an unprivileged container its own cgroup
	// namespace (containerd does on cgroup v2).
	CgroupNamespace bool
	// HostCapabilities are the capabilities the host can grant (those of
	// the node agent's process): a privileged container, or capabilities
	// add ALL, gets these, as containerd's WithAllCurrentCapabilities.
	// Nil: AllCapabilities().
	HostCapabilities []string
	// LookupUser resolves a non-numeric image user in the image's
	// /etc/passwd; nil makes such a user an error unless runAsUser is set.
	LookupUser func(name string) (uid, gid uint32, err error)
	// Seccomp applies the container's seccompProfile (EffectiveSeccomp).
	Seccomp SeccompConfig
}

// ContainerSpec builds the OCI spec of an app or init container joining
// its sandbox's network, IPC and UTS namespaces (and PID namespace with
// shareProcessNamespace), as kubelet + containerd's CRI plugin would.
func ContainerSpec(cfg ContainerSpecConfig) (*specs.Spec, error) {
	pod, c := cfg.Pod, cfg.Container
	wrap := func(err error) error {
		return fmt.Errorf("spec of container %s in pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
	}
	env, err := ContainerEnv(pod, c, cfg.Env)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: %w", ErrContainerConfig, err))
	}
	command, cargs := ExpandCommand(c, env)
	args, err := processArgs(command, cargs, cfg.Image)
	if err != nil {
		return nil, wrap(err)
	}
	user, err := containerUser(pod, c, cfg.Image, cfg.LookupUser)
	if err != nil {
		return nil, wrap(err)
	}
	mounts, err := containerMounts(cfg)
	if err != nil {
		return nil, wrap(err)
	}
	var hostEnv []string
	if cfg.Hostname != "" {
		hostEnv = []string{"HOSTNAME=" + cfg.Hostname}
	}
	privileged := isPrivileged(c)
	oom := clampOOMScoreAdj(ContainerOOMScoreAdj(pod, c, cfg.MemoryCapacity), cfg.OOMScoreAdjFloor)
	s := &specs.Spec{
		Version: OCIVersion,
		Root:    &specs.Root{Path: rootfsPath(cfg.RootfsPath), Readonly: readOnlyRootfs(c)},
		Process: &specs.Process{
			Terminal:        c.TTY,
			Args:            args,
			Env:             mergeEnv([]string{defaultPath}, hostEnv, cfg.Image.Env, env),
			Cwd:             workingDir(c.WorkingDir, cfg.Image),
			User:            user,
			Capabilities:    capabilitySet(containerCapabilities(c, hostCapabilities(cfg.HostCapabilities))),
			NoNewPrivileges: noNewPrivileges(c),
			OOMScoreAdj:     &oom,
		},
		Mounts: mergeMounts(defaultMounts(privileged), mounts),
		Linux: &specs.Linux{
			CgroupsPath: cfg.CgroupsPath,
			Namespaces:  containerNamespaces(pod, cfg.SandboxPID, cfg.TargetPID, cfg.CgroupNamespace && !privileged),
			Resources:   ContainerResources(pod, c),
		},
	}
	s.Linux.RootfsPropagation = rootfsPropagation(mounts)
	if err := checkUnsupportedSecurity(pod, c); err != nil {
		return nil, wrap(err)
	}
	if err := applySeccomp(s, EffectiveSeccomp(pod, c), privileged, cfg.Seccomp); err != nil {
		return nil, wrap(err)
	}
	if privileged {
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	} else {
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}
		s.Linux.MaskedPaths = defaultMaskedPaths()
		s.Linux.ReadonlyPaths = defaultReadonlyPaths()
	}
	return s, nil
}

func containerNamespaces(pod *corev1.Pod, pid, target uint32, cgroupNS bool) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{
		{Type: specs.MountNamespace},
		{Type: specs.NetworkNamespace, Path: nsPath(pid, "net")},
		{Type: specs.IPCNamespace, Path: nsPath(pid, "ipc")},
		{Type: specs.UTSNamespace, Path: nsPath(pid, "uts")},
	}
	switch {
	case pod.Spec.HostPID:
		// the host's PID namespace: no entry
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(pid, "pid")})
	case target != 0:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: nsPath(target, "pid")})
	default:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	if cgroupNS {
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	return ns
}

// containerMounts are the volume mounts, then the pod files (/etc/hosts,
// /etc/hostname, /etc/resolv.conf, /dev/shm, the termination log) unless a
// volume already covers their destination.
func containerMounts(cfg ContainerSpecConfig) ([]specs.Mount, error) {
	c := cfg.Container
	var out []specs.Mount
	taken := map[string]bool{}
	for i, vm := range c.VolumeMounts {
		m, err := volumeMount(vm, cfg.Volumes, cfg.SubPaths[i])
		if err != nil {
			return nil, err
		}
		taken[path.Clean(m.Destination)] = true
		out = append(out, m)
	}
	ro := readOnlyRootfs(c)
	files := []struct {
		dst, src string
		ro       bool
	}{
		{"/etc/hosts", cfg.HostsPath, false},
		{"/etc/hostname", cfg.HostnamePath, ro},
		{"/etc/resolv.conf", cfg.ResolvConfPath, ro},
		{"/dev/shm", cfg.ShmPath, false},
		{c.TerminationMessagePath, cfg.TerminationLogPath, false},
	}
	for _, f := range files {
		if f.src == "" || f.dst == "" || taken[path.Clean(f.dst)] {
			continue
		}
		taken[path.Clean(f.dst)] = true
		out = append(out, bindMount(f.dst, f.src, f.ro, ""))
	}
	return out, nil
}

// VolumeSource is a prepared volume: its host path, and whether every
// container must mount it read-only (configMap, secret, ... volumes).
type VolumeSource struct {
	HostPath string
	ReadOnly bool
}

// volumeMount binds one volumeMount: its prepared subPath when it has
// one, else the whole volume; read-only when the mount or the volume is.
func volumeMount(vm corev1.VolumeMount, volumes map[string]VolumeSource, subPath string) (specs.Mount, error) {
	src, ok := volumes[vm.Name]
	if !ok {
		return specs.Mount{}, fmt.Errorf("volumeMount %s: volume not prepared", vm.Name)
	}
	host := src.HostPath
	switch {
	case subPath != "":
		host = subPath
	case vm.SubPath != "":
		return specs.Mount{}, fmt.Errorf("volumeMount %s: subPath %q not prepared", vm.Name, vm.SubPath)
	}
	return bindMount(vm.MountPath, host, vm.ReadOnly || src.ReadOnly, propagation(vm.MountPropagation)), nil
}

// rootfsPropagation is what containerd's CRI sets for a container's root
// when one of its mounts propagates: rshared for a Bidirectional mount
// (else its mounts could not reach the host), rslave for HostToContainer,
// "" otherwise (runc's default).
func rootfsPropagation(mounts []specs.Mount) string {
	out := ""
	for _, m := range mounts {
		switch {
		case slices.Contains(m.Options, "rshared"):
			return "rshared"
		case slices.Contains(m.Options, "rslave"):
			out = "rslave"
		}
	}
	return out
}

func propagation(mode *corev1.MountPropagationMode) string {
	if mode == nil {
		return "rprivate"
	}
	switch *mode {
	case corev1.MountPropagationBidirectional:
		return "rshared"
	case corev1.MountPropagationHostToContainer:
		return "rslave"
	}
	return "rprivate"
}

// effectiveSecurity merges the pod's security context under the
// container's, for the fields the spec uses.
type effectiveSecurity struct {
	runAsUser, runAsGroup *int64
	runAsNonRoot          *bool
}

func securityOf(pod *corev1.Pod, c *corev1.Container) effectiveSecurity {
	var e effectiveSecurity
	if p := pod.Spec.SecurityContext; p != nil {
		e.runAsUser, e.runAsGroup, e.runAsNonRoot = p.RunAsUser, p.RunAsGroup, p.RunAsNonRoot
	}
	if s := c.SecurityContext; s != nil {
		if s.RunAsUser != nil {
			e.runAsUser = s.RunAsUser
		}
		if s.RunAsGroup != nil {
			e.runAsGroup = s.RunAsGroup
		}
		if s.RunAsNonRoot != nil {
			e.runAsNonRoot = s.RunAsNonRoot
		}
	}
	return e
}

// containerUser is runAsUser (else the image user) and runAsGroup (else
// the image's group, else the user's group from LookupUser, else 0), after
// upstream's runAsNonRoot check.
func containerUser(pod *corev1.Pod, c *corev1.Container, img ImageConfig, lookup func(string) (uint32, uint32, error)) (specs.User, error) {
	sec := securityOf(pod, c)
	uid, name, gid := parseImageUser(img.User)
	if img.User == "" {
		uid = i64(0)
	}
	if err := verifyRunAsNonRoot(sec, uid, name); err != nil {
		return specs.User{}, err
	}
	var u specs.User
	switch {
	case sec.runAsUser != nil:
		u.UID = uint32(*sec.runAsUser)
	case uid != nil:
		u.UID = uint32(*uid)
	default:
		if lookup == nil {
			return u, fmt.Errorf("image user %q is not numeric and cannot be resolved", img.User)
		}
		luid, lgid, err := lookup(name)
		if err != nil {
			return u, fmt.Errorf("resolve image user %q: %w", name, err)
		}
		u.UID = luid
		if gid == nil {
			gid = i64(int64(lgid))
		}
	}
	switch {
	case sec.runAsGroup != nil:
		u.GID = uint32(*sec.runAsGroup)
	case gid != nil && sec.runAsUser == nil:
		u.GID = uint32(*gid)
	}
	u.AdditionalGids = additionalGids(u.GID, pod.Spec.SecurityContext)
	return u, nil
}

// verifyRunAsNonRoot is upstream's check: with runAsNonRoot, runAsUser may
// not be 0, and without runAsUser the image user must be numeric and not 0.
func verifyRunAsNonRoot(sec effectiveSecurity, imageUID *int64, imageName string) error {
	if sec.runAsNonRoot == nil || !*sec.runAsNonRoot {
		return nil
	}
	if sec.runAsUser != nil {
		if *sec.runAsUser == 0 {
			return fmt.Errorf("%w: container's runAsUser breaks non-root policy", ErrRunAsNonRoot)
		}
		return nil
	}
	switch {
	case imageUID != nil && *imageUID == 0:
		return fmt.Errorf("%w: container has runAsNonRoot and image will run as root", ErrRunAsNonRoot)
	case imageUID == nil && imageName != "":
		return fmt.Errorf("%w: container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root", ErrRunAsNonRoot, imageName)
	}
	return nil
}

func isPrivileged(c *corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

func readOnlyRootfs(c *corev1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
}

func noNewPrivileges(c *corev1.Container) bool {
	sc := c.SecurityContext
	return sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
}

// containerCapabilities applies capabilities.add and drop over the default
// set as containerd does: "ALL" in add grants every capability, "ALL" in
// drop removes them all, then the named ones are added and dropped.
// Privileged containers get every capability the host has (all).
func containerCapabilities(c *corev1.Container, all []string) []string {
	if isPrivileged(c) {
		return all
	}
	caps := DefaultCapabilities()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		return caps
	}
	set := map[string]bool{}
	for _, name := range caps {
		set[name] = true
	}
	if hasAll(sc.Capabilities.Add) {
		for _, name := range all {
			set[name] = true
		}
	}
	if hasAll(sc.Capabilities.Drop) {
		set = map[string]bool{}
	}
	for _, name := range sc.Capabilities.Add {
		if !strings.EqualFold(string(name), "ALL") {
			set[capName(name)] = true
		}
	}
	for _, name := range sc.Capabilities.Drop {
		delete(set, capName(name))
	}
	out := make([]string, 0, len(set))
	for name := range set {
		out = append(out, name)
	}
	return out
}

func hasAll(caps []corev1.Capability) bool {
	for _, c := range caps {
		if strings.EqualFold(string(c), "ALL") {
			return true
		}
	}
	return false
}

func capName(c corev1.Capability) string {
	name := strings.ToUpper(string(c))
	if !strings.HasPrefix(name, "CAP_") {
		name = "CAP_" + name
	}
	return name
}

// hostCapabilities is caps, or AllCapabilities() when nil.
func hostCapabilities(caps []string) []string {
	if caps == nil {
		return AllCapabilities()
	}
	return caps
}
