package prober

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// scriptExec is a fake Exec: the command's first word picks a script of
// exit codes, returned in order (the last one repeats; none: 0).
type scriptExec struct {
	mu      sync.Mutex
	scripts map[string][]int
	calls   map[string]int
	called  chan string // if set, gets the first word of each call
}

func newScriptExec(scripts map[string][]int) *scriptExec {
	return &scriptExec{scripts: scripts, calls: map[string]int{}}
}

func (s *scriptExec) exec(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, int, error) {
	s.mu.Lock()
	n := s.calls[cmd[0]]
	s.calls[cmd[0]]++
	codes := s.scripts[cmd[0]]
	s.mu.Unlock()
	code := 0
	if len(codes) > 0 {
		code = codes[min(n, len(codes)-1)]
	}
	if s.called != nil {
		s.called <- cmd[0]
	}
	return []byte(fmt.Sprintf("%s exit %d", cmd[0], code)), code, nil
}

func (s *scriptExec) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func execProbe(cmd string, mod func(*corev1.Probe)) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

// testPod is pod web/ns (uid-1) with the given containers (default: one
// container "app" without probes).
func testPod(containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app"}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{Containers: containers},
		Status:     corev1.PodStatus{PodIP: "127.0.0.1"},
	}
}

// syncHarness is a Manager whose workers are not started: the test calls
// their doProbe itself.
type syncHarness struct {
	m       *Manager
	clock   *testingclock.FakeClock
	exec    *scriptExec
	events  *eventLog
	results atomic.Int32 // updates sent
	mu      sync.Mutex
	workers map[string]*worker // by container name and type
	ctxs    map[*worker]context.Context
}

func newSyncHarness(scripts map[string][]int) *syncHarness {
	h := &syncHarness{
		clock:   testingclock.NewFakeClock(t0),
		exec:    newScriptExec(scripts),
		events:  &eventLog{},
		workers: map[string]*worker{},
		ctxs:    map[*worker]context.Context{},
	}
	h.m = New(Config{
		Exec:     h.exec.exec,
		Clock:    h.clock,
		Log:      slog.New(slog.DiscardHandler),
		Recorder: h.events.record,
	})
	h.m.spawn = func(ctx context.Context, w *worker) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.workers[w.name+"/"+w.typ.String()] = w
		h.ctxs[w] = ctx
	}
	return h
}

// updates counts the updates sent so far (the probes run in the test's
// goroutine, so every send is already in the channel's buffer).
func (h *syncHarness) updates() int {
	for {
		select {
		case <-h.m.Updates():
			h.results.Add(1)
		default:
			return int(h.results.Load())
		}
	}
}

func (h *syncHarness) worker(t *testing.T, name string, typ ProbeType) *worker {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.workers[name+"/"+typ.String()]
	if w == nil {
		t.Fatalf("no %s worker for %s", typ, name)
	}
	return w
}

func (h *syncHarness) stopped(w *worker) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctxs[w].Err() != nil
}

func (h *syncHarness) probe(w *worker) time.Duration {
	h.mu.Lock()
	ctx := h.ctxs[w]
	h.mu.Unlock()
	return w.doProbe(ctx)
}

func running(name, id string, startedAt time.Time) ContainerState {
	return ContainerState{Name: name, ID: id, Running: true, StartedAt: startedAt}
}

func summary(r ContainerResults) string {
	s := fmt.Sprintf("started=%v ready=%v", r.Started, r.Ready)
	if r.Failed != nil {
		s += " failed=" + r.Failed.Probe.String()
	}
	return s
}

