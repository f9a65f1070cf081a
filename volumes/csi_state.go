package volumes

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

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
