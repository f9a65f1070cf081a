package pleg

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/runtime"
)

// fakeMetrics records what the PLEG reports.
type fakeMetrics struct {
	relists    [][2]time.Duration // took, interval
	seen       []time.Time
	running    int
	containers map[string]int
	discarded  int
}

func (f *fakeMetrics) ObserveRelist(took, interval time.Duration) {
	f.relists = append(f.relists, [2]time.Duration{took, interval})
}

func (f *fakeMetrics) ObserveRuntimePods(ts time.Time, running int, containers map[string]int) {
	f.seen, f.running, f.containers = append(f.seen, ts), running, containers
}

func (f *fakeMetrics) DiscardedEvent() { f.discarded++ }

// TestMetrics: every relist is timed (failed ones too), the interval is
// since the last successful one, and a successful one reports the pods
// with a running sandbox and the containers by state.
func TestMetrics(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	var pods []runtime.PodStatus
	var listErr error
	list := func(context.Context) ([]runtime.PodStatus, error) {
		clk.Step(30 * time.Millisecond) // the listing takes 30ms
		return pods, listErr
	}
	m := &fakeMetrics{}
	p, err := New(Config{List: list, Clock: clk, Capacity: 1, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	running, exited := []runtime.SandboxStatus{sb("s1", runtime.StateRunning)}, []runtime.SandboxStatus{sb("s0", runtime.StateExited)}
	pods = []runtime.PodStatus{
		*pod("a", append(running, exited...), ctr("a1", runtime.StateRunning), ctr("a0", runtime.StateExited)),
		*pod("b", exited, ctr("b1", runtime.StateExited)),
		*pod("c", running, ctr("c1", runtime.StateCreated), ctr("c2", runtime.StateRunning)),
	}
	ctx := context.Background()
	if err := p.Relist(ctx); err != nil { // 6 events on a channel of 1: 5 dropped
		t.Fatal(err)
	}
	start := clk.Now()
	clk.Step(time.Second)
	listErr = errors.New("containerd down")
	if err := p.Relist(ctx); err == nil {
		t.Fatal("relist should fail")
	}
	ms := 30 * time.Millisecond
	want := [][2]time.Duration{{ms, 0}, {ms, time.Second + ms}}
	if len(m.relists) != 2 || m.relists[0] != want[0] || m.relists[1] != want[1] {
		t.Errorf("relists %v, want %v", m.relists, want)
	}
	if len(m.seen) != 1 || !m.seen[0].Equal(start.Add(-ms)) {
		t.Errorf("successful relists seen at %v, want one at %v", m.seen, start.Add(-ms))
	}
	if wantC := map[string]int{"running": 2, "exited": 2, "created": 1}; m.running != 2 || !maps.Equal(m.containers, wantC) {
		t.Errorf("running pods %d containers %v, want 2 and %v", m.running, m.containers, wantC)
	}
	if m.discarded != int(p.Dropped()) || m.discarded == 0 {
		t.Errorf("discarded %d, dropped %d", m.discarded, p.Dropped())
	}
}