// TestThresholds runs one probe through a script of exit codes and checks
// the results after each probe.
func TestThresholds(t *testing.T) {
	thresholds := func(success, failure int32) func(*corev1.Probe) {
		return func(p *corev1.Probe) { p.SuccessThreshold, p.FailureThreshold = success, failure }
	}
	const (
		notReady = "started=true ready=false"
		ready    = "started=true ready=true"
		live     = ready
		dead     = "started=true ready=true failed=Liveness"
	)
	tests := []struct {
		name      string
		typ       ProbeType
		mod       func(*corev1.Probe)
		codes     []int
		want      []string // after each probe
		wantCalls int
	}{
		{name: "readiness success", typ: Readiness, codes: []int{0}, want: []string{ready}},
		{name: "readiness success threshold 3", typ: Readiness, mod: thresholds(3, 3), codes: []int{0, 0, 0},
			want: []string{notReady, notReady, ready}},
		{name: "readiness failure threshold 2", typ: Readiness, mod: thresholds(1, 2), codes: []int{0, 1, 1, 0},
			want: []string{ready, ready, notReady, ready}},
		{name: "readiness flapping below threshold", typ: Readiness, mod: thresholds(1, 2), codes: []int{0, 1, 0, 1, 0},
			want: []string{ready, ready, ready, ready, ready}},
		{name: "liveness fails after 3", typ: Liveness, codes: []int{1, 1, 1, 1, 1},
			want: []string{live, live, dead, dead, dead}, wantCalls: 3},
		{name: "liveness success resets the count", typ: Liveness, codes: []int{1, 1, 0, 1, 1, 0},
			want: []string{live, live, live, live, live, live}},
		{name: "liveness failure threshold 1", typ: Liveness, mod: thresholds(1, 1), codes: []int{0, 1},
			want: []string{live, dead}},
		{name: "startup succeeds then stops probing", typ: Startup, codes: []int{1, 1, 0, 1},
			want: []string{"started=false ready=false", "started=false ready=false", ready, ready}, wantCalls: 3},
		{name: "startup fails", typ: Startup, mod: thresholds(1, 2), codes: []int{1, 1, 0},
			want: []string{"started=false ready=false", "started=false ready=false failed=Startup",
				"started=false ready=false failed=Startup"}, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSyncHarness(map[string][]int{"check": tt.codes})
			c := corev1.Container{Name: "app"}
			switch p := execProbe("check", tt.mod); tt.typ {
			case Liveness:
				c.LivenessProbe = p
			case Readiness:
				c.ReadinessProbe = p
			case Startup:
				c.StartupProbe = p
			}
			pod := testPod(c)
			h.m.UpdatePod(pod, "", []ContainerState{running("app", "containerd://c1", t0)})
			w := h.worker(t, "app", tt.typ)
			changes := 0
			last := summary(h.m.Results(pod.UID)["app"])
			for i, want := range tt.want {
				h.probe(w)
				got := summary(h.m.Results(pod.UID)["app"])
				if got != want {
					t.Errorf("after probe %d: %s, want %s", i+1, got, want)
				}
				if got != last {
					changes++
				}
				last = got
			}
			if tt.wantCalls != 0 && h.exec.count("check") != tt.wantCalls {
				t.Errorf("%d probes ran, want %d", h.exec.count("check"), tt.wantCalls)
			}
			if got := h.updates(); got != changes {
				t.Errorf("%d updates for %d changes", got, changes)
			}
		})
	}
}

func TestInitialDelay(t *testing.T) {
	delayed := func(p *corev1.Probe) { p.InitialDelaySeconds = 10 }
	tests := []struct {
		name      string
		startedAt time.Time
		steps     []time.Duration // clock steps before each probe
		wantLeft  []time.Duration // doProbe's result after each step
		wantCalls int
	}{
		{name: "just started", startedAt: t0, steps: []time.Duration{0, 9 * time.Second, time.Second},
			wantLeft: []time.Duration{10 * time.Second, time.Second, 0}, wantCalls: 1},
		{name: "started long ago", startedAt: t0.Add(-time.Minute), steps: []time.Duration{0},
			wantLeft: []time.Duration{0}, wantCalls: 1},
		{name: "unknown start counts from now", steps: []time.Duration{0, 5 * time.Second},
			wantLeft: []time.Duration{10 * time.Second, 5 * time.Second}, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSyncHarness(nil)
			pod := testPod(corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", delayed)})
			h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", tt.startedAt)})
			w := h.worker(t, "app", Readiness)
			for i, step := range tt.steps {
				h.clock.Step(step)
				if left := h.probe(w); left != tt.wantLeft[i] {
					t.Errorf("probe %d: %v of delay left, want %v", i+1, left, tt.wantLeft[i])
				}
			}
			if got := h.exec.count("ready"); got != tt.wantCalls {
				t.Errorf("%d probes ran, want %d", got, tt.wantCalls)
			}
			if ready := h.m.Results(pod.UID)["app"].Ready; ready != (tt.wantCalls > 0) {
				t.Errorf("ready = %v", ready)
			}
		})
	}
}

