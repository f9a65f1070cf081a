package volumes

import (
	"context"
	"fmt"
	"log/slog"
	"os"

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
		if err := setupDir(dir); err != nil {
			return Mount{}, err
		}
	case corev1.StorageMediumMemory:
		size := TmpfsSize(p.memory(), pod, vol.EmptyDir.SizeLimit)
		if err := setupTmpfs(dir, size, p.log); err != nil {
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

// setupDir creates dir with emptyDirPerm whatever the umask.
func setupDir(dir string) error {
	if err := os.MkdirAll(dir, emptyDirPerm); err != nil {
		return fmt.Errorf("create emptyDir %s: %w", dir, err)
	}
	return ensurePerm(dir)
}

func ensurePerm(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat emptyDir %s: %w", dir, err)
	}
	if fi.Mode().Perm() != emptyDirPerm {
		if err := os.Chmod(dir, emptyDirPerm); err != nil {
			return fmt.Errorf("chmod emptyDir %s: %w", dir, err)
		}
	}
	return nil
}

// setupTmpfs mounts a tmpfs of size bytes (0: the kernel's default, half
// of RAM) on dir unless one is there already; its root gets emptyDirPerm.
func setupTmpfs(dir string, size int64, log *slog.Logger) error {
	if err := setupDir(dir); err != nil {
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
	return ensurePerm(dir)
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
