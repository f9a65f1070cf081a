package pleg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

func ctr(id string, st runtime.State) runtime.ContainerStatus {
	return runtime.ContainerStatus{ID: id, Name: "c-" + id, State: st}
}

func sb(id string, st runtime.State) runtime.SandboxStatus {
	return runtime.SandboxStatus{ID: id, State: st}
}

func pod(uid string, sbs []runtime.SandboxStatus, cs ...runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{UID: types.UID(uid), Sandboxes: sbs, Containers: cs}
}

func summary(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%s/%s/%s", e.PodUID, e.Type, e.Data)
	}
	return out
}

func TestComputeEvents(t *testing.T) {
	running, exited, created, unknown := runtime.StateRunning, runtime.StateExited, runtime.StateCreated, runtime.StateUnknown
	s1 := []runtime.SandboxStatus{sb("s1", running)}
	tests := []struct {
		name     string
		old, cur *runtime.PodStatus
		want     []string
	}{
		{"nothing changed", pod("p", s1, ctr("a", running)), pod("p", s1, ctr("a", running)), nil},
		{"new pod", nil, pod("p", s1, ctr("a", running)),
			[]string{"p/ContainerStarted/a", "p/SandboxChanged/s1"}},
		{"created then started", pod("p", s1, ctr("a", created)), pod("p", s1, ctr("a", running)),
			[]string{"p/ContainerStarted/a"}},
		{"new container created", pod("p", s1), pod("p", s1, ctr("a", created)),
			[]string{"p/PodSync/a"}},
		{"container became unknown", pod("p", s1, ctr("a", running)), pod("p", s1, ctr("a", unknown)),
			[]string{"p/PodSync/a"}},
		{"died", pod("p", s1, ctr("a", running)), pod("p", s1, ctr("a", exited)),
			[]string{"p/ContainerDied/a"}},
		{"started and died between relists", pod("p", s1), pod("p", s1, ctr("a", exited)),
			[]string{"p/ContainerDied/a"}},
		{"restart: old instance exited, new one runs", pod("p", s1, ctr("a1", running)),
			pod("p", s1, ctr("a2", running), ctr("a1", exited)),
			[]string{"p/ContainerStarted/a2", "p/ContainerDied/a1"}},
		{"removed after exit", pod("p", s1, ctr("a", exited)), pod("p", s1),
			[]string{"p/ContainerRemoved/a"}},
		{"removed while running", pod("p", s1, ctr("a", running)), pod("p", s1),
			[]string{"p/ContainerDied/a", "p/ContainerRemoved/a"}},
		{"sandbox died", pod("p", s1, ctr("a", exited)), pod("p", []runtime.SandboxStatus{sb("s1", exited)}, ctr("a", exited)),
			[]string{"p/SandboxChanged/s1"}},
		{"sandbox replaced", pod("p", s1), pod("p", []runtime.SandboxStatus{sb("s2", running), sb("s1", exited)}),
			[]string{"p/SandboxChanged/s2", "p/SandboxChanged/s1"}},
		{"pod gone", pod("p", s1, ctr("a", exited), ctr("b", running)), nil,
			[]string{"p/ContainerRemoved/a", "p/ContainerDied/b", "p/ContainerRemoved/b", "p/SandboxChanged/s1"}},
		{"both nil", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(computeEvents("p", tt.old, tt.cur))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// fakeRuntime is a List whose answer the test sets.
type fakeRuntime struct {
	mu    sync.Mutex
	pods  []runtime.PodStatus
	err   error
	calls int
}

func (f *fakeRuntime) set(err error, pods ...*runtime.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	f.pods = nil
	for _, p := range pods {
		f.pods = append(f.pods, *p)
	}
}

func (f *fakeRuntime) List(ctx context.Context) ([]runtime.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return append([]runtime.PodStatus(nil), f.pods...), nil
}

func (f *fakeRuntime) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func newPLEG(t *testing.T, cfg Config) (*PLEG, *fakeRuntime, *clocktesting.FakeClock) {
	t.Helper()
	rt := &fakeRuntime{}
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	cfg.List, cfg.Clock = rt.List, clk
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, rt, clk
}

func drain(p *PLEG) []string {
	var out []Event
	for {
		select {
		case e := <-p.Watch():
			out = append(out, e)
		default:
			slices.SortFunc(out, func(a, b Event) int { return cmpEvent(a, b) })
			return summary(out)
		}
	}
}

func cmpEvent(a, b Event) int {
	x, y := fmt.Sprint(a.PodUID, a.Type, a.Data), fmt.Sprint(b.PodUID, b.Type, b.Data)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func TestRelistEventsAndCache(t *testing.T) {
	p, rt, clk := newPLEG(t, Config{})
	ctx := context.Background()
	s1 := []runtime.SandboxStatus{sb("s1", runtime.StateRunning)}
	rt.set(nil, pod("p", s1, ctr("a", runtime.StateRunning)), pod("q", s1))
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := drain(p), []string{"p/ContainerStarted/a", "p/SandboxChanged/s1", "q/SandboxChanged/s1"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	st, at := p.Cache().Get("p")
	if len(st.Containers) != 1 || !at.Equal(clk.Now()) {
		t.Fatalf("cache: %+v at %v", st, at)
	}

	clk.Step(time.Second)
	rt.set(nil, pod("p", s1, ctr("a", runtime.StateExited)))
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := drain(p), []string{"p/ContainerDied/a", "q/SandboxChanged/s1"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if st, at := p.Cache().Get("q"); len(st.Sandboxes) != 0 || st.UID != "q" || !at.Equal(clk.Now()) {
		t.Fatalf("a vanished pod must read as empty as of the relist: %+v at %v", st, at)
	}
	if uids := p.Cache().UIDs(); len(uids) != 1 || uids[0] != "p" {
		t.Fatalf("cache pods %v", uids)
	}
}

func TestFullChannelDropsAndCounts(t *testing.T) {
	p, rt, _ := newPLEG(t, Config{Capacity: 2})
	rt.set(nil, pod("p", nil, ctr("a", runtime.StateRunning), ctr("b", runtime.StateRunning), ctr("c", runtime.StateRunning)))
	if err := p.Relist(context.Background()); err != nil { // must not block
		t.Fatal(err)
	}
	if got := len(drain(p)); got != 2 || p.Dropped() != 1 {
		t.Fatalf("delivered %d dropped %d, want 2 and 1", got, p.Dropped())
	}
}

func TestHealthy(t *testing.T) {
	p, rt, clk := newPLEG(t, Config{})
	ctx := context.Background()
	if ok, err := p.Healthy(); ok || !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("before any relist: %v %v", ok, err)
	}
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.Healthy(); !ok || err != nil {
		t.Fatalf("after a relist: %v %v", ok, err)
	}
	rt.set(errors.New("containerd down"))
	clk.Step(2 * time.Minute)
	if err := p.Relist(ctx); err == nil {
		t.Fatal("relist should fail")
	}
	if ok, _ := p.Healthy(); !ok {
		t.Fatal("2 minutes without a relist is still healthy")
	}
	clk.Step(time.Minute + time.Second)
	if ok, err := p.Healthy(); ok || !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("3m1s without a relist: %v %v", ok, err)
	}
	rt.set(nil)
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := p.Healthy(); !ok {
		t.Fatal("a successful relist restores health")
	}
}

func TestGetNewerThan(t *testing.T) {
	p, rt, clk := newPLEG(t, Config{})
	ctx := context.Background()
	rt.set(nil, pod("p", nil, ctr("a", runtime.StateRunning)))
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	// Already new enough: returns at once.
	st, err := p.Cache().GetNewerThan(ctx, "p", clk.Now())
	if err != nil || len(st.Containers) != 1 {
		t.Fatalf("got %+v, %v", st, err)
	}
	// Newer than anything cached: blocks until the next relist.
	clk.Step(time.Millisecond)
	event := clk.Now()
	got := make(chan *runtime.PodStatus, 1)
	go func() {
		st, err := p.Cache().GetNewerThan(ctx, "p", event)
		if err != nil {
			t.Error(err)
		}
		got <- st
	}()
	select {
	case <-got:
		t.Fatal("GetNewerThan returned a status older than asked")
	case <-time.After(50 * time.Millisecond):
	}
	rt.set(nil, pod("p", nil, ctr("a", runtime.StateExited)))
	if err := p.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-got:
		if st.Containers[0].State != runtime.StateExited {
			t.Fatalf("got %+v, want the new status", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetNewerThan did not wake up")
	}
	// A pod unknown to the runtime reads as empty once a relist is newer.
	if st, err := p.Cache().GetNewerThan(ctx, "nope", event); err != nil || st.UID != "nope" || len(st.Containers) != 0 {
		t.Fatalf("unknown pod: %+v %v", st, err)
	}
	// Timeout.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Cache().GetNewerThan(tctx, "p", clk.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
}

func TestRunRelistsOnPeriodAndHints(t *testing.T) {
	hints := make(chan struct{}, 1)
	p, rt, clk := newPLEG(t, Config{Events: hints, Period: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.Eventually(t, 5*time.Second, "the first relist", func() bool { return rt.count() == 1 && clk.HasWaiters() })
	clk.Step(time.Second)
	testkit.Eventually(t, 5*time.Second, "the second relist", func() bool { return rt.count() == 2 && clk.HasWaiters() })
	rt.set(nil, pod("p", nil, ctr("a", runtime.StateRunning)))
	hints <- struct{}{} // no clock step: the hint alone relists
	select {
	case e := <-p.Watch():
		if e.Type != ContainerStarted || e.Data != "a" {
			t.Fatalf("got %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a runtime hint did not trigger a relist")
	}
	close(hints) // a closed stream must not spin
	testkit.Eventually(t, 5*time.Second, "the relist loop waiting on the clock", func() bool { return clk.HasWaiters() })
	n := rt.count()
	time.Sleep(20 * time.Millisecond)
	if rt.count() > n+1 {
		t.Fatalf("relisting in a loop after the hint channel closed: %d -> %d", n, rt.count())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}
