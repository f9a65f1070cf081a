package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// measureKind is how a volume's usage is measured, as upstream's plugins
// choose their MetricsProvider.
type measureKind int

const (
	// measureNone: not reported (hostPath, upstream's MetricsNil).
	measureNone measureKind = iota
	// measureDu: the bytes and inodes used under the volume's directory,
	// the file system's capacity (emptyDir, configMap, secret,
	// downwardAPI, projected: upstream's MetricsDu).
	measureDu
	// measureStatfs: the file system the volume is on (local
	// PersistentVolumes: upstream's MetricsStatFS).
	measureStatfs
	// measureCSI: the CSI driver's NodeGetVolumeStats (persistent CSI
	// volumes, reached through their claim; inline ones are the CSI
	// plugin's, a statser).
	measureCSI
)

// VolumeStats is one volume's usage.
type VolumeStats struct {
	CapacityBytes, AvailableBytes, UsedBytes int64
	Inodes, InodesFree, InodesUsed           int64
}

// statser is a plugin that measures its volumes itself (CSI volumes,
// through their driver). ok false: the volume reports nothing.
type statser interface {
	stats(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (s VolumeStats, ok bool, err error)
}

// VolumeStats measures the volumes this process has set up, per pod, as
// the Summary API's pod volume entries: the name, the claim of
// persistentVolumeClaim and generic ephemeral volumes, the usage. A
// volume that cannot be measured is left out and its error returned
// (joined) beside the rest. It walks whole directory trees (du), so
// callers call it about once a minute, as upstream's kubelet does.
func (m *Manager) VolumeStats(ctx context.Context) (map[types.UID][]statsv1alpha1.VolumeStats, error) {
	out := map[types.UID][]statsv1alpha1.VolumeStats{}
	var errs []error
	for _, pv := range m.state.snapshot() {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		s, ok, err := m.measure(ctx, pv)
		if err != nil {
			errs = append(errs, fmt.Errorf("measure volume %s of pod %s: %w", pv.vol.Name, podRef(pv.pod), err))
			continue
		}
		if !ok {
			continue
		}
		out[pv.pod.UID] = append(out[pv.pod.UID], summaryVolume(pv, s, time.Now()))
	}
	return out, errors.Join(errs...)
}

func (m *Manager) measure(ctx context.Context, pv podVolume) (VolumeStats, bool, error) {
	if p, ok := m.pluginFor(pv.vol).(statser); ok {
		return p.stats(ctx, pv.pod, pv.vol, m.volumeDir(pv.pod.UID, m.pluginFor(pv.vol), pv.vol.Name))
	}
	switch pv.mount.measure {
	case measureDu:
		s, err := statfs(pv.mount.HostPath)
		if err != nil {
			return s, false, err
		}
		s.UsedBytes, s.InodesUsed, err = du(pv.mount.HostPath)
		return s, err == nil, err
	case measureStatfs:
		s, err := statfs(pv.mount.HostPath)
		return s, err == nil, err
	case measureCSI:
		return m.csi.stats(ctx, pv.pod, pv.vol, filepath.Dir(pv.mount.HostPath))
	}
	return VolumeStats{}, false, nil
}

// summaryVolume is one entry of the Summary API's PodStats.VolumeStats.
func summaryVolume(pv podVolume, s VolumeStats, now time.Time) statsv1alpha1.VolumeStats {
	u := func(v int64) *uint64 { x := uint64(max(v, 0)); return &x }
	vs := statsv1alpha1.VolumeStats{
		Name: pv.vol.Name,
		FsStats: statsv1alpha1.FsStats{Time: metav1.NewTime(now),
			CapacityBytes: u(s.CapacityBytes), AvailableBytes: u(s.AvailableBytes), UsedBytes: u(s.UsedBytes),
			Inodes: u(s.Inodes), InodesFree: u(s.InodesFree), InodesUsed: u(s.InodesUsed)},
	}
	switch {
	case pv.vol.PersistentVolumeClaim != nil:
		vs.PVCRef = &statsv1alpha1.PVCReference{Name: pv.vol.PersistentVolumeClaim.ClaimName, Namespace: pv.pod.Namespace}
	case pv.vol.Ephemeral != nil:
		vs.PVCRef = &statsv1alpha1.PVCReference{Name: pv.pod.Name + "-" + pv.vol.Name, Namespace: pv.pod.Namespace}
	}
	return vs
}

// statfs is the file system holding path, as upstream's MetricsStatFS.
func statfs(path string) (VolumeStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return VolumeStats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := st.Bsize
	return VolumeStats{
		CapacityBytes: int64(st.Blocks) * bs, AvailableBytes: int64(st.Bavail) * bs,
		UsedBytes: int64(st.Blocks-st.Bfree) * bs,
		Inodes:    int64(st.Files), InodesFree: int64(st.Ffree), InodesUsed: int64(st.Files - st.Ffree),
	}, nil
}

// du is the space and inodes used under dir on its own file system, as
// upstream's `du -x` and `find -xdev`: symbolic links are counted, not
// followed; hard links once per walk are not deduplicated (nor by
// upstream's find).
func du(dir string) (bytes, inodes int64, err error) {
	root, err := os.Lstat(dir)
	if err != nil {
		return 0, 0, err
	}
	dev := root.Sys().(*syscall.Stat_t).Dev
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Dev != dev { // another file system mounted below
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		bytes += st.Blocks * 512
		inodes++
		return nil
	})
	return bytes, inodes, err
}
