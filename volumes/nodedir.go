package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// NodeDirPerm is the mode of the nodelet's root directory and of every
// directory on the way to a pod's volumes and files, as upstream kubelet's
// (setupDataDirs, makePodDataDirs: 0750): other local users cannot walk
// into a pod's secrets, tokens or termination logs, whatever the modes of
// the files below (a projected file keeps its defaultMode for the
// container's user, who reaches it through its bind mount).
const NodeDirPerm os.FileMode = 0o750

// EnsureNodeDir creates dir (and its missing parents) with NodeDirPerm and
// takes the group's write and every other user's bit off an existing dir
// that has them, so an upgraded node tightens what an older one made.
func EnsureNodeDir(dir string) error {
	if err := os.MkdirAll(dir, NodeDirPerm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %w", dir, syscall.ENOTDIR)
	}
	if perm := fi.Mode().Perm(); perm&^NodeDirPerm != 0 {
		if err := os.Chmod(dir, perm&NodeDirPerm); err != nil {
			return fmt.Errorf("chmod %s: %w", dir, err)
		}
	}
	return nil
}

// ensurePodDirs makes ROOT/pods, ROOT/pods/<uid>, its volumes directory
// and the plugin's directory below it, each with NodeDirPerm, before a
// plugin creates the volume's own directory (whose mode is the plugin's).
func (m *Manager) ensurePodDirs(uid types.UID, pluginDir string) error {
	dirs := []string{filepath.Join(m.root, "pods"), m.PodDir(uid), m.volumesDir(uid)}
	if pluginDir != "" {
		dirs = append(dirs, filepath.Join(m.volumesDir(uid), pluginDir))
	}
	for _, d := range dirs {
		if err := EnsureNodeDir(d); err != nil {
			return err
		}
	}
	return nil
}
