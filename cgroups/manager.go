package cgroups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	libcgroups "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/systemd"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podresources"
)

// Sentinel errors.
var (
	// ErrBusy: a pod cgroup still held processes when RemovePod gave up.
	ErrBusy = errors.New("cgroups: cgroup still has processes")
	// ErrNoSystemd: the systemd driver was asked for on a host that was
	// not booted with systemd.
	ErrNoSystemd = errors.New("cgroups: systemd is not running")
	// ErrUnknownDriver and ErrUnknownMode: a Config names a driver or mode
	// that does not exist.
	ErrUnknownDriver = errors.New("cgroups: unknown cgroup driver")
	ErrUnknownMode   = errors.New("cgroups: unknown cgroup mode")
)

// Manager keeps the node's pod cgroups: the kubepods tree with its QoS
// tiers and one cgroup per pod. All methods are safe for concurrent use;
// operations on one pod are expected to be serialized by the caller (the
// pod worker).
//
// Order of use, as the kubelet: EnsureQoS once at start; before creating
// a pod's cgroup, UpdateQoS with the pods that will be on the node (so the
// burstable tier grows before a new Burstable pod lands in it); EnsurePod;
// after the pod's last process is gone, RemovePod, then UpdateQoS again.
type Manager interface {
	// EnsureQoS creates (or refreshes) kubepods, kubepods/burstable and
	// kubepods/besteffort.
	EnsureQoS(ctx context.Context) error
	// UpdateQoS sizes the QoS tiers for pods (all active pods of the node).
	UpdateQoS(ctx context.Context, pods []*corev1.Pod) error
	// EnsurePod creates the pod's cgroup (or rewrites its values) and
	// returns its path in the driver's spelling: the cgroup parent for the
	// pod's sandbox and containers (see ContainerCgroupsPath).
	EnsurePod(ctx context.Context, pod *corev1.Pod) (path string, err error)
	// RemovePod removes the pod's cgroup wherever it is. A missing cgroup
	// is success. While processes remain it retries until
	// Config.RemoveTimeout (or ctx) runs out, then fails with ErrBusy.
	RemovePod(ctx context.Context, uid types.UID) error
	// PodExists reports whether the pod's cgroup exists (on v1: in every
	// hierarchy whose values the nodelet sets).
	PodExists(uid types.UID) bool
	// ListPods lists the UIDs of all pod cgroups found (also partial ones),
	// to find leftovers of pods deleted while the nodelet was down.
	ListPods() ([]types.UID, error)
}

// Config configures New.
type Config struct {
	// Driver is "cgroupfs", "systemd" or "" (systemd when systemd booted
	// the host and it runs cgroup v2; see ResolveDriver).
	Driver string
	// Root is --cgroup-root: the cgroup under which kubepods is created.
	// "" or "/" is the top of the hierarchy. Both "/a/b" and "a.slice"
	// spellings are accepted (ParseRoot).
	Root string
	// Mode is the cgroup layout; "" detects it (statfs of /sys/fs/cgroup).
	Mode Mode
	// PidsLimit caps the tasks of each pod; <= 0 means no limit.
	PidsLimit int64
	// Allocatable, when set, limits kubepods to the node's allocatable cpu
	// (shares), memory and ResourcePIDs.
	Allocatable corev1.ResourceList
	// RemoveTimeout bounds RemovePod's wait for a pod's processes to go;
	// default 5s.
	RemoveTimeout time.Duration
	// Log receives what the manager does; nil discards.
	Log *slog.Logger
}

const (
	defaultRemoveTimeout = 5 * time.Second
	removeRetryInterval  = 50 * time.Millisecond
)

type manager struct {
	driver        Driver
	root          Name
	pidsLimit     int64
	allocatable   corev1.ResourceList
	removeTimeout time.Duration
	log           *slog.Logger
	ops           cgroupOps
	qosMu         sync.Mutex // serializes EnsureQoS and UpdateQoS
}

// New resolves cfg's driver and mode against this host and returns a
// Manager backed by github.com/opencontainers/cgroups.
func New(cfg Config) (Manager, error) {
	mode, err := ResolveMode(cfg.Mode, libcgroups.IsCgroup2UnifiedMode())
	if err != nil {
		return nil, err
	}
	driver, err := ResolveDriver(cfg.Driver, systemd.IsRunningSystemd(), mode == ModeV2)
	if err != nil {
		return nil, err
	}
	return newManager(cfg, driver, newLibOps(driver, mode)), nil
}

