package nodemetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func u64(v uint64) *uint64 { return &v }

func cpuMem(at time.Time, nanoCores, workingSet uint64) (*statsv1alpha1.CPUStats, *statsv1alpha1.MemoryStats) {
	return &statsv1alpha1.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: u64(nanoCores), UsageCoreNanoSeconds: u64(nanoCores * 100)},
		&statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64(workingSet), UsageBytes: u64(workingSet * 2)}
}

func container(name string, at time.Time, nanoCores, workingSet uint64) statsv1alpha1.ContainerStats {
	cpu, mem := cpuMem(at, nanoCores, workingSet)
	return statsv1alpha1.ContainerStats{Name: name, CPU: cpu, Memory: mem}
}

func podStats(ns, name, uid string, containers ...statsv1alpha1.ContainerStats) statsv1alpha1.PodStats {
	return statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Namespace: ns, Name: name, UID: uid}, Containers: containers}
}

func summary(node string, at time.Time, nanoCores, workingSet uint64, pods ...statsv1alpha1.PodStats) *statsv1alpha1.Summary {
	cpu, mem := cpuMem(at, nanoCores, workingSet)
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: node, CPU: cpu, Memory: mem}, Pods: pods}
}

func readyNode(name string, labels map[string]string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func runningPod(ns, name, uid string, labels map[string]string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: labels},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// fakeCluster answers ListNodes, ListPods and Fetch from fixed data and
// counts fetches.
type fakeCluster struct {
	mu        sync.Mutex
	nodes     []corev1.Node
	pods      []corev1.Pod
	summaries map[string]*statsv1alpha1.Summary
	failing   map[string]error
	fetches   atomic.Int32
	paths     []string
	block     chan struct{} // if set, Fetch waits for it
}

func (f *fakeCluster) listNodes(ctx context.Context) ([]corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]corev1.Node(nil), f.nodes...), nil
}

