package status

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// DefaultResyncInterval is how often the manager re-checks every pod's
// status against the API, as upstream's syncPeriod.
const DefaultResyncInterval = 10 * time.Second

// Reason and message of a container that was not seen terminating, as
// upstream's TerminatePod sets them.
const (
	ReasonContainerStatusUnknown  = "ContainerStatusUnknown"
	messageContainerStatusUnknown = "The container could not be located when the pod was terminated"
)

// ManagerConfig configures the status Manager.
type ManagerConfig struct {
	Client kubernetes.Interface
	Log    *slog.Logger
	// Clock (default: the real clock).
	Clock clock.WithTicker
	// ResyncInterval (default 10s) re-checks every pod against the API.
	ResyncInterval time.Duration
	// PodCouldHaveRunningContainers, optional, is upstream's pod deletion
	// safety (the pod workers' !IsTerminated): while it says true, a
	// terminal phase is not written and the pod is not deleted unless
	// TerminatePod was called. Nil: only TerminatePod marks a pod stopped.
	PodCouldHaveRunningContainers func(uid types.UID) bool
	// CachedPod, optional, returns the pod as an informer last saw it (nil
	// when unknown). A sync first compares against it and writes with its
	// resourceVersion, so an unchanged pod costs no request; a conflict
	// falls back to a GET. Nil: every sync GETs the pod.
	CachedPod func(namespace, name string) *corev1.Pod
}

// syncParallelism bounds the pod status writes in flight.
const syncParallelism = 8

// Manager is the single writer of pod statuses to the API server, as
// upstream's status_manager.go: callers record the desired status; one
// goroutine (Run) writes it when it differs from what the API has, fed by
// a size-1 coalescing trigger and a periodic resync.
type Manager struct {
	cfg     ManagerConfig
	trigger chan struct{}

	mu   sync.Mutex
	pods map[types.UID]*podEntry
}

// podEntry is the desired status of one pod.
type podEntry struct {
	namespace, name string
	status          corev1.PodStatus
	// version counts changes of status; written is the version the API has.
	version, written uint64
	// finished: TerminatePod was called (every container is stopped).
	finished bool
}

// NewManager returns a Manager; Run starts its writer.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	return &Manager{cfg: cfg, trigger: make(chan struct{}, 1), pods: map[types.UID]*podEntry{}}
}

// SetPodStatus records the status the pod should have. Conditions owned by
// others are taken from the API when writing; a terminal phase is never
// left. It does not block on the API.
func (m *Manager) SetPodStatus(pod *corev1.Pod, st corev1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(pod, st, false)
}

// set stores st for pod and triggers a write if it changed. Caller holds mu.
func (m *Manager) set(pod *corev1.Pod, st corev1.PodStatus, finished bool) {
	e, cached := m.pods[pod.UID]
	old := pod.Status
	if cached {
		old = e.status
	} else {
		e = &podEntry{}
		m.pods[pod.UID] = e
	}
	e.namespace, e.name = pod.Namespace, pod.Name
	st = *st.DeepCopy()
	if isTerminalPhase(old.Phase) && !isTerminalPhase(st.Phase) {
		m.cfg.Log.Warn("refusing to move a pod out of a terminal phase", "pod", pod.Namespace+"/"+pod.Name,
			"old", old.Phase, "new", st.Phase)
		st.Phase, st.Reason, st.Message = old.Phase, old.Reason, old.Message
	}
	if st.StartTime == nil {
		st.StartTime = old.StartTime
	}
	if finished && !e.finished {
		e.finished = true
	} else if cached && Equal(e.status, st) {
		return
	}
	e.status = st
	e.version++
	m.kick()
}

func (m *Manager) kick() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// TerminatePod records that every container of the pod is stopped for
// good: containers still shown running (or, once the pod initialized,
// waiting) become terminated with ContainerStatusUnknown and exit code
// 137, a non-terminal phase becomes Failed, and the pod may be deleted
// once this status is written (see CanDelete).
func (m *Manager) TerminatePod(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := pod.Status
	if e, ok := m.pods[pod.UID]; ok {
		st = e.status
	}
	st = *st.DeepCopy()
	initialized := false
	if c := findCondition(st.Conditions, corev1.PodInitialized); c != nil && c.Status == corev1.ConditionTrue {
		initialized = true
	}
	terminateContainers(st.InitContainerStatuses, false)
	terminateContainers(st.ContainerStatuses, initialized)
	if !isTerminalPhase(st.Phase) {
		st.Phase = corev1.PodFailed
	}
	m.set(pod, st, true)
}

func terminateContainers(list []corev1.ContainerStatus, waitingToo bool) {
	for i := range list {
		s := &list[i].State
		if s.Terminated != nil || (s.Running == nil && !waitingToo) {
			continue
		}
		list[i].Ready = false
		list[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: ReasonContainerStatusUnknown, Message: messageContainerStatusUnknown, ExitCode: 137}}
	}
}

// GetPodStatus returns the desired status recorded for the pod.
func (m *Manager) GetPodStatus(uid types.UID) (corev1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return corev1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// Forget drops the pod's status (the pod is gone from the API).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
}

// Len returns how many pods the manager tracks.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pods)
}

// Run writes statuses until ctx ends: at once for changed pods when
// triggered, and every ResyncInterval for every pod.
func (m *Manager) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.trigger:
			m.syncBatch(ctx, false)
		case <-t.C():
			m.syncBatch(ctx, true)
		}
	}
}

// syncBatch syncs the pods whose desired status was not written yet, or
// (all) every pod still worth checking.
func (m *Manager) syncBatch(ctx context.Context, all bool) {
	m.mu.Lock()
	var uids []types.UID
	for uid, e := range m.pods {
		if e.version > e.written || (all && !e.finished) {
			uids = append(uids, uid)
		}
	}
	m.mu.Unlock()
	// Pods are written concurrently (each pod by one goroutine at a time):
	// a sequential writer waits out one durable API write per pod, which
	// made a 100-pod burst wait seconds for its statuses.
	sem := make(chan struct{}, syncParallelism)
	var wg sync.WaitGroup
	for _, uid := range uids {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := m.syncPod(ctx, uid); err != nil {
				m.cfg.Log.Warn("pod status sync failed, will retry", "uid", uid, "err", err)
			}
		})
	}
	wg.Wait()
}
