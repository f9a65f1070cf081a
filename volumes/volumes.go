// Package volumes prepares the volumes of a pod on the host and removes
// them again, as upstream's volume manager does for in-tree plugins.
//
// Volumes that live with the pod sit under
// RootDir/pods/<uid>/volumes/<plugin>/<name>, with the plugin names of
// upstream (kubernetes.io~empty-dir, later kubernetes.io~configmap,
// kubernetes.io~secret, kubernetes.io~projected), so a pod's directory
// tells what it holds and teardown needs nothing but the directory tree.
// hostPath volumes are the host's paths themselves and leave nothing under
// the pod directory.
//
// Every operation is idempotent: SetupPod may run again for a pod whose
// volumes already exist (and returns the same mounts without touching the
// data), TeardownPod treats anything missing as done. After a restart,
// ListPods tells which pods still have directories, for orphan clean-up.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// ErrUnsupported is returned (wrapped) for a volume whose type the nodelet
// does not support yet.
var ErrUnsupported = errors.New("volumes: unsupported volume type")

// Config configures a Manager.
type Config struct {
	// RootDir is the nodelet's root directory; pods live in RootDir/pods.
	RootDir string
	Log     *slog.Logger
	// NodeAllocatableMemory caps memory-backed emptyDirs, as upstream
	// (zero: no cap beyond the pod's memory limit and the sizeLimit).
	NodeAllocatableMemory resource.Quantity
}

// Mount is a prepared volume: the host path to bind into containers and
// whether the volume itself is read-only (configMap, secret, projected).
// A volumeMount's readOnly comes on top.
type Mount struct {
	HostPath string
	ReadOnly bool
}

// Manager sets pod volumes up and tears them down.
type Manager struct {
	root    string
	log     *slog.Logger
	plugins []plugin
}

// plugin is one volume type. Plugins whose volumes live under the pod
// directory return a non-empty dirName (upstream's escaped plugin name).
type plugin interface {
	// handles reports whether the volume is of this plugin's type.
	handles(vol *corev1.Volume) bool
	// dirName is the plugin's directory under volumes/, "" if none.
	dirName() string
	// setup prepares vol; dir is where a pod-local volume lives.
	setup(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (Mount, error)
	// teardown undoes setup for a pod-local volume at dir; the caller
	// removes dir afterwards.
	teardown(ctx context.Context, dir string) error
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("volumes: RootDir is required")
	}
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, fmt.Errorf("volumes: resolve root dir %s: %w", cfg.RootDir, err)
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{root: root, log: log}
	m.plugins = []plugin{
		&emptyDirPlugin{allocatable: cfg.NodeAllocatableMemory, log: log},
		&hostPathPlugin{},
	}
	return m, nil
}

// PodDir is the pod's directory: RootDir/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.root, "pods", string(uid))
}

func (m *Manager) volumesDir(uid types.UID) string {
	return filepath.Join(m.PodDir(uid), "volumes")
}

