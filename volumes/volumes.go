// Package volumes prepares the volumes of a pod on the host, keeps the
// API-backed ones current and removes them again, as upstream's volume
// manager does for its in-tree plugins.
//
// Volumes that live with the pod sit under
// RootDir/pods/<uid>/volumes/<plugin>/<name>, with the plugin names of
// upstream (kubernetes.io~empty-dir, kubernetes.io~configmap,
// kubernetes.io~secret, kubernetes.io~downward-api,
// kubernetes.io~projected, kubernetes.io~csi), so a pod's directory tells what it holds and
// teardown needs nothing but the directory tree. Secret and projected
// volumes, and emptyDirs of medium Memory, are tmpfs mounts there.
// configMap, secret, downwardAPI and projected content is written by an
// AtomicWriter: the files a container sees are symlinks into ..data, which
// a rename swaps to a new timestamped directory. subPath bind mounts live
// under RootDir/pods/<uid>/volume-subpaths. hostPath volumes are the host's
// paths themselves and leave nothing under the pod directory.
//
// Every operation is idempotent: SetupPod may run again for a pod whose
// volumes already exist (it keeps their data and rewrites API-backed
// content only when it changed), TeardownPod treats anything missing as
// done. After a restart, ListPods tells which pods still have directories,
// for orphan clean-up.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Config configures a Manager.
type Config struct {
	// RootDir is the nodelet's root directory; pods live in RootDir/pods.
	RootDir string
	Log     *slog.Logger
	// NodeAllocatableMemory caps memory-backed volumes (emptyDir medium
	// Memory, secret, projected), as upstream. Zero: the memory of
	// NodeAllocatable if set, else no cap beyond the pod's memory limit and
	// the sizeLimit.
	NodeAllocatableMemory resource.Quantity
	// NodeAllocatable returns the node's allocatable resources, read at
	// every set-up and update. A downwardAPI resourceFieldRef on a limit
	// that the container leaves unset (cpu, memory, ephemeral-storage)
	// reads the node's allocatable instead, as upstream. Nil: no fallback,
	// an unset limit reads as 0.
	NodeAllocatable func() corev1.ResourceList
	// Sources serves the ConfigMaps and Secrets of configMap, secret and
	// projected volumes. Nil: such volumes fail to set up.
	Sources Sources
	// Claims serves the claims and volumes of persistentVolumeClaim
	// volumes. Nil: such volumes fail to set up.
	Claims Claims
	// NodeName names the node in CSI VolumeAttachments.
	NodeName string
	// CSIDrivers gives the node's registered CSI drivers. Nil: CSI
	// volumes fail to set up and to tear down.
	CSIDrivers CSIDrivers
	// CSIObjects serves CSIDrivers and VolumeAttachments. Nil: every
	// driver has the defaults of a missing CSIDriver, and volumes that
	// need an attachment fail.
	CSIObjects CSIObjects
	// AttachTimeout bounds one wait of a CSI volume's set-up for its
	// VolumeAttachment; default 15s (the pod's next sync waits again).
	AttachTimeout time.Duration
}

// Mount is a prepared volume: the host path to bind into containers and
// whether the volume itself is read-only (configMap, secret, downwardAPI,
// projected, as upstream). A volumeMount's readOnly comes on top: the
// container's bind mount is read-only if either is set.
type Mount struct {
	HostPath string
	ReadOnly bool
	// fsGroupManaged: the plugin's volume takes the pod's fsGroup
	// (applyFSGroup) once it is set up, unless ReadOnly.
	fsGroupManaged bool
	// measure is how VolumeStats measures the volume.
	measure measureKind
}

// Manager sets pod volumes up, refreshes and tears them down. Its methods
// may be called concurrently; calls for the same pod are serialized.
type Manager struct {
	root        string
	log         *slog.Logger
	plugins     []plugin
	memory      resource.Quantity
	allocatable func() corev1.ResourceList
	locks       podLocks
	state       podStates
	csi         *csiPlugin
}