// TestStartupGates: liveness and readiness wait for startup; startup's
// success triggers readiness at once.
func TestStartupGates(t *testing.T) {
	h := newSyncHarness(map[string][]int{"start": {1, 0}, "live": {0}, "ready": {0}})
	pod := testPod(corev1.Container{
		Name:           "app",
		StartupProbe:   execProbe("start", nil),
		LivenessProbe:  execProbe("live", nil),
		ReadinessProbe: execProbe("ready", nil),
	})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	live, ready, start := h.worker(t, "app", Liveness), h.worker(t, "app", Readiness), h.worker(t, "app", Startup)

	check := func(step, want string, calls ...int) {
		t.Helper()
		if got := summary(h.m.Results(pod.UID)["app"]); got != want {
			t.Errorf("%s: %s, want %s", step, got, want)
		}
		for i, name := range []string{"start", "live", "ready"} {
			if got := h.exec.count(name); got != calls[i] {
				t.Errorf("%s: %d %s probes, want %d", step, got, name, calls[i])
			}
		}
	}
	h.probe(live)
	h.probe(ready)
	check("before startup", "started=false ready=false", 0, 0, 0)
	h.probe(start)
	h.probe(live)
	h.probe(ready)
	check("startup failed once", "started=false ready=false", 1, 0, 0)
	if len(ready.triggerCh) != 0 {
		t.Error("readiness triggered before startup succeeded")
	}
	h.probe(start)
	check("startup succeeded", "started=true ready=false", 2, 0, 0)
	if len(ready.triggerCh) != 1 {
		t.Error("readiness not triggered by startup's success")
	}
	h.probe(ready)
	h.probe(live)
	h.probe(start)
	check("started", "started=true ready=true", 2, 1, 1)
	if ok, known := h.m.Startup("containerd://c1"); !ok || !known {
		t.Errorf("Startup() = %v, %v", ok, known)
	}
	if ok, known := h.m.Readiness("c1"); !ok || !known {
		t.Errorf("Readiness() = %v, %v", ok, known)
	}
	if _, known := h.m.Readiness("c2"); known {
		t.Error("Readiness of an unknown container is known")
	}
}

// TestNewInstanceResets: a new container ID gets new workers and fresh
// results; the old workers stop and their late results are ignored.
func TestNewInstanceResets(t *testing.T) {
	h := newSyncHarness(map[string][]int{"live": {1}, "ready": {0}})
	pod := testPod(corev1.Container{
		Name:           "app",
		LivenessProbe:  execProbe("live", func(p *corev1.Probe) { p.FailureThreshold = 1 }),
		ReadinessProbe: execProbe("ready", nil),
	})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	oldLive, oldReady := h.worker(t, "app", Liveness), h.worker(t, "app", Readiness)
	h.probe(oldReady)
	h.probe(oldLive)
	if got := summary(h.m.Results(pod.UID)["app"]); got != "started=true ready=true failed=Liveness" {
		t.Fatalf("first instance: %s", got)
	}
	// Same instance again: nothing changes.
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0)})
	if h.worker(t, "app", Liveness) != oldLive || h.stopped(oldLive) {
		t.Fatal("the same instance got a new worker")
	}
	// Restarted: the exited instance first, as the runtime lists them.
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c2", t0), {Name: "app", ID: "c1"}})
	r := h.m.Results(pod.UID)["app"]
	if r.ContainerID != "c2" || summary(r) != "started=true ready=false" {
		t.Errorf("new instance: %s %s", r.ContainerID, summary(r))
	}
	if !h.stopped(oldLive) || !h.stopped(oldReady) {
		t.Error("the old instance's workers were not stopped")
	}
	if h.worker(t, "app", Readiness) == oldReady {
		t.Error("no new readiness worker")
	}
	calls := h.exec.count("ready")
	h.probe(oldReady)
	if h.exec.count("ready") != calls || h.m.Results(pod.UID)["app"].Ready {
		t.Error("a stopped worker probed or recorded")
	}
	if _, known := h.m.Readiness("c1"); known {
		t.Error("the old instance's results are still known")
	}
}

