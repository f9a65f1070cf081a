package prober

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/test/testkit"
)

// harness is a Manager with running workers, a fake clock and a fake
// Exec that reports each call.
type harness struct {
	m      *Manager
	clock  *testingclock.FakeClock
	exec   *scriptExec
	synced chan types.UID // from Updates
}

func newHarness(t *testing.T, scripts map[string][]int) *harness {
	t.Helper()
	h := &harness{
		clock:  testingclock.NewFakeClock(t0),
		exec:   newScriptExec(scripts),
		synced: make(chan types.UID, 100),
	}
	h.exec.called = make(chan string, 1000)
	h.m = New(Config{
		Exec:  h.exec.exec,
		Clock: h.clock,
		Log:   slog.New(slog.DiscardHandler),
	})
	t.Cleanup(h.m.Stop)
	go func() {
		for uid := range h.m.Updates() {
			h.synced <- uid
		}
	}()
	return h
}

const waitLimit = 10 * time.Second

// called waits for the next exec call and returns its command.
func (h *harness) called(t *testing.T) string {
	t.Helper()
	select {
	case c := <-h.exec.called:
		return c
	case <-time.After(waitLimit):
		t.Fatal("no probe ran")
		return ""
	}
}

func (h *harness) waitSync(t *testing.T) {
	t.Helper()
	select {
	case <-h.synced:
	case <-time.After(waitLimit):
		t.Fatal("no update from the prober")
	}
}

// waitWaiters waits until n timers or tickers wait on the fake clock.
func (h *harness) waitWaiters(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, waitLimit, fmt.Sprintf("%d clock waiters", n), func() bool { return h.clock.Waiters() >= n })
}

// TestLivenessEndToEnd: a failing liveness probe runs every period and
// fails the container after failureThreshold probes, which asks for a
// sync.
func TestLivenessEndToEnd(t *testing.T) {
	h := newHarness(t, map[string][]int{"live": {1}})
	pod := testPod(corev1.Container{Name: "app", LivenessProbe: execProbe("live", func(p *corev1.Probe) { p.PeriodSeconds = 3 })})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	h.called(t) // at once
	for i := 2; i <= 3; i++ {
		if f := h.m.Results(pod.UID)["app"].Failed; f != nil {
			t.Fatalf("failed after %d probes", i-1)
		}
		h.clock.Step(3 * time.Second)
		h.called(t)
	}
	h.waitSync(t)
	f := h.m.Results(pod.UID)["app"].Failed
	if f == nil || f.Probe != Liveness || f.Output != "live exit 1" {
		t.Fatalf("failure = %+v", f)
	}
}

// TestStartupTriggersReadiness: readiness probes as soon as startup
// succeeds, without waiting for its period.
func TestStartupTriggersReadiness(t *testing.T) {
	h := newHarness(t, nil)
	pod := testPod(corev1.Container{
		Name:           "app",
		StartupProbe:   execProbe("start", nil),
		ReadinessProbe: execProbe("ready", func(p *corev1.Probe) { p.PeriodSeconds = 3600 }),
	})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	// The readiness period is an hour of a clock that does not move.
	testkit.Eventually(t, waitLimit, "app ready", func() bool { return h.m.Results(pod.UID)["app"].Ready })
}

// TestInitialDelayTimer: the first probe runs when the initial delay ends,
// not at the next period.
func TestInitialDelayTimer(t *testing.T) {
	h := newHarness(t, nil)
	pod := testPod(corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", func(p *corev1.Probe) {
		p.InitialDelaySeconds = 5
		p.PeriodSeconds = 60
	})})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	h.waitWaiters(t, 2) // the ticker and the delay's timer
	h.clock.Step(4 * time.Second)
	select {
	case <-h.exec.called:
		t.Fatal("probed during the initial delay")
	default:
	}
	h.waitWaiters(t, 2)
	h.clock.Step(time.Second)
	h.called(t)
	h.waitSync(t)
	if !h.m.Results(pod.UID)["app"].Ready {
		t.Error("not ready")
	}
}

// TestHTTPReadinessEndToEnd probes a real server on 127.0.0.1 through a
// named port and the pod IP.
func TestHTTPReadinessEndToEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	h := newHarness(t, nil)
	pod := testPod(corev1.Container{
		Name:  "app",
		Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("web")},
		}},
	})
	pod.Status.PodIP = ""
	h.m.UpdatePod(pod, host, []ContainerState{running("app", "c1", t0)})
	h.waitSync(t)
	if ok, known := h.m.Readiness("containerd://c1"); !ok || !known {
		t.Errorf("Readiness = %v, %v", ok, known)
	}
}

// TestStopEndsWorkers: RemovePod and Stop end the workers' goroutines,
// Stop waits for them, and UpdatePod after Stop starts none.
func TestStopEndsWorkers(t *testing.T) {
	base := runtime.NumGoroutine()
	h := newHarness(t, nil)
	h.exec.called = nil
	var live atomic.Int32
	h.m.spawn = func(ctx context.Context, w *worker) { // the default, counted
		live.Add(1)
		h.m.wg.Add(1)
		go func() {
			defer h.m.wg.Done()
			defer live.Add(-1)
			w.run(ctx)
		}()
	}
	probes := func(p *corev1.Probe) { p.PeriodSeconds = 1 }
	for i := range 10 {
		pod := testPod(corev1.Container{
			Name:           "app",
			StartupProbe:   execProbe("start", probes),
			LivenessProbe:  execProbe("live", probes),
			ReadinessProbe: execProbe("ready", probes),
		})
		pod.UID = types.UID(fmt.Sprint("uid-", i))
		h.m.UpdatePod(pod, "", []ContainerState{running("app", fmt.Sprint("c", i), t0)})
	}
	if n := live.Load(); n != 30 {
		t.Fatalf("%d workers, want 30", n)
	}
	h.clock.Step(time.Second)
	h.m.RemovePod("uid-0")
	testkit.Eventually(t, waitLimit, "27 live probes", func() bool { return live.Load() == 27 })
	h.m.Stop()
	if n := live.Load(); n != 0 {
		t.Errorf("%d workers still run after Stop", n)
	}
	// A goroutine lingers for a moment after its wg.Done.
	testkit.Eventually(t, waitLimit, "the probe goroutines gone", func() bool { return runtime.NumGoroutine() <= base })
	pod := testPod(corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", nil)})
	pod.DeletionTimestamp = &metav1.Time{Time: t0}
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c99", t0)})
	if n := live.Load(); n != 0 {
		t.Errorf("UpdatePod after Stop started %d workers", n)
	}
	if r := h.m.Results(pod.UID); r != nil {
		t.Errorf("results after Stop: %v", r)
	}
}