// plugin is one volume type. Plugins whose volumes live under the pod
// directory return a non-empty dirName (upstream's escaped plugin name).
type plugin interface {
	// handles reports whether the volume is of this plugin's type.
	handles(vol *corev1.Volume) bool
	// dirName is the plugin's directory under volumes/, "" if none.
	dirName() string
	// setup prepares vol; dir is where a pod-local volume lives. It is
	// idempotent and brings an existing volume up to date.
	setup(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (Mount, error)
	// teardown undoes setup for a pod-local volume at dir; the caller
	// removes dir afterwards.
	teardown(ctx context.Context, dir string) error
	// updatable reports whether the volume's content follows the API
	// (configMap, secret, downwardAPI, projected): UpdatePod refreshes it.
	updatable() bool
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
	m := &Manager{root: root, log: log, memory: cfg.NodeAllocatableMemory, allocatable: cfg.NodeAllocatable}
	src := cfg.Sources
	attach := cfg.AttachTimeout
	if attach <= 0 {
		attach = 15 * time.Second
	}
	m.csi = &csiPlugin{root: root, nodeName: cfg.NodeName, drivers: cfg.CSIDrivers, objects: cfg.CSIObjects, secrets: src,
		log: log, attachTimeout: attach, attachPoll: time.Second}
	m.plugins = []plugin{
		&emptyDirPlugin{memory: m.allocatableMemory, log: log},
		&hostPathPlugin{},
		claimPlugin{claims: cfg.Claims, csi: m.csi,
			csiDir: func(uid types.UID, name string) string { return m.volumeDir(uid, m.csi, name) }},
		m.csi,
		&projectionPlugin{name: "kubernetes.io~configmap", m: m,
			match: func(v *corev1.Volume) bool { return v.ConfigMap != nil },
			payload: func(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (map[string]FileProjection, error) {
				return configMapPayload(ctx, src, pod.Namespace, v.ConfigMap)
			}},
		&projectionPlugin{name: "kubernetes.io~secret", memory: true, m: m,
			match: func(v *corev1.Volume) bool { return v.Secret != nil },
			payload: func(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (map[string]FileProjection, error) {
				return secretPayload(ctx, src, pod.Namespace, v.Secret)
			}},
		&projectionPlugin{name: "kubernetes.io~downward-api", m: m,
			match: func(v *corev1.Volume) bool { return v.DownwardAPI != nil },
			payload: func(_ context.Context, pod *corev1.Pod, v *corev1.Volume) (map[string]FileProjection, error) {
				return DownwardAPIPayload(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode), m.nodeAllocatable())
			}},
		&projectionPlugin{name: "kubernetes.io~projected", memory: true, m: m,
			match: func(v *corev1.Volume) bool { return v.Projected != nil },
			payload: func(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (map[string]FileProjection, error) {
				return projectedPayload(ctx, src, pod, v.Projected, m.nodeAllocatable())
			}},
	}
	return m, nil
}

// nodeAllocatable is Config.NodeAllocatable's answer, nil without one.
func (m *Manager) nodeAllocatable() corev1.ResourceList {
	if m.allocatable == nil {
		return nil
	}
	return m.allocatable()
}

// allocatableMemory caps memory-backed volumes; zero means no cap.
func (m *Manager) allocatableMemory() resource.Quantity {
	if !m.memory.IsZero() {
		return m.memory
	}
	if q, ok := m.nodeAllocatable()[corev1.ResourceMemory]; ok {
		return q
	}
	return resource.Quantity{}
}

// PodDir is the pod's directory: RootDir/pods/<uid>.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.root, "pods", string(uid))
}

func (m *Manager) volumesDir(uid types.UID) string {
	return filepath.Join(m.PodDir(uid), "volumes")
}

// SetupPod prepares every volume of pod and returns the mounts by volume
// name. It stops at the first volume that fails, with a *VolumeError;
// what was prepared stays and is removed by TeardownPod (a later SetupPod
// reuses it). On a pod whose volumes exist it brings configMap, secret,
// downwardAPI and projected content up to date, as UpdatePod does.
func (m *Manager) SetupPod(ctx context.Context, pod *corev1.Pod) (map[string]Mount, error) {
	if err := checkUID(pod.UID); err != nil {
		return nil, err
	}
	defer m.locks.lock(pod.UID)()
	mounts := make(map[string]Mount, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		mnt, err := m.setupVolume(ctx, pod, vol)
		if err != nil {
			return nil, &VolumeError{Op: "set up", Pod: podRef(pod), Volume: vol.Name, Err: err}
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
		return Mount{}, &UnsupportedError{Type: volumeType(vol)}
	}
	if p.dirName() != "" {
		if err := m.ensurePodDirs(pod.UID, p.dirName()); err != nil {
			return Mount{}, err
		}
	}
	mnt, err := p.setup(ctx, pod, vol, m.volumeDir(pod.UID, p, vol.Name))
	if err != nil {
		return Mount{}, err
	}
	m.state.setUp(pod, vol.Name, mnt)
	if err := m.applyOwnership(pod, vol.Name, mnt); err != nil {
		return Mount{}, err
	}
	if bidirectional(pod, vol.Name) {
		if err := ensureShared(mnt.HostPath); err != nil {
			return Mount{}, err
		}
	}
	return mnt, nil
}

// applyOwnership gives a newly set-up volume the pod's fsGroup, once per
// pod and volume in this process (SetupPod runs at every sync).
func (m *Manager) applyOwnership(pod *corev1.Pod, name string, mnt Mount) error {
	fsGroup, policy := podFSGroup(pod)
	if fsGroup == nil || !mnt.fsGroupManaged || mnt.ReadOnly || m.state.owned(pod.UID, name) {
		return nil
	}
	if err := applyFSGroup(mnt.HostPath, fsGroup, policy); err != nil {
		return err
	}
	m.state.setOwned(pod.UID, name)
	return nil
}

// volumeDir is where a pod-local volume lives, "" for other plugins.
func (m *Manager) volumeDir(uid types.UID, p plugin, name string) string {
	if p.dirName() == "" {
		return ""
	}
	return filepath.Join(m.volumesDir(uid), p.dirName(), name)
}

// UpdatePod rewrites the configMap, secret, downwardAPI and projected
// volumes of a running pod whose content changed: the ConfigMaps and
// Secrets as Sources serves them now, the pod's labels and annotations as
// pod has them. Unchanged volumes are not touched, so the nodelet may call
// it at every sync (upstream refreshes within about a minute). Volumes
// that SetupPod has not created are left to SetupPod. Every volume is
// tried; the failures come back joined, each a *VolumeError, and a failed
// volume keeps its previous content (as upstream, a ConfigMap that is gone
// and not optional leaves the files in place).
func (m *Manager) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := checkUID(pod.UID); err != nil {
		return err
	}
	defer m.locks.lock(pod.UID)()
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		p := m.pluginFor(vol)
		if p == nil || !p.updatable() || checkName(vol.Name) != nil {
			continue
		}
		dir := m.volumeDir(pod.UID, p, vol.Name)
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, err := p.setup(ctx, pod, vol, dir); err != nil {
			errs = append(errs, &VolumeError{Op: "update", Pod: podRef(pod), Volume: vol.Name, Err: err})
		}
	}
	return errors.Join(errs...)
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

// TeardownPod unmounts and removes the pod's subPath bind mounts, its
// volumes and then the pod directory. Missing directories count as
// success, so it may run any number of times, also on half-built pods. If
// anything is still mounted below the pod directory afterwards, it fails
// and removes nothing there, so a mount's content is never deleted
// through the pod directory.
func (m *Manager) TeardownPod(ctx context.Context, uid types.UID) error {
	if err := checkUID(uid); err != nil {
		return err
	}
	defer m.locks.lock(uid)()
	var errs []error
	if err := m.teardownSubPaths(uid); err != nil {
		errs = append(errs, err)
	}
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
		errs = append(errs, fmt.Errorf("tear down pod %s: %w", uid, err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(podDir); err != nil {
		return fmt.Errorf("remove pod dir %s: %w", podDir, err)
	}
	m.state.forget(uid)
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

func podRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

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

// podLocks serializes the operations on one pod; different pods proceed
// in parallel.
type podLocks = keyedLocks[types.UID]

// keyedLocks serializes the operations on one key (a pod, a CSI volume's
// staging path); different keys proceed in parallel.
type keyedLocks[K comparable] struct {
	mu    sync.Mutex
	locks map[K]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

// lock locks key and returns the unlock function.
func (l *keyedLocks[K]) lock(key K) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[K]*keyLock)
	}
	pl := l.locks[key]
	if pl == nil {
		pl = &keyLock{}
		l.locks[key] = pl
	}
	pl.refs++
	l.mu.Unlock()
	pl.Lock()
	return func() {
		pl.Unlock()
		l.mu.Lock()
		if pl.refs--; pl.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}
