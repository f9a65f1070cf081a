package volumes

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// VolumesInUse returns the unique names of the persistent CSI volumes
// published for pods on this node (kubernetes.io/csi/<driver>^<handle>),
// sorted, for node.status.volumesInUse: the attach/detach controller does
// not detach a volume the node reports in use. It reads the pods'
// vol_data.json files, so it holds across restarts.
func (m *Manager) VolumesInUse() ([]corev1.UniqueVolumeName, error) {
	users, err := m.csi.volumeUsers()
	if err != nil {
		return nil, err
	}
	var names []corev1.UniqueVolumeName
	for _, u := range users {
		if u.data.VolumeLifecycleMode != csiModeEphemeral {
			names = append(names, CSIUniqueVolumeName(u.data.DriverName, u.data.VolumeHandle))
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// writeJSON writes v to path through a temporary file and a rename, so a
// reader never sees half a file.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// readJSON decodes path into v; a missing file wraps os.ErrNotExist.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// setCSIOwnership gives a published CSI volume to the pod's fsGroup as
// upstream's SetVolumeOwnership does: every file's group becomes fsGroup
// and gets group read and write (directories also execute and setgid);
// with policy OnRootMismatch nothing is walked when the root is right
// already. It stands in for the shared fsGroup code of volumes/ownership.go.
func setCSIOwnership(dir string, fsGroup *int64, policy *corev1.PodFSGroupChangePolicy) error {
	if fsGroup == nil {
		return nil
	}
	gid := int(*fsGroup)
	if policy != nil && *policy == corev1.FSGroupChangeOnRootMismatch {
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("stat %s: %w", dir, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) == gid &&
			fi.Mode()&os.ModeSetgid != 0 && fi.Mode().Perm()&0o070 == 0o070 {
			return nil
		}
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return fmt.Errorf("chown %s: %w", path, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode() | 0o060
		if d.IsDir() {
			mode |= os.ModeSetgid | 0o010
		}
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", path, err)
		}
		return nil
	})
}
