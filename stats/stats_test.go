package stats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/stats"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeRuntime returns the containers (or the error) it was last given.
type fakeRuntime struct {
	mu   sync.Mutex
	list []runtime.ContainerMetrics
	err  error
}

func (f *fakeRuntime) ContainerMetrics(context.Context) ([]runtime.ContainerMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]runtime.ContainerMetrics(nil), f.list...), f.err
}

func (f *fakeRuntime) set(err error, list ...runtime.ContainerMetrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list, f.err = list, err
}

// fakeNode is a fake proc root whose numbers the test sets.
type fakeNode struct {
	dir string
	now time.Time
}

// meminfo in kB: total, free, available, inactive(file), anon.
const meminfo = `MemTotal:        8000000 kB
MemFree:         2000000 kB
MemAvailable:    5000000 kB
Buffers:          100000 kB
Active(file):    1200000 kB
Inactive(file):  1000000 kB
AnonPages:       1500000 kB
HugePages_Total:       0
`

const vmstat = "nr_free_pages 500000\npgfault 12345\npgmajfault 67\npgrefill 0\n"

// write sets the node's busy CPU time to busy ticks (spread over the
// busy columns, with idle, iowait and guest time that must not count).
func (n *fakeNode) write(t *testing.T, busy uint64) {
	t.Helper()
	user, system := busy/2, busy-busy/2-3
	stat := fmt.Sprintf("cpu  %d 1 %d 99999 555 1 1 0 777 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1 2 3\nctxt 42\nbtime 1700000000\nprocesses 9\n", user, system)
	files := map[string]string{"stat": stat, "meminfo": meminfo, "vmstat": vmstat}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newCollector(t *testing.T, rt stats.Runtime) (*stats.Collector, *fakeNode) {
	t.Helper()
	n := &fakeNode{dir: t.TempDir(), now: t0}
	n.write(t, 1000)
	c, err := stats.New(stats.Config{NodeName: "node-1", Runtime: rt, ProcRoot: n.dir, Now: func() time.Time { return n.now }})
	if err != nil {
		t.Fatal(err)
	}
	return c, n
}

func sample(t *testing.T, c *stats.Collector) {
	t.Helper()
	if err := c.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// cm is a container reading at t0+at with CPU time cpu (ns) and working
// set ws.
func cm(pod, name, id string, at time.Duration, cpu, ws uint64) runtime.ContainerMetrics {
	return runtime.ContainerMetrics{
		PodUID: types.UID("uid-" + pod), PodName: pod, PodNamespace: "default",
		Name: name, Sandbox: name == "", ID: id,
		StartedAt: t0.Add(-time.Minute), Timestamp: t0.Add(at),
		CPUUsageNanoseconds: cpu, MemoryUsageBytes: ws + 1000, WorkingSetBytes: ws,
		RSSBytes: ws / 2, PageFaults: 10, MajorPageFaults: 1,
	}
}

func inPod(m runtime.ContainerMetrics, ns, uid string) runtime.ContainerMetrics {
	m.PodNamespace, m.PodUID = ns, types.UID("uid-"+uid)
	return m
}

func TestNewRequires(t *testing.T) {
	if _, err := stats.New(stats.Config{Runtime: &fakeRuntime{}}); err == nil {
		t.Error("no error without NodeName")
	}
	if _, err := stats.New(stats.Config{NodeName: "n"}); err == nil {
		t.Error("no error without Runtime")
	}
}

func TestNodeStats(t *testing.T) {
	c, n := newCollector(t, &fakeRuntime{})
	if s := c.Summary(); s.Node.NodeName != "node-1" || s.Node.CPU != nil || s.Node.Memory != nil || s.Pods == nil {
		t.Fatalf("before any sample: %+v", s)
	}
	sample(t, c)
	node := c.Summary().Node
	if node.CPU == nil || node.Memory == nil {
		t.Fatalf("node = %+v", node)
	}
	if got := *node.CPU.UsageCoreNanoSeconds; got != 1000*uint64(10*time.Millisecond) {
		t.Errorf("node CPU = %d ns, want 10s", got)
	}
	if node.CPU.UsageNanoCores != nil {
		t.Errorf("a rate after one sample: %d", *node.CPU.UsageNanoCores)
	}
	if !node.StartTime.Time.Equal(time.Unix(1700000000, 0)) || !node.CPU.Time.Time.Equal(t0) || !node.Memory.Time.Time.Equal(t0) {
		t.Errorf("times: start %v cpu %v memory %v", node.StartTime, node.CPU.Time, node.Memory.Time)
	}
	const kB = 1024
	m := node.Memory
	for _, f := range []struct {
		name      string
		got, want *uint64
	}{
		{"available", m.AvailableBytes, ptr(5000000 * kB)},
		{"usage", m.UsageBytes, ptr(6000000 * kB)},
		{"working set", m.WorkingSetBytes, ptr(5000000 * kB)},
		{"rss", m.RSSBytes, ptr(1500000 * kB)},
		{"page faults", m.PageFaults, ptr(12345)},
		{"major page faults", m.MajorPageFaults, ptr(67)},
	} {
		if f.got == nil || *f.got != *f.want {
			t.Errorf("node memory %s = %v, want %d", f.name, deref(f.got), *f.want)
		}
	}

	// Ten seconds later, 15 s of busy CPU more: 1.5 cores.
	n.now = t0.Add(10 * time.Second)
	n.write(t, 2500)
	sample(t, c)
	if r := c.Summary().Node.CPU.UsageNanoCores; r == nil || *r != 1_500_000_000 {
		t.Errorf("node rate = %v, want 1.5 cores", deref(r))
	}
}

func TestNodeProcErrors(t *testing.T) {
	good := map[string]string{
		"stat":    "cpu  1 2 3 4 5 6 7 8\nbtime 1700000000\n",
		"meminfo": meminfo,
		"vmstat":  vmstat,
	}
	for _, tc := range []struct {
		name, file, data, want string
	}{
		{"no btime", "stat", "cpu  1 2 3 4\n", "btime"},
		{"short cpu line", "stat", "cpu  1 2 3\nbtime 1\n", "columns"},
		{"bad cpu value", "stat", "cpu  1 x 3 4\nbtime 1\n", "column 2"},
		{"no MemAvailable", "meminfo", "MemTotal: 1 kB\nMemFree: 1 kB\nInactive(file): 1 kB\n", "missing"},
		{"bad meminfo unit", "meminfo", strings.Replace(meminfo, "8000000 kB", "8000000 MB", 1), "MemTotal"},
		{"no pgmajfault", "vmstat", "pgfault 1\n", "pgmajfault"},
		{"no vmstat", "vmstat", "", "vmstat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range good {
				if name == tc.file {
					if tc.data == "" {
						continue
					}
					data = tc.data
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, err := stats.New(stats.Config{NodeName: "n", Runtime: &fakeRuntime{}, ProcRoot: dir})
			if err != nil {
				t.Fatal(err)
			}
			err = c.Sample(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error = %v, want one naming %s and %q", err, tc.file, tc.want)
			}
			if c.Summary().Node.CPU != nil {
				t.Error("node CPU reported from a failed sample")
			}
		})
	}
}

func TestPodStats(t *testing.T) {
	rt := &fakeRuntime{}
	c, _ := newCollector(t, rt)
	sandbox := cm("web", "", "sb", 0, 1e9, 100)
	app := cm("web", "app", "app1", 0, 10e9, 4000)
	other := inPod(cm("other", "c", "o1", 0, 1, 1), "a", "other")
	rt.set(nil, app, sandbox, other)
	sample(t, c)
	web := findPod(t, c.Summary(), "web")
	if web.CPU.UsageNanoCores != nil || web.Containers[0].CPU.UsageNanoCores != nil {
		t.Error("a rate after one sample")
	}

	// Ten seconds later: the sandbox used 0.1 core, the app 0.5; a
	// sidecar appeared (no rate yet) and the app restarted before (an
	// older instance still runs).
	sandbox = cm("web", "", "sb", 10*time.Second, 2e9, 200)
	app = cm("web", "app", "app1", 10*time.Second, 15e9, 5000)
	sidecar := cm("web", "sidecar", "side1", 10*time.Second, 3e9, 700)
	oldApp := cm("web", "app", "app0", 10*time.Second, 99e9, 10)
	oldApp.StartedAt = app.StartedAt.Add(-time.Hour)
	rt.set(nil, sidecar, oldApp, app, sandbox, other)
	sample(t, c)
	s := c.Summary()
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "other" || s.Pods[1].PodRef.Name != "web" {
		t.Fatalf("pods not ordered by namespace and name: %+v", s.Pods)
	}
	web = s.Pods[1]
	if web.PodRef != (statsv1alpha1.PodReference{Name: "web", Namespace: "default", UID: "uid-web"}) || !web.StartTime.Time.Equal(sandbox.StartedAt) {
		t.Errorf("pod ref %+v start %v", web.PodRef, web.StartTime)
	}
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
		t.Fatalf("containers = %+v", web.Containers)
	}
	a := web.Containers[0]
	if r := a.CPU.UsageNanoCores; r == nil || *r != 500_000_000 || *a.CPU.UsageCoreNanoSeconds != 15e9 || *a.Memory.WorkingSetBytes != 5000 {
		t.Errorf("app (newest instance) cpu %v/%d ws %d", deref(r), *a.CPU.UsageCoreNanoSeconds, *a.Memory.WorkingSetBytes)
	}
	if !a.StartTime.Time.Equal(app.StartedAt) || !a.CPU.Time.Time.Equal(t0.Add(10*time.Second)) || a.Memory.Time.Time != a.CPU.Time.Time {
		t.Errorf("app times: start %v cpu %v memory %v", a.StartTime, a.CPU.Time, a.Memory.Time)
	}
	if web.Containers[1].CPU.UsageNanoCores != nil {
		t.Error("the new sidecar has a rate")
	}
	// The pod sums every running member, sandbox and old instance too.
	if r := web.CPU.UsageNanoCores; r == nil || *r != 600_000_000 {
		t.Errorf("pod rate = %v, want 0.6 cores", deref(r))
	}
	if got := *web.CPU.UsageCoreNanoSeconds; got != 2e9+15e9+3e9+99e9 {
		t.Errorf("pod CPU time = %d", got)
	}
	if got := *web.Memory.WorkingSetBytes; got != 200+5000+700+10 {
		t.Errorf("pod working set = %d", got)
	}
	if got := *web.Memory.UsageBytes; got != 200+5000+700+10+4000 {
		t.Errorf("pod usage = %d", got)
	}

	// The app and the other pod are gone at the next sample.
	rt.set(nil, cm("web", "sidecar", "side1", 20*time.Second, 4e9, 700), cm("web", "", "sb", 20*time.Second, 2e9, 200))
	sample(t, c)
	s = c.Summary()
	if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 || s.Pods[0].Containers[0].Name != "sidecar" {
		t.Fatalf("after removal: %+v", s.Pods)
	}
	if r := s.Pods[0].Containers[0].CPU.UsageNanoCores; r == nil || *r != 100_000_000 {
		t.Errorf("sidecar rate = %v, want 0.1 core", deref(r))
	}
}

func TestRateEdges(t *testing.T) {
	rt := &fakeRuntime{}
	c, _ := newCollector(t, rt)
	rt.set(nil, cm("p", "c", "id", 0, 5e9, 1))
	sample(t, c)
	// The same reading again (no newer timestamp) keeps the window.
	sample(t, c)
	if r := findPod(t, c.Summary(), "p").Containers[0].CPU.UsageNanoCores; r != nil {
		t.Errorf("a rate from one reading: %d", *r)
	}
	// A counter that went backwards gives no rate.
	rt.set(nil, cm("p", "c", "id", time.Second, 4e9, 1))
	sample(t, c)
	if r := findPod(t, c.Summary(), "p").Containers[0].CPU.UsageNanoCores; r != nil {
		t.Errorf("a rate from a counter that went backwards: %d", *r)
	}
}

func TestRuntimeErrorKeepsLastSample(t *testing.T) {
	rt := &fakeRuntime{}
	c, n := newCollector(t, rt)
	rt.set(nil, cm("web", "app", "a", 0, 1e9, 1))
	sample(t, c)
	boom := errors.New("containerd is away")
	rt.set(boom)
	n.now = t0.Add(10 * time.Second)
	n.write(t, 2000)
	err := c.Sample(context.Background())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "container metrics") {
		t.Fatalf("error = %v", err)
	}
	s := c.Summary()
	if len(s.Pods) != 1 || !s.Pods[0].CPU.Time.Time.Equal(t0) {
		t.Errorf("the last containers' sample is not kept: %+v", s.Pods)
	}
	if r := s.Node.CPU.UsageNanoCores; r == nil || *r != 1e9 {
		t.Errorf("the node is sampled despite the runtime's error: rate %v", deref(r))
	}
}

func findPod(t *testing.T, s *statsv1alpha1.Summary, name string) statsv1alpha1.PodStats {
	t.Helper()
	for _, p := range s.Pods {
		if p.PodRef.Name == name {
			return p
		}
	}
	t.Fatalf("pod %s not in summary: %+v", name, s.Pods)
	return statsv1alpha1.PodStats{}
}

func ptr(v uint64) *uint64 { return &v }

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}
