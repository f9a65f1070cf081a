package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/cgroups"
)

// emptyDirPerm is the mode of an emptyDir, as upstream: any container user
// may write to it.
const emptyDirPerm os.FileMode = 0o777

// emptyDirPlugin provides emptyDir volumes: a directory on the node's
// disk (medium "") or a tmpfs (medium Memory).
type emptyDirPlugin struct {
	memory func() resource.Quantity // the node's allocatable memory
	log    *slog.Logger
}

func (p *emptyDirPlugin) handles(vol *corev1.Volume) bool { return vol.EmptyDir != nil }
func (p *emptyDirPlugin) dirName() string                 { return "kubernetes.io~empty-dir" }
func (p *emptyDirPlugin) updatable() bool                 { return false }

func (p *emptyDirPlugin) setup(_ context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (Mount, error) {
	switch vol.EmptyDir.Medium {
	case corev1.StorageMediumDefault:
		if err := setupDir(dir, emptyDirPerm); err != nil {
			return Mount{}, err
		}
	case corev1.StorageMediumMemory:
		size := TmpfsSize(p.memory(), pod, vol.EmptyDir.SizeLimit)
		if err := setupTmpfs(dir, emptyDirPerm, size, p.log); err != nil {
			return Mount{}, err
		}
	default:
		return Mount{}, &UnsupportedError{Type: fmt.Sprintf("emptyDir medium %q", vol.EmptyDir.Medium)}
	}
	return Mount{HostPath: dir, fsGroupManaged: true, measure: measureDu}, nil
}

func (p *emptyDirPlugin) teardown(_ context.Context, dir string) error {
	return unmountAllBelow(dir)
}

// projectionDirPerm is the mode of a configMap, secret, downwardAPI or
// projected volume's root: any container user may read it, nobody but root
// writes it (upstream leaves the wrapped emptyDir's 0777; the host is
// guarded by the pod directory's NodeDirPerm either way).
const projectionDirPerm os.FileMode = 0o755

// setupDir creates dir with perm whatever the umask (missing parents
// with NodeDirPerm).
func setupDir(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dir), NodeDirPerm); err != nil {
		return fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	return ensurePerm(dir, perm)
}

func ensurePerm(dir string, perm os.FileMode) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat volume dir %s: %w", dir, err)
	}
	if fi.Mode().Perm() != perm {
		if err := os.Chmod(dir, perm); err != nil {
			return fmt.Errorf("chmod volume dir %s: %w", dir, err)
		}
	}
	return nil
}

// setupTmpfs mounts a tmpfs of size bytes (0: the kernel's default, half
// of RAM) on dir unless one is there already; its root gets perm (a fresh
// tmpfs's root is 1777, so the mode is set after the mount).
func setupTmpfs(dir string, perm os.FileMode, size int64, log *slog.Logger) error {
	if err := setupDir(dir, perm); err != nil {
		return err
	}
	mounted, err := isTmpfs(dir)
	if err != nil {
		return err
	}
	if !mounted {
		opts := ""
		if size > 0 {
			opts = fmt.Sprintf("size=%d", size)
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount tmpfs on %s (%s): %w", dir, opts, err)
		}
		log.Debug("mounted tmpfs", "dir", dir, "size", size)
	}
	return ensurePerm(dir, perm)
}

// TmpfsSize is the size of a memory-backed emptyDir as upstream computes it
// (calculateEmptyDirMemorySize): the node's allocatable memory, lowered to
// the pod's memory limit when the pod has one, lowered to the volume's
// sizeLimit when set. Zero allocatable means unknown (no cap); a result of
// zero means no size option (the kernel default).
func TmpfsSize(allocatable resource.Quantity, pod *corev1.Pod, sizeLimit *resource.Quantity) int64 {
	size := allocatable.Value()
	lower := func(v int64) {
		if v > 0 && (size <= 0 || v <= size) {
			size = v
		}
	}
	if mem := cgroups.PodResources(pod, 0).Memory; mem != nil {
		lower(*mem)
	}
	if sizeLimit != nil {
		lower(sizeLimit.Value())
	}
	return size
}
