package runtime

// This file holds what the sandbox and container OCI specs share: the image
// configuration, the default capability set, mounts, masked and read-only
// paths as containerd's CRI plugin sets them, and small helpers. Building a
// spec is pure: no file is read and no syscall made; the caller resolves
// paths (volumes, /etc/hosts, the sandbox's /dev/shm, ...) beforehand.

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodelet/nodelet/cgroups"
)

// OCIVersion is the ociVersion of the specs the nodelet writes: the
// runtime-spec version the node's OCI runtimes implement, not the Go
// module's (1.3.0), which runc 1.1 ignores but crun 1.8 refuses ("unknown
// version specified"). Nothing in the specs uses a field added after 1.1.
const OCIVersion = "1.1.0"

// ErrNoCommand is returned when neither the pod spec nor the image says what
// to run.
var ErrNoCommand = errors.New("runtime: no command specified")

// ErrRunAsNonRoot is returned when runAsNonRoot is set but the container
// would run as root (or as a user that cannot be verified to be non-root).
var ErrRunAsNonRoot = errors.New("runtime: runAsNonRoot violated")

// ImageConfig is the part of an image's configuration that shapes a
// container: the OCI image config's User, Env, Entrypoint, Cmd, WorkingDir.
type ImageConfig struct {
	User       string
	Env        []string
	Entrypoint []string
	Cmd        []string
	WorkingDir string
}

// defaultPath is the PATH a container gets when neither the image nor the
// pod sets one (containerd's default).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultCapabilities is containerd's (and Docker's) default capability set
// for unprivileged containers.
func DefaultCapabilities() []string {
	return []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
		"CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
		"CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	}
}

// AllCapabilities lists every capability the kernel knows (up to
// CAP_CHECKPOINT_RESTORE, Linux 5.9), in kernel order: what a privileged
// container and capabilities.add ["ALL"] get.
func AllCapabilities() []string {
	return []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
		"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
		"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
		"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
		"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
		"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
		"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
		"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
		"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
		"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
		"CAP_CHECKPOINT_RESTORE",
	}
}

// defaultMaskedPaths and defaultReadonlyPaths are containerd's defaults.
func defaultMaskedPaths() []string {
	return []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/sys/firmware", "/sys/devices/virtual/powercap",
		"/proc/scsi",
	}
}

func defaultReadonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// defaultMounts are containerd's default Unix mounts without /run (the CRI
// plugin removes it) plus /sys/fs/cgroup, read-only unless privileged.
// /dev/shm is a private tmpfs here; callers replace it with the sandbox's.
func defaultMounts(privileged bool) []specs.Mount {
	sysOpt := "ro"
	if privileged {
		sysOpt = "rw"
	}
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", sysOpt}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", sysOpt}},
	}
}

// bindMount is a CRI-style bind mount: rbind, a propagation mode, ro or rw.
func bindMount(dst, src string, readOnly bool, propagation string) specs.Mount {
	if propagation == "" {
		propagation = "rprivate"
	}
	rw := "rw"
	if readOnly {
		rw = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", propagation, rw}}
}

// mergeMounts drops the default mounts that extra mounts override (same
// destination, or anything under /dev when /dev itself is mounted, as
// containerd does) and returns defaults followed by extra, the extra mounts
// ordered by path depth so that parents are mounted before children.
func mergeMounts(defaults, extra []specs.Mount) []specs.Mount {
	over := map[string]bool{}
	for _, m := range extra {
		over[path.Clean(m.Destination)] = true
	}
	out := make([]specs.Mount, 0, len(defaults)+len(extra))
	for _, m := range defaults {
		dst := path.Clean(m.Destination)
		if over[dst] || (over["/dev"] && strings.HasPrefix(dst, "/dev/")) {
			continue
		}
		out = append(out, m)
	}
	sorted := append([]specs.Mount(nil), extra...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return mountDepth(sorted[i].Destination) < mountDepth(sorted[j].Destination)
	})
	return append(out, sorted...)
}

func mountDepth(p string) int {
	p = path.Clean(p)
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// processArgs applies the image entrypoint rules as containerd does: a
// command replaces the ENTRYPOINT and drops the CMD; args replace the CMD.
func processArgs(command, args []string, img ImageConfig) ([]string, error) {
	if len(command) == 0 {
		if len(args) == 0 {
			args = append([]string(nil), img.Cmd...)
		}
		if !(len(img.Entrypoint) == 1 && img.Entrypoint[0] == "") {
			command = append([]string(nil), img.Entrypoint...)
		}
	}
	if len(command) == 0 && len(args) == 0 {
		return nil, ErrNoCommand
	}
	return append(append([]string(nil), command...), args...), nil
}

// mergeEnv returns base with every entry of over applied in order: an entry
// replaces the base entry of the same name, or is appended.
func mergeEnv(base []string, over ...[]string) []string {
	out := append([]string(nil), base...)
	index := map[string]int{}
	for i, kv := range out {
		index[envName(kv)] = i
	}
	for _, list := range over {
		for _, kv := range list {
			name := envName(kv)
			if i, ok := index[name]; ok {
				out[i] = kv
				continue
			}
			index[name] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func envName(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}

// parseImageUser splits an image config User ("uid", "uid:gid", "name",
// "name:group") into a numeric uid (nil when not numeric), the user name
// (when not numeric) and a numeric gid (nil when absent or not numeric).
func parseImageUser(user string) (uid *int64, name string, gid *int64) {
	u, g, _ := strings.Cut(user, ":")
	if n, err := strconv.ParseInt(u, 10, 64); err == nil {
		uid = &n
	} else {
		name = u
	}
	if n, err := strconv.ParseInt(g, 10, 64); err == nil {
		gid = &n
	}
	return uid, name, gid
}

// clampOOMScoreAdj keeps v at or above floor: the machine may forbid
// lowering the score below the nodelet's own (see ENVIRONMENT.md), so a
// value under floor is raised to it rather than failing the container, as
// containerd's restrict_oom_score_adj does.
func clampOOMScoreAdj(v, floor int) int { return cgroups.ClampOOMScoreAdj(v, floor) }

// namespacePaths of the sandbox's (pause) process.
func nsPath(pid uint32, ns string) string {
	return fmt.Sprintf("/proc/%d/ns/%s", pid, ns)
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }
