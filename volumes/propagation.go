package volumes

import (
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// ensureShared makes path's mount a shared one, so that mounts made below
// it inside a container with Bidirectional propagation reach the host
// (and the host's reach the container). The kubelet makes its whole root
// directory rshared at start for the same reason; the nodelet does it
// only for the volumes that ask (a CSI driver's plugin and pods
// directories), and leaves it in place when they go, as the kubelet
// does. A path already on a shared mount is left alone; otherwise it is
// bind-mounted onto itself and that mount made rshared.
func ensureShared(path string) error {
	shared, point, err := sharedMount(path)
	if err != nil || shared {
		return err
	}
	if point != path {
		if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto itself: %w", path, err)
		}
	}
	if err := unix.Mount("", path, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s rshared: %w", path, err)
	}
	return nil
}

// sharedMount tells whether the mount holding path is shared, and where
// that mount is.
func sharedMount(path string) (bool, string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(path))
	if err != nil {
		return false, "", fmt.Errorf("read mounts of %s: %w", path, err)
	}
	var best *mountinfo.Info
	for _, m := range mounts {
		if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
			best = m
		}
	}
	if best == nil {
		return false, "", fmt.Errorf("no mount holds %s", path)
	}
	return strings.Contains(best.Optional, "shared:"), best.Mountpoint, nil
}

// bidirectional reports whether some container of pod mounts the volume
// name with Bidirectional propagation.
func bidirectional(pod *corev1.Pod, name string) bool {
	found := false
	check := func(mounts []corev1.VolumeMount) {
		for _, vm := range mounts {
			if vm.Name == name && vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationBidirectional {
				found = true
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		check(c.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers {
		check(c.VolumeMounts)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		check(c.VolumeMounts)
	}
	return found
}