func (f *fakeCluster) listPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []corev1.Pod
	for _, p := range f.pods {
		if ns == "" || p.Namespace == ns {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeCluster) fetch(ctx context.Context, n *corev1.Node, path string) ([]byte, error) {
	node := n.Name
	f.fetches.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, node+path)
	if err := f.failing[node]; err != nil {
		return nil, err
	}
	sum := f.summaries[node]
	if sum == nil {
		return nil, fmt.Errorf("no such node %q", node)
	}
	return json.Marshal(sum)
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newSource(f *fakeCluster, clock *fakeClock) *Source {
	return New(Config{
		ListNodes: f.listNodes, ListPods: f.listPods, Fetch: f.fetch,
		Timeout: time.Second, Now: clock.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNodeMetrics(t *testing.T) {
	notReady := readyNode("c", nil)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	noCPU := summary("d", t0, 0, 0)
	noCPU.Node.CPU.UsageNanoCores = nil
	f := &fakeCluster{
		nodes: []corev1.Node{readyNode("b", map[string]string{"zone": "z2"}), readyNode("a", map[string]string{"zone": "z1"}), notReady, readyNode("d", nil), readyNode("e", nil)},
		summaries: map[string]*statsv1alpha1.Summary{
			"a": summary("a", t0.Add(-3*time.Second), 250_000_000, 512<<20),
			"b": summary("b", t0.Add(-4*time.Second), 1_500_000_000, 1<<30+12345),
			"c": summary("c", t0, 1, 1),
			"d": noCPU,
		},
		failing: map[string]error{"e": errors.New("connection refused")},
	}
	clock := &fakeClock{now: t0}
	src := newSource(f, clock)
	got, err := src.NodeMetrics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// c is not Ready (not fetched), d has no CPU rate, e failed: only a and b.
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("got %s, want metrics of a and b", names(got))
	}
	a := got[0]
	if a.Labels["zone"] != "z1" || !a.CreationTimestamp.Time.Equal(t0) {
		t.Errorf("a metadata = %+v, want the node's labels and the current time", a.ObjectMeta)
	}
	if !a.Timestamp.Time.Equal(t0.Add(-3*time.Second)) || a.Window.Duration != DefaultWindow {
		t.Errorf("a timestamp/window = %v/%v, want the CPU sample time and the default window", a.Timestamp, a.Window)
	}
	checkQuantity(t, "a cpu", a.Usage, corev1.ResourceCPU, "250m", resource.DecimalSI)
	checkQuantity(t, "a memory", a.Usage, corev1.ResourceMemory, "512Mi", resource.BinarySI)
	b := got[1]
	if mem := b.Usage[corev1.ResourceMemory]; mem.Value() != 1<<30+12345 {
		t.Errorf("b memory = %d", mem.Value())
	}
	if cpu := b.Usage[corev1.ResourceCPU]; cpu.MilliValue() != 1500 {
		t.Errorf("b cpu = %dm, want 1500m", cpu.MilliValue())
	}
	for _, p := range f.paths {
		if p == "c"+SummaryPath {
			t.Errorf("fetched the summary of a node that is not Ready")
		}
	}
}

func checkQuantity(t *testing.T, what string, rl corev1.ResourceList, name corev1.ResourceName, want string, format resource.Format) {
	t.Helper()
	q, ok := rl[name]
	if !ok {
		t.Errorf("%s: missing", what)
		return
	}
	if w := resource.MustParse(want); q.Cmp(w) != 0 {
		t.Errorf("%s = %s, want %s", what, q.String(), want)
	}
	if q.Format != format {
		t.Errorf("%s format = %s, want %s", what, q.Format, format)
	}
}

func names[T any, PT interface {
	*T
	metav1.Object
}](items []T) []string {
	var out []string
	for i := range items {
		it := PT(&items[i])
		if it.GetNamespace() != "" {
			out = append(out, it.GetNamespace()+"/"+it.GetName())
		} else {
			out = append(out, it.GetName())
		}
	}
	return out
}

func TestPodMetrics(t *testing.T) {
	starting := container("sidecar", t0, 0, 0)
	starting.CPU.UsageNanoCores = nil
	pending := runningPod("default", "pending", "u-pending", nil)
	pending.Status.Phase = corev1.PodPending
	f := &fakeCluster{
		nodes: []corev1.Node{readyNode("n1", nil), readyNode("n2", nil)},
		pods: []corev1.Pod{
			runningPod("default", "web", "u-web", map[string]string{"app": "web"}),
			runningPod("default", "db", "u-db", map[string]string{"app": "db"}),
			runningPod("kube-system", "dns", "u-dns", nil),
			runningPod("default", "new", "u-new", nil),
			runningPod("default", "replaced", "u-replaced-2", nil),
			pending,
		},
		summaries: map[string]*statsv1alpha1.Summary{
			"n1": summary("n1", t0, 1, 1,
				podStats("default", "web", "u-web",
					container("app", t0.Add(-2*time.Second), 100_000_000, 64<<20),
					container("sidecar", t0.Add(-5*time.Second), 5_000_000, 8<<20)),
				podStats("default", "gone", "u-gone", container("app", t0, 1, 1)),
				podStats("default", "new", "u-new", starting),
				podStats("default", "replaced", "u-replaced-1", container("app", t0, 1, 1)),
				podStats("default", "pending", "u-pending", container("app", t0, 1, 1)),
			),
			"n2": summary("n2", t0, 1, 1,
				podStats("kube-system", "dns", "u-dns", container("coredns", t0, 3_000_000, 20<<20)),
				podStats("default", "db", "u-db",
					container("app", t0, 200_000_000, 256<<20), starting),
			),
		},
	}
	clock := &fakeClock{now: t0}
	src := newSource(f, clock)
	ctx := testCtx(t)

	all, err := src.PodMetrics(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// gone: not in the API; new: no CPU rate yet; replaced: another UID;
	// pending: not running.
	if got, want := fmt.Sprint(names(all)), "[default/db default/web kube-system/dns]"; got != want {
		t.Fatalf("all namespaces: got %s, want %s", got, want)
	}
	db, web := all[0], all[1]
	if len(db.Containers) != 1 || db.Containers[0].Name != "app" {
		t.Errorf("db containers = %+v, want app only (sidecar has no CPU rate yet)", db.Containers)
	}
	if db.Labels["app"] != "db" {
		t.Errorf("db labels = %v, want the pod's", db.Labels)
	}
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "sidecar" {
		t.Fatalf("web containers = %+v", web.Containers)
	}
	checkQuantity(t, "web/app cpu", web.Containers[0].Usage, corev1.ResourceCPU, "100m", resource.DecimalSI)
	checkQuantity(t, "web/sidecar memory", web.Containers[1].Usage, corev1.ResourceMemory, "8Mi", resource.BinarySI)
	if !web.Timestamp.Time.Equal(t0.Add(-5 * time.Second)) {
		t.Errorf("web timestamp = %v, want the earliest container sample", web.Timestamp)
	}

	sys, err := src.PodMetrics(ctx, "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(sys)); got != "[kube-system/dns]" {
		t.Errorf("kube-system: got %s", got)
	}
	if n := f.fetches.Load(); n != 2 {
		t.Errorf("%d fetches for two calls within the cache TTL, want 2 (one per node)", n)
	}
}

func TestCacheAndSharedScrape(t *testing.T) {
	f := &fakeCluster{
		nodes:     []corev1.Node{readyNode("a", nil)},
		summaries: map[string]*statsv1alpha1.Summary{"a": summary("a", t0, 1_000_000, 1<<20)},
		block:     make(chan struct{}),
	}
	clock := &fakeClock{now: t0}
	src := newSource(f, clock)
	ctx := testCtx(t)

	// Concurrent callers share the scrape in flight.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms, err := src.NodeMetrics(ctx)
			if err == nil && len(ms) != 1 {
				err = fmt.Errorf("got %d node metrics", len(ms))
			}
			errs <- err
		}()
	}
	// A caller that gives up does not cancel the others' scrape.
	quitter, cancel := context.WithCancel(ctx)
	quit := make(chan error, 1)
	go func() { _, err := src.NodeMetrics(quitter); quit <- err }()
	cancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: err = %v", err)
	}
	for f.fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(f.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1 shared by all callers", n)
	}

	clock.Advance(DefaultCacheTTL - time.Millisecond)
	if _, err := src.NodeMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches within the TTL, want 1", n)
	}
	clock.Advance(time.Millisecond)
	if _, err := src.NodeMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after the TTL, want 2", n)
	}
}

