package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// The bits a pod's fsGroup adds, as upstream's SetVolumeOwnership: the
// group may read and write every file, and enter every directory, whose
// set-group-ID bit makes new entries inherit the group.
const (
	ownershipRWBits  os.FileMode = 0o660
	ownershipDirBits os.FileMode = 0o110 | os.ModeSetgid
)

// applyFSGroup gives the tree at dir to the pod's fsGroup as upstream does
// for the volumes that support ownership management (emptyDir, local
// PersistentVolumes, CSI volumes by their driver's fsGroupPolicy): every
// entry gets the group, files and directories group read-write, and
// directories group-exec and set-group-ID. Symbolic links get the group
// but no mode (the mode of a link means nothing) and are not followed.
// A nil fsGroup changes nothing. Under policy OnRootMismatch the walk is
// skipped when dir itself already looks done (its group, the bits); the
// default, Always, walks every time it is called: callers call it once
// per volume set-up, not at every sync. Read-only volumes are not passed
// in: their tree cannot be changed.
func applyFSGroup(dir string, fsGroup *int64, policy *corev1.PodFSGroupChangePolicy) error {
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch {
		done, err := ownedByGroup(dir, gid)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return setGroup(path, gid)
	})
	if err != nil {
		return fmt.Errorf("apply fsGroup %d to %s: %w", gid, dir, err)
	}
	return nil
}

// setGroup gives one entry the group and the group's bits.
func setGroup(path string, gid int) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no stat_t for " + path)
	}
	if int(st.Gid) != gid {
		if err := os.Lchown(path, -1, gid); err != nil {
			return err
		}
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	want := wantedMode(fi.Mode())
	if want == fi.Mode() {
		return nil
	}
	return os.Chmod(path, want)
}

// wantedMode is mode with the fsGroup bits added.
func wantedMode(mode os.FileMode) os.FileMode {
	want := mode | ownershipRWBits
	if mode.IsDir() {
		want |= ownershipDirBits
	}
	return want
}

// ownedByGroup reports whether dir already has the group and the bits
// (upstream's requiresPermissionChange, negated).
func ownedByGroup(dir string, gid int) (bool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return false, fmt.Errorf("apply fsGroup %d to %s: %w", gid, dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, fmt.Errorf("apply fsGroup %d to %s: no stat_t", gid, dir)
	}
	return int(st.Gid) == gid && wantedMode(fi.Mode()) == fi.Mode(), nil
}

// podFSGroup returns the pod's fsGroup and fsGroupChangePolicy.
func podFSGroup(pod *corev1.Pod) (*int64, *corev1.PodFSGroupChangePolicy) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil, nil
	}
	return sc.FSGroup, sc.FSGroupChangePolicy
}
