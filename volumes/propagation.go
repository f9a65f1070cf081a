package volumes

import (
	"fmt"
	"os"
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
//
// Unlike the kubelet's at start, the bind may come when other pods'
// volumes are mounted below path already: the recursive bind copies them,
// and the originals, hidden under the bind where no unmount by path
// reaches them, are detached through a descriptor of path opened before
// the bind, so each volume stays mounted once, where its teardown finds
// it.
func ensureShared(path string) error {
	shared, parent, err := sharedMount(path)
	if err != nil || shared {
		return err
	}
	if parent.Mountpoint != path {
		if err := bindOntoItself(path, parent.ID); err != nil {
			return err
		}
	}
	if err := unix.Mount("", path, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s rshared: %w", path, err)
	}
	return nil
}

// bindOntoItself bind-mounts path recursively onto itself and detaches
// the mounts below path on the mount parentID that the bind hides.
func bindOntoItself(path string, parentID int) error {
	below, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer below.Close()
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", path, err)
	}
	hidden, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Parent != parentID || !strings.HasPrefix(m.Mountpoint, path+"/"), false
	})
	if err != nil {
		return fmt.Errorf("read mounts below %s: %w", path, err)
	}
	for _, m := range hidden {
		hiddenPath := fmt.Sprintf("/proc/self/fd/%d/%s", below.Fd(), strings.TrimPrefix(m.Mountpoint, path+"/"))
		if err := unix.Unmount(hiddenPath, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach %s, hidden under the bind of %s: %w", m.Mountpoint, path, err)
		}
	}
	return nil
}

// sharedMount tells whether the mount holding path is shared, and which
// mount that is.
func sharedMount(path string) (bool, *mountinfo.Info, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(path))
	if err != nil {
		return false, nil, fmt.Errorf("read mounts of %s: %w", path, err)
	}
	var best *mountinfo.Info
	for _, m := range mounts {
		if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
			best = m
		}
	}
	if best == nil {
		return false, nil, fmt.Errorf("no mount holds %s", path)
	}
	return strings.Contains(best.Optional, "shared:"), best, nil
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