func TestContainerStops(t *testing.T) {
	h := newSyncHarness(nil)
	pod := testPod(corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", nil)}, corev1.Container{Name: "plain"})
	h.m.UpdatePod(pod, "", []ContainerState{running("app", "c1", t0), running("plain", "c2", t0)})
	w := h.worker(t, "app", Readiness)
	if got := summary(h.m.Results(pod.UID)["plain"]); got != "started=true ready=true" {
		t.Errorf("container without probes: %s", got)
	}
	h.m.UpdatePod(pod, "", []ContainerState{{Name: "app", ID: "c1", Running: false}, running("plain", "c2", t0)})
	if !h.stopped(w) {
		t.Error("worker of a stopped container still runs")
	}
	if _, ok := h.m.Results(pod.UID)["app"]; ok {
		t.Error("results of a stopped container are kept")
	}
	h.m.RemovePod(pod.UID)
	if r := h.m.Results(pod.UID); r != nil {
		t.Errorf("results of a removed pod: %v", r)
	}
}

// TestPodDeletion: a pod being deleted stops liveness and startup and
// counts them as succeeded; readiness goes on.
func TestPodDeletion(t *testing.T) {
	h := newSyncHarness(map[string][]int{"live": {1}, "start": {1}})
	pod := testPod(corev1.Container{
		Name:           "app",
		LivenessProbe:  execProbe("live", func(p *corev1.Probe) { p.FailureThreshold = 1 }),
		ReadinessProbe: execProbe("ready", nil),
	}, corev1.Container{Name: "slow", StartupProbe: execProbe("start", nil)})
	cs := []ContainerState{running("app", "c1", t0), running("slow", "c2", t0)}
	h.m.UpdatePod(pod, "", cs)
	live, ready, start := h.worker(t, "app", Liveness), h.worker(t, "app", Readiness), h.worker(t, "slow", Startup)
	h.probe(live)
	if h.m.Results(pod.UID)["app"].Failed == nil {
		t.Fatal("liveness did not fail")
	}
	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	h.m.UpdatePod(deleting, "", cs)
	res := h.m.Results(pod.UID)
	if got := summary(res["app"]); got != "started=true ready=false" {
		t.Errorf("app: %s", got)
	}
	if got := summary(res["slow"]); got != "started=true ready=true" {
		t.Errorf("slow: %s", got)
	}
	if !h.stopped(live) || !h.stopped(start) || h.stopped(ready) {
		t.Errorf("stopped: liveness %v, startup %v, readiness %v", h.stopped(live), h.stopped(start), h.stopped(ready))
	}
	h.probe(ready)
	if !h.m.Results(pod.UID)["app"].Ready {
		t.Error("readiness stopped during deletion")
	}
	// An instance started during the deletion gets no liveness worker.
	h.m.UpdatePod(deleting, "", []ContainerState{running("app", "c3", t0), running("slow", "c2", t0)})
	if h.worker(t, "app", Liveness) != live || h.worker(t, "app", Readiness) == ready {
		t.Error("workers of the new instance: want readiness only")
	}
	if got := summary(h.m.Results(pod.UID)["app"]); got != "started=true ready=false" {
		t.Errorf("new instance during deletion: %s", got)
	}
}

// TestFailureDetails: the kill reason, message and grace period.
func TestFailureDetails(t *testing.T) {
	grace := int64(5)
	always := corev1.ContainerRestartPolicyAlways
	h := newSyncHarness(map[string][]int{"live": {1}, "start": {1}})
	pod := testPod(corev1.Container{
		Name: "app",
		LivenessProbe: execProbe("live", func(p *corev1.Probe) {
			p.FailureThreshold = 1
			p.TerminationGracePeriodSeconds = &grace
		}),
	})
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "side", RestartPolicy: &always, StartupProbe: execProbe("start", func(p *corev1.Probe) { p.FailureThreshold = 1 })},
		{Name: "init", LivenessProbe: execProbe("live", nil)}, // not a sidecar: not probed
	}
	h.m.UpdatePod(pod, "10.1.1.1", []ContainerState{
		running("app", "c1", t0), running("side", "c2", t0), running("init", "c3", t0),
	})
	h.probe(h.worker(t, "app", Liveness))
	h.probe(h.worker(t, "side", Startup))
	res := h.m.Results(pod.UID)
	if len(res) != 2 {
		t.Errorf("results for %d containers, want app and side", len(res))
	}
	want := map[string]ProbeFailure{
		"app":  {Probe: Liveness, Reason: "LivenessProbe", Message: "Container app failed liveness probe", Output: "live exit 1"},
		"side": {Probe: Startup, Reason: "StartupProbe", Message: "Init container side failed startup probe", Output: "start exit 1"},
	}
	for name, w := range want {
		f := res[name].Failed
		if f == nil {
			t.Errorf("%s: not failed", name)
			continue
		}
		g := f.TerminationGracePeriodSeconds
		f.TerminationGracePeriodSeconds = nil
		if *f != w {
			t.Errorf("%s: %+v, want %+v", name, *f, w)
		}
		if (name == "app") != (g != nil && *g == grace) {
			t.Errorf("%s: grace %v", name, g)
		}
	}
	events := h.events.get()
	if len(events) != 2 || events[0].message != "Liveness probe failed: live exit 1" ||
		events[1].message != "Startup probe failed: start exit 1" || events[0].reason != "Unhealthy" ||
		events[0].container != "app" || events[1].container != "side" {
		t.Errorf("events: %v", events)
	}
}
