package cgroups

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Name is a driver-neutral cgroup name: its components from the top of the
// hierarchy, e.g. {"kubepods", "burstable", "pod<uid>"}. Each driver renders
// it its own way (Cgroupfs, Systemd), as upstream's CgroupName does.
type Name []string

const (
	kubepodsComponent   = "kubepods"
	burstableComponent  = "burstable"
	besteffortComponent = "besteffort"
	podPrefix           = "pod"
	sliceSuffix         = ".slice"
)

// ParseRoot reads a --cgroup-root value into a Name. Both spellings are
// accepted: a cgroupfs path ("/", "/nodelet-1", "/a/b") and a systemd slice
// ("node1.slice", "/node1.slice/node1-sub.slice": the last slice names the
// whole chain). "" means "/".
func ParseRoot(root string) Name {
	root = path.Clean("/" + root)
	if root == "/" {
		return nil
	}
	if base := path.Base(root); strings.HasSuffix(base, sliceSuffix) {
		var n Name
		for _, part := range strings.Split(strings.TrimSuffix(base, sliceSuffix), "-") {
			n = append(n, unescapeSystemd(part))
		}
		return n
	}
	return Name(strings.Split(strings.TrimPrefix(root, "/"), "/"))
}

// Child returns n with more components appended (n is not modified).
func (n Name) Child(components ...string) Name {
	out := make(Name, 0, len(n)+len(components))
	out = append(out, n...)
	return append(out, components...)
}

// KubepodsName is the top of the pod tree under root; Guaranteed pods live
// directly in it.
func KubepodsName(root Name) Name {
	return root.Child(kubepodsComponent)
}

// QoSName is the parent cgroup of the pods of one QoS class.
func QoSName(root Name, class corev1.PodQOSClass) Name {
	switch class {
	case corev1.PodQOSBurstable:
		return KubepodsName(root).Child(burstableComponent)
	case corev1.PodQOSBestEffort:
		return KubepodsName(root).Child(besteffortComponent)
	}
	return KubepodsName(root)
}

// PodName is the cgroup of one pod: pod<uid> under its QoS parent.
func PodName(root Name, class corev1.PodQOSClass, uid types.UID) Name {
	return QoSName(root, class).Child(podPrefix + string(uid))
}

// Cgroupfs renders n for the cgroupfs driver: "/kubepods/burstable/pod<uid>",
// relative to the top of each hierarchy.
func (n Name) Cgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// SystemdUnit renders n as the systemd slice unit that holds it:
// "kubepods-burstable-pod<uid>.slice" ("-" inside a component becomes "_",
// since "-" is systemd's nesting separator). The empty name is "-.slice".
func (n Name) SystemdUnit() string {
	if len(n) == 0 {
		return "-" + sliceSuffix
	}
	parts := make([]string, len(n))
	for i, c := range n {
		parts[i] = escapeSystemd(c)
	}
	return strings.Join(parts, "-") + sliceSuffix
}

// Systemd renders n as the path systemd gives the slice:
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice".
func (n Name) Systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for _, c := range n {
		e := escapeSystemd(c)
		b.WriteString("/" + prefix + e + sliceSuffix)
		prefix += e + "-"
	}
	return b.String()
}

// Path renders n for driver d. This is the form the container runtime
// expects as a pod's cgroup parent.
func (n Name) Path(d Driver) string {
	if d == DriverSystemd {
		return n.Systemd()
	}
	return n.Cgroupfs()
}

// systemdParent splits n into the parent slice and the unit name, as the
// systemd cgroup managers of opencontainers/cgroups want them.
func (n Name) systemdParent() (parent, unit string) {
	if len(n) <= 1 {
		return Name(nil).SystemdUnit(), n.SystemdUnit()
	}
	return n[:len(n)-1].SystemdUnit(), n.SystemdUnit()
}

// ContainerCgroupsPath is the OCI linux.cgroupsPath of a container whose
// pod cgroup is podCgroup (as returned by Manager.EnsurePod), spelled the way
// containerd's CRI plugin spells it: a path below the pod for cgroupfs, and
// "slice:prefix:name" for runc's systemd driver.
func ContainerCgroupsPath(d Driver, podCgroup, containerID string) string {
	if d == DriverSystemd {
		return path.Base(podCgroup) + ":cri-containerd:" + containerID
	}
	return path.Join(podCgroup, containerID)
}

// podUIDFromDir reads a pod UID from the directory name of a pod cgroup
// ("pod<uid>" for cgroupfs, "kubepods-burstable-pod<uid_>.slice" for
// systemd). ok is false for anything else (QoS tiers, stray directories).
func podUIDFromDir(d Driver, dir string) (types.UID, bool) {
	if d == DriverSystemd {
		base, ok := strings.CutSuffix(dir, sliceSuffix)
		if !ok {
			return "", false
		}
		if i := strings.LastIndexByte(base, '-'); i >= 0 {
			base = base[i+1:]
		}
		dir = unescapeSystemd(base)
	}
	uid, ok := strings.CutPrefix(dir, podPrefix)
	if !ok || uid == "" {
		return "", false
	}
	return types.UID(uid), true
}

func escapeSystemd(s string) string   { return strings.ReplaceAll(s, "-", "_") }
func unescapeSystemd(s string) string { return strings.ReplaceAll(s, "_", "-") }