func TestFetchTimeout(t *testing.T) {
	f := &fakeCluster{
		nodes:     []corev1.Node{readyNode("slow", nil), readyNode("fast", nil)},
		summaries: map[string]*statsv1alpha1.Summary{"fast": summary("fast", t0, 1, 1)},
	}
	slow := make(chan struct{})
	defer close(slow)
	src := New(Config{
		ListNodes: f.listNodes, ListPods: f.listPods,
		Fetch: func(ctx context.Context, node *corev1.Node, path string) ([]byte, error) {
			if node.Name == "slow" {
				select {
				case <-slow:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return f.fetch(ctx, node, path)
		},
		Timeout: 50 * time.Millisecond,
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	got, err := src.NodeMetrics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(got)) != "[fast]" {
		t.Fatalf("got %v, want the node that answered", names(got))
	}
}

func TestListNodesError(t *testing.T) {
	src := New(Config{
		ListNodes: func(context.Context) ([]corev1.Node, error) { return nil, errors.New("store closed") },
		ListPods:  func(context.Context, string) ([]corev1.Pod, error) { return nil, nil },
		Fetch:     func(context.Context, *corev1.Node, string) ([]byte, error) { return nil, nil },
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if _, err := src.NodeMetrics(testCtx(t)); err == nil {
		t.Fatal("NodeMetrics succeeded although nodes cannot be listed")
	}
}

func TestQuantityFormat(t *testing.T) {
	// As metrics-server writes them: nano cores, and bytes in binary units.
	for _, tc := range []struct {
		q    resource.Quantity
		want string
	}{
		{quantity(329087452, resource.Nano, resource.DecimalSI), "329087452n"},
		{quantity(250_000_000, resource.Nano, resource.DecimalSI), "250m"},
		{quantity(2748180<<10, 0, resource.BinarySI), "2748180Ki"},
		{quantity(1025, 0, resource.BinarySI), "1025"},
	} {
		if got := tc.q.String(); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
		data, _ := json.Marshal(tc.q)
		if string(data) != `"`+tc.want+`"` {
			t.Errorf("JSON %s, want %q", data, tc.want)
		}
	}
}

func TestQuantityOverflow(t *testing.T) {
	q := quantity(1<<63+5, resource.Nano, resource.DecimalSI)
	if q.Sign() <= 0 {
		t.Fatalf("quantity of a value beyond int64 = %s", q.String())
	}
	want := resource.NewScaledQuantity((1<<63+5)/10, resource.Nano+1)
	if q.Cmp(*want) != 0 {
		t.Errorf("got %s, want %s", q.String(), want.String())
	}
}
