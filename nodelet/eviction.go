package nodelet

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/nodelet/nodelet/gc"
	"github.com/nodelet/nodelet/podlifecycle"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/podworkers"
	"github.com/nodelet/nodelet/runtime"
)

// evictions remembers the pods the eviction manager evicted until their
// containers are stopped: the status computed from the stopped containers
// would otherwise replace the Failed/Evicted one upstream leaves.
type evictions struct {
	mu    sync.Mutex
	byUID map[types.UID]eviction.Eviction
}

func (e *evictions) add(ev eviction.Eviction) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byUID[ev.Pod.UID] = ev
}

// finalStatus is the evicted pod's status made from current, and forgets
// the pod (its termination is over); ok is false for pods not evicted.
func (e *evictions) finalStatus(pod *corev1.Pod, current corev1.PodStatus) (corev1.PodStatus, bool) {
	e.mu.Lock()
	ev, ok := e.byUID[pod.UID]
	delete(e.byUID, pod.UID)
	e.mu.Unlock()
	if !ok {
		return corev1.PodStatus{}, false
	}
	return ev.Status(current, metav1.Now()), true
}

// evictedStatus is terminatingSyncer's hook: the status manager's desired
// status of an evicted pod, made Failed/Evicted again.
func (w *wired) evictedStatus(pod *corev1.Pod) (corev1.PodStatus, bool) {
	current, ok := w.status.GetPodStatus(pod.UID)
	if !ok {
		current = pod.Status
	}
	return w.evictions.finalStatus(pod, current)
}

// evictionManager builds the eviction manager on the node's measurements,
// pods, garbage collectors and pod workers.
func (a *Agent) evictionManager(ctx context.Context, w *wired, recorder record.EventRecorder, nodeEvent func(string, string, string)) (*eviction.Manager, error) {
	pc, err := eviction.DetectCgroups(w.driver, a.cfg.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("nodelet: eviction: %w", err)
	}
	imageFS := a.imageFSPath(ctx, w.rt)
	host := eviction.Host{V2: pc.V2, MemoryRoot: pc.MemoryRoot, NodeFS: a.cfg.RootDir, ImageFS: imageFS}
	stats := eviction.PodStatsReader{Cgroups: pc, DiskDirs: func(p *corev1.Pod) []string {
		logs := filepath.Dir(filepath.Dir(runtime.ContainerLogPath(a.cfg.LogRoot, p.Namespace, p.Name, string(p.UID), "x", 0)))
		return []string{logs, filepath.Join(w.vols.PodDir(p.UID), "volumes", "kubernetes.io~empty-dir")}
	}}
	thresholds := a.cfg.EvictionThresholds
	if thresholds == nil {
		thresholds = eviction.DefaultThresholds()
	}
	cgc := a.containerGC(w)
	igc := a.evictionImageGC(ctx, w)
	return eviction.New(eviction.Config{
		Thresholds: thresholds, PressureTransitionPeriod: a.cfg.EvictionPressureTransitionPeriod,
		MaxPodGracePeriod: a.cfg.EvictionMaxPodGracePeriod, Interval: a.cfg.EvictionMonitoringInterval,
		Observe: host.Observe, ActivePods: func() []*corev1.Pod { return activePods(w) }, PodStats: stats.Read,
		RemoveDeadContainers: cgc.Collect, RemoveUnusedImages: igc.Collect,
		DedicatedImageFS: !eviction.SameFilesystem(a.cfg.RootDir, imageFS),
		Evict:            func(ctx context.Context, e eviction.Eviction) error { return a.evict(w, recorder, e) },
		PodCleanedUp:     func(p *corev1.Pod) bool { return w.board.Lifecycle().Terminated(p.UID) && !w.cg.PodExists(p.UID) },
		Published:        w.pressure, OnEvict: a.cfg.OnEviction, Event: nodeEvent,
		Log: a.log.With("component", "eviction"),
	})
}

// evictionImageGC is an image collector for disk pressure: with
// thresholds 0/0 it asks for all the used space back, so every unused
// image past the minimum age goes (upstream's DeleteUnusedImages), not
// just down to the low threshold. It learns the images at once, so that
// their age counts from the nodelet's start as the periodic collector's.
func (a *Agent) evictionImageGC(ctx context.Context, w *wired) *gc.Images {
	g := a.imageGC(ctx, w)
	g.Policy.HighThresholdPercent, g.Policy.LowThresholdPercent = 0, 0 // free all there is to free
	if _, err := g.Detect(ctx); err != nil {
		a.log.Warn("eviction: list images", "err", err)
	}
	g.Log = a.log.With("component", "eviction-imagegc")
	return g
}

// activePods are the eviction candidates: pods with a worker that are not
// being stopped and not finished.
func activePods(w *wired) []*corev1.Pod {
	life := w.board.Lifecycle()
	var out []*corev1.Pod
	for _, obj := range w.pods.GetStore().List() {
		p, ok := obj.(*corev1.Pod)
		if !ok || !life.Active(p.UID) || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		out = append(out, p)
	}
	return out
}

// evict is upstream's evictPod: an event on the pod, its status
// Failed/Evicted with a DisruptionTarget condition (written as soon as
// the status manager may; the phase once the containers are stopped), and
// a kill with the eviction's grace period through the pod worker.
func (a *Agent) evict(w *wired, recorder record.EventRecorder, e eviction.Eviction) error {
	w.evictions.add(e)
	current, ok := w.status.GetPodStatus(e.Pod.UID)
	if !ok {
		current = e.Pod.Status
	}
	w.status.SetPodStatus(e.Pod, e.Status(current, metav1.NewTime(time.Now())))
	recorder.Eventf(podlifecycle.PodReference(e.Pod, ""), corev1.EventTypeWarning, eviction.Reason, "%s", e.Message)
	grace := e.GracePeriod
	w.workers.Update(podworkers.UpdateOptions{Pod: e.Pod, Kind: podworkers.Kill, GracePeriod: &grace})
	return nil
}
