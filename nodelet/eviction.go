package nodelet

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/nodelet/nodelet/gc"
	"github.com/nodelet/nodelet/podlifecycle"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/runtime"
)

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
	evictor := &podlifecycle.Evictor{Evictions: w.evictions, Status: w.status, Workers: w.workers, Recorder: recorder}
	igc := a.evictionImageGC(ctx, w)
	return eviction.New(eviction.Config{
		Thresholds: thresholds, PressureTransitionPeriod: a.cfg.EvictionPressureTransitionPeriod,
		MaxPodGracePeriod: a.cfg.EvictionMaxPodGracePeriod, Interval: a.cfg.EvictionMonitoringInterval,
		Observe: host.Observe, PodStats: stats.Read,
		ActivePods:           func() []*corev1.Pod { return podlifecycle.ActivePods(informerPods(w), w.board.Lifecycle()) },
		RemoveDeadContainers: cgc.Collect, RemoveUnusedImages: igc.Collect,
		DedicatedImageFS: !eviction.SameFilesystem(a.cfg.RootDir, imageFS),
		Evict:            func(_ context.Context, e eviction.Eviction) error { evictor.Evict(e); return nil },
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
