package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// hostPathPlugin provides hostPath volumes: the host's path itself, after
// the check of its type.
type hostPathPlugin struct{}

func (hostPathPlugin) handles(vol *corev1.Volume) bool { return vol.HostPath != nil }
func (hostPathPlugin) dirName() string                 { return "" }
func (hostPathPlugin) updatable() bool                 { return false }

func (hostPathPlugin) setup(_ context.Context, _ *corev1.Pod, vol *corev1.Volume, _ string) (Mount, error) {
	if err := checkHostPath(vol.HostPath); err != nil {
		return Mount{}, err
	}
	return Mount{HostPath: vol.HostPath.Path}, nil
}

// checkHostPath checks a hostPath source (of a volume or a
// PersistentVolume) as upstream's hostPath plugin does.
func checkHostPath(src *corev1.HostPathVolumeSource) error {
	path := src.Path
	if path == "" {
		return errors.New("hostPath: path is empty")
	}
	if hasDotDot(path) {
		return fmt.Errorf("hostPath: path %q must not contain '..'", path)
	}
	var typ corev1.HostPathType
	if src.Type != nil {
		typ = *src.Type
	}
	return CheckHostPathType(path, typ)
}

func (hostPathPlugin) teardown(context.Context, string) error { return nil }

// CheckHostPathType checks (and for the *OrCreate types creates) path as
// upstream's hostPath plugin does, with upstream's messages. "" checks
// nothing. Symbolic links are followed.
func CheckHostPathType(path string, typ corev1.HostPathType) error {
	fi, statErr := os.Stat(path)
	exists := statErr == nil
	isMode := func(m os.FileMode) bool { return exists && fi.Mode().Type()&m != 0 }
	switch typ {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			return makeDir(path)
		}
		fallthrough
	case corev1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", path)
		}
	case corev1.HostPathFileOrCreate:
		if !exists {
			return makeFile(path)
		}
		fallthrough
	case corev1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", path)
		}
	case corev1.HostPathSocket:
		if !isMode(os.ModeSocket) {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", path)
		}
	case corev1.HostPathCharDev:
		if !isMode(os.ModeCharDevice) {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", path)
		}
	case corev1.HostPathBlockDev:
		if !exists || fi.Mode().Type() != os.ModeDevice {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", path)
		}
	default:
		return fmt.Errorf("%s is an invalid volume type", typ)
	}
	return nil
}

// makeDir creates path and its parents with 0755, as upstream.
func makeDir(path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("hostPath: create directory %s: %w", path, err)
	}
	return nil
}

// makeFile creates an empty file with 0644, as upstream; the parent
// directory must exist.
func makeFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hostPath: create file %s: %w", path, err)
	}
	return f.Close()
}