func newManager(cfg Config, driver Driver, ops cgroupOps) *manager {
	m := &manager{
		driver:        driver,
		root:          ParseRoot(cfg.Root),
		pidsLimit:     cfg.PidsLimit,
		allocatable:   cfg.Allocatable,
		removeTimeout: cfg.RemoveTimeout,
		log:           cfg.Log,
		ops:           ops,
	}
	if m.removeTimeout <= 0 {
		m.removeTimeout = defaultRemoveTimeout
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m
}

func (m *manager) EnsureQoS(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.qosMu.Lock()
	defer m.qosMu.Unlock()
	_, besteffort := TierResources(nil)
	steps := []struct {
		name Name
		res  Resources
	}{
		{KubepodsName(m.root), KubepodsResources(m.allocatable)},
		{QoSName(m.root, corev1.PodQOSBurstable), Resources{}},
		{QoSName(m.root, corev1.PodQOSBestEffort), besteffort},
	}
	for _, s := range steps {
		if err := m.ops.apply(s.name, s.res); err != nil {
			return fmt.Errorf("ensure qos cgroups: %w", err)
		}
	}
	m.log.Debug("qos cgroups ready", "kubepods", KubepodsName(m.root).Path(m.driver))
	return nil
}

func (m *manager) UpdateQoS(ctx context.Context, pods []*corev1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.qosMu.Lock()
	defer m.qosMu.Unlock()
	burstable, besteffort := TierResources(pods)
	if err := m.ops.apply(QoSName(m.root, corev1.PodQOSBurstable), burstable); err != nil {
		return fmt.Errorf("update qos cgroups: %w", err)
	}
	if err := m.ops.apply(QoSName(m.root, corev1.PodQOSBestEffort), besteffort); err != nil {
		return fmt.Errorf("update qos cgroups: %w", err)
	}
	return nil
}

func (m *manager) EnsurePod(ctx context.Context, pod *corev1.Pod) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	class := podresources.QOSClass(pod)
	name := PodName(m.root, class, pod.UID)
	if err := m.ops.apply(name, PodResources(pod, m.pidsLimit)); err != nil {
		return "", fmt.Errorf("ensure cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	path := name.Path(m.driver)
	m.log.Debug("pod cgroup ready", "pod", pod.Namespace+"/"+pod.Name, "qos", class, "cgroup", path)
	return path, nil
}

// podNames are the places a pod's cgroup can be, one per QoS class.
func (m *manager) podNames(uid types.UID) []Name {
	return []Name{
		PodName(m.root, corev1.PodQOSGuaranteed, uid),
		PodName(m.root, corev1.PodQOSBurstable, uid),
		PodName(m.root, corev1.PodQOSBestEffort, uid),
	}
}

func (m *manager) RemovePod(ctx context.Context, uid types.UID) error {
	var errs []error
	for _, name := range m.podNames(uid) {
		present, err := m.present(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !present {
			continue
		}
		if err := m.removeWhenEmpty(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup of pod %s: %w", uid, err))
			continue
		}
		m.log.Debug("pod cgroup removed", "uid", uid, "cgroup", name.Path(m.driver))
	}
	return errors.Join(errs...)
}

// removeWhenEmpty waits (up to removeTimeout) until no process is left in
// name, then removes it.
func (m *manager) removeWhenEmpty(ctx context.Context, name Name) error {
	ctx, cancel := context.WithTimeout(ctx, m.removeTimeout)
	defer cancel()
	for {
		pids, err := m.ops.pids(name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return m.ops.destroy(name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %d process(es), e.g. pid %d: %w", ErrBusy, len(pids), pids[0], ctx.Err())
		case <-time.After(removeRetryInterval):
		}
	}
}

// present reports whether any directory of name exists.
func (m *manager) present(name Name) (bool, error) {
	dirs, err := m.ops.dirs(name)
	if err != nil {
		return false, err
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			return true, nil
		}
	}
	return false, nil
}

func (m *manager) PodExists(uid types.UID) bool {
	for _, name := range m.podNames(uid) {
		if m.ops.exists(name) {
			return true
		}
	}
	return false
}

func (m *manager) ListPods() ([]types.UID, error) {
	found := map[types.UID]bool{}
	tiers := []Name{
		KubepodsName(m.root),
		QoSName(m.root, corev1.PodQOSBurstable),
		QoSName(m.root, corev1.PodQOSBestEffort),
	}
	for _, tier := range tiers {
		dirs, err := m.ops.dirs(tier)
		if err != nil {
			return nil, fmt.Errorf("list pod cgroups: %w", err)
		}
		for _, dir := range dirs {
			entries, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list pod cgroups in %s: %w", dir, err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				if uid, ok := podUIDFromDir(m.driver, e.Name()); ok {
					found[uid] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(found)), nil
}
