package eviction

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/cgroups"
)

// fakeNode is the manager's world: observations the test sets, pods,
// and a record of what the manager did.
type fakeNode struct {
	obs       Observations
	pods      []*corev1.Pod
	stats     map[types.UID]PodStats
	evicted   []Eviction
	reclaimed []string
	counted   []string
	changes   int
	// afterReclaim, if set, replaces obs once a reclaim ran.
	afterReclaim Observations
}

// changed counts the change signals the manager published so far.
func (f *fakeNode) changed(m *Manager) int {
	for {
		select {
		case <-m.Published().Changed():
			f.changes++
		default:
			return f.changes
		}
	}
}

func (f *fakeNode) manager(t *testing.T, th []Threshold, dedicatedImageFS bool) *Manager {
	now := t0
	m, err := New(Config{Thresholds: th, DedicatedImageFS: dedicatedImageFS, MaxPodGracePeriod: 30,
		Observe:    func() (Observations, error) { return f.obs, nil },
		ActivePods: func() []*corev1.Pod { return f.pods },
		PodStats:   func([]*corev1.Pod, corev1.ResourceName) map[types.UID]PodStats { return f.stats },
		RemoveDeadContainers: func(context.Context) error {
			f.reclaimed = append(f.reclaimed, "containers")
			return errors.New("one container would not go") // logged, not fatal
		},
		RemoveUnusedImages: func(context.Context) error {
			f.reclaimed = append(f.reclaimed, "images")
			if f.afterReclaim != nil {
				f.obs = f.afterReclaim
			}
			return nil
		},
		Evict:   func(_ context.Context, e Eviction) error { f.evicted = append(f.evicted, e); return nil },
		OnEvict: func(s string) { f.counted = append(f.counted, s) },
		Now:     func() time.Time { now = now.Add(10 * time.Second); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManagerEvictsOnePodPerPass(t *testing.T) {
	be, g := pod("besteffort", nil, nil, 0), pod("guaranteed", mem("1Gi"), mem("1Gi"), 0)
	f := &fakeNode{obs: memObs(50 * mi), pods: []*corev1.Pod{g, be},
		stats: map[types.UID]PodStats{be.UID: {Memory: 10 * mi}, g.UID: {Memory: 900 * mi}}}
	m := f.manager(t, []Threshold{{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}}}, false)
	e := m.Synchronize(context.Background())
	if e == nil || e.Pod != be || len(f.evicted) != 1 || e.GracePeriod != 0 {
		t.Fatalf("first pass evicted %v", names(podsOf(f.evicted)))
	}
	if mem, disk, pid := m.Published().Pressure(); !mem || disk || pid || f.changed(m) != 1 {
		t.Errorf("pressure = %v %v %v, changes %d", mem, disk, pid, f.changes)
	}
	if len(f.reclaimed) != 0 {
		t.Errorf("memory pressure ran the garbage collectors: %v", f.reclaimed)
	}
	if !slices.Equal(f.counted, []string{"memory.available"}) {
		t.Errorf("OnEvict = %v", f.counted)
	}
	f.pods = []*corev1.Pod{g}
	m.Synchronize(context.Background())
	if len(f.evicted) != 2 || f.evicted[1].Pod != g {
		t.Errorf("second pass, still under pressure: evicted %v", names(podsOf(f.evicted)))
	}
	if f.changed(m) != 1 {
		t.Errorf("conditions republished without change: %d", f.changes)
	}
}

// Disk pressure reclaims containers and images first; no pod goes when
// that is enough.
func TestManagerReclaimsBeforeEvicting(t *testing.T) {
	p := pod("p", nil, nil, 0)
	full := Observations{NodeFSAvailable: {Available: 5, Capacity: 100}}
	th := []Threshold{{Signal: NodeFSAvailable, Value: Value{Percentage: 0.1}}}
	f := &fakeNode{obs: full, pods: []*corev1.Pod{p}, afterReclaim: Observations{NodeFSAvailable: {Available: 50, Capacity: 100}}}
	m := f.manager(t, th, false)
	if e := m.Synchronize(context.Background()); e != nil {
		t.Errorf("evicted %s although the reclaim freed enough", e.Pod.Name)
	}
	if !slices.Equal(f.reclaimed, []string{"containers", "images"}) {
		t.Errorf("reclaimed %v", f.reclaimed)
	}
	if _, disk, _ := m.Published().Pressure(); !disk {
		t.Error("DiskPressure not reported for the pass that found it")
	}
	// Not enough freed: a pod is evicted after the reclaim.
	f = &fakeNode{obs: full, pods: []*corev1.Pod{p}}
	m = f.manager(t, th, false)
	if e := m.Synchronize(context.Background()); e == nil || len(f.reclaimed) != 2 {
		t.Errorf("eviction %v after reclaim %v", e, f.reclaimed)
	}
	// With a dedicated image filesystem, nodefs pressure has nothing to
	// reclaim; imagefs pressure removes containers and images.
	f = &fakeNode{obs: full, pods: []*corev1.Pod{p}}
	m = f.manager(t, th, true)
	if m.Synchronize(context.Background()); len(f.reclaimed) != 0 || len(f.evicted) != 1 {
		t.Errorf("dedicated imagefs, nodefs pressure: reclaimed %v, evicted %d", f.reclaimed, len(f.evicted))
	}
	f = &fakeNode{obs: Observations{ImageFSAvailable: {Available: 5, Capacity: 100}}, pods: []*corev1.Pod{p}}
	m = f.manager(t, []Threshold{{Signal: ImageFSAvailable, Value: Value{Percentage: 0.15}}}, true)
	if m.Synchronize(context.Background()); !slices.Equal(f.reclaimed, []string{"containers", "images"}) {
		t.Errorf("dedicated imagefs, imagefs pressure: reclaimed %v", f.reclaimed)
	}
}

func TestManagerNoEvictionWithoutPressure(t *testing.T) {
	f := &fakeNode{obs: memObs(1 << 30), pods: []*corev1.Pod{pod("p", nil, nil, 0)}}
	m := f.manager(t, DefaultThresholds(), false)
	if e := m.Synchronize(context.Background()); e != nil || len(m.Published().Conditions()) != 0 || f.changed(m) != 0 {
		t.Errorf("eviction %v, conditions %v", e, m.Published().Conditions())
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without dependencies")
	}
}

func podsOf(es []Eviction) []*corev1.Pod {
	var out []*corev1.Pod
	for _, e := range es {
		out = append(out, e.Pod)
	}
	return out
}

// BenchmarkEvictionManager measures the CPU of one monitoring pass on an
// idle node: the real /proc, cgroups and statfs, the default thresholds,
// no pod to rank. It reports CPU time per pass (user + system, from
// getrusage, so waits do not count) and the share of one core at the
// default 10 s interval.
func BenchmarkEvictionManager(b *testing.B) {
	pc, err := DetectCgroups(cgroups.DriverCgroupfs, "/")
	if err != nil {
		b.Fatal("this benchmark measures the host's cgroups, and found none:", err)
	}
	host := Host{V2: pc.V2, MemoryRoot: pc.MemoryRoot, NodeFS: b.TempDir(), ImageFS: "/"}
	m, err := New(Config{Thresholds: DefaultThresholds(), Observe: host.Observe,
		ActivePods: func() []*corev1.Pod { return nil },
		PodStats:   func([]*corev1.Pod, corev1.ResourceName) map[types.UID]PodStats { return nil },
		Evict:      func(context.Context, Eviction) error { b.Fatal("evicted on an idle node"); return nil }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	before := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		m.Synchronize(ctx)
	}
	cpu := cpuTime() - before
	perPass := cpu.Seconds() * 1000 / float64(b.N)
	b.ReportMetric(perPass, "cpu-ms/pass")
	b.ReportMetric(perPass/1000/DefaultMonitoringInterval.Seconds()*100, "%core@10s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