// SetupPod prepares every volume of pod and returns the mounts by volume
// name. It stops at the first volume that fails; what was prepared stays
// and is removed by TeardownPod (a later SetupPod reuses it).
func (m *Manager) SetupPod(ctx context.Context, pod *corev1.Pod) (map[string]Mount, error) {
	if err := checkUID(pod.UID); err != nil {
		return nil, err
	}
	mounts := make(map[string]Mount, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		mnt, err := m.setupVolume(ctx, pod, vol)
		if err != nil {
			return nil, fmt.Errorf("set up volume %q of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
		}
		mounts[vol.Name] = mnt
	}
	return mounts, nil
}

func (m *Manager) setupVolume(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume) (Mount, error) {
	if err := checkName(vol.Name); err != nil {
		return Mount{}, err
	}
	p := m.pluginFor(vol)
	if p == nil {
		return Mount{}, fmt.Errorf("%w: %s", ErrUnsupported, volumeType(vol))
	}
	dir := ""
	if p.dirName() != "" {
		dir = filepath.Join(m.volumesDir(pod.UID), p.dirName(), vol.Name)
	}
	return p.setup(ctx, pod, vol, dir)
}

func (m *Manager) pluginFor(vol *corev1.Volume) plugin {
	for _, p := range m.plugins {
		if p.handles(vol) {
			return p
		}
	}
	return nil
}

func (m *Manager) pluginByDir(name string) plugin {
	for _, p := range m.plugins {
		if p.dirName() == name {
			return p
		}
	}
	return nil
}

// TeardownPod unmounts and removes the pod's volumes and then the pod
// directory. Missing directories count as success, so it may run any
// number of times, also on half-built pods. If anything is still mounted
// below the pod directory afterwards, it fails and removes nothing there,
// so a mount's content is never deleted through the pod directory.
func (m *Manager) TeardownPod(ctx context.Context, uid types.UID) error {
	if err := checkUID(uid); err != nil {
		return err
	}
	var errs []error
	pluginDirs, err := readDirNames(m.volumesDir(uid))
	if err != nil {
		return fmt.Errorf("tear down volumes of pod %s: %w", uid, err)
	}
	for _, pd := range pluginDirs {
		if err := m.teardownPlugin(ctx, uid, pd); err != nil {
			errs = append(errs, err)
		}
	}
	podDir := m.PodDir(uid)
	if err := unmountAllBelow(podDir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(podDir); err != nil {
		return fmt.Errorf("remove pod dir %s: %w", podDir, err)
	}
	m.log.Debug("pod volumes torn down", "uid", uid)
	return nil
}

func (m *Manager) teardownPlugin(ctx context.Context, uid types.UID, pluginDir string) error {
	base := filepath.Join(m.volumesDir(uid), pluginDir)
	names, err := readDirNames(base)
	if err != nil {
		return fmt.Errorf("tear down %s volumes of pod %s: %w", pluginDir, uid, err)
	}
	p := m.pluginByDir(pluginDir)
	var errs []error
	for _, name := range names {
		dir := filepath.Join(base, name)
		if p != nil {
			if err := p.teardown(ctx, dir); err != nil {
				errs = append(errs, fmt.Errorf("tear down volume %q of pod %s: %w", name, uid, err))
				continue
			}
		}
		if err := unmountAllBelow(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove volume dir %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// ListPods returns the UIDs of the pods that have a directory, for the
// clean-up of pods deleted while the nodelet was down.
func (m *Manager) ListPods() ([]types.UID, error) {
	names, err := readDirNames(filepath.Join(m.root, "pods"))
	if err != nil {
		return nil, fmt.Errorf("list pod dirs: %w", err)
	}
	uids := make([]types.UID, 0, len(names))
	for _, n := range names {
		uids = append(uids, types.UID(n))
	}
	return uids, nil
}

// readDirNames lists the directories in dir; a missing dir is empty.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dir %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func checkUID(uid types.UID) error {
	if uid == "" || strings.ContainsAny(string(uid), "/\x00") || uid == "." || uid == ".." {
		return fmt.Errorf("volumes: invalid pod uid %q", uid)
	}
	return nil
}

func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("invalid volume name %q", name)
	}
	return nil
}

// volumeType names the type of vol's source for error messages.
func volumeType(vol *corev1.Volume) string {
	s := vol.VolumeSource
	switch {
	case s.ConfigMap != nil:
		return "configMap"
	case s.Secret != nil:
		return "secret"
	case s.Projected != nil:
		return "projected"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.CSI != nil:
		return "csi"
	case s.NFS != nil:
		return "nfs"
	case s.Image != nil:
		return "image"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	case s.GitRepo != nil:
		return "gitRepo"
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.HostPath != nil:
		return "hostPath"
	default:
		return "unknown (no or unrecognized volume source)"
	}
}
