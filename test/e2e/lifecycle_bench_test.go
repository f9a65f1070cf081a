package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/nodelet/nodelet/test/testkit"
)

const (
	lifecycleBenchFile = "testdata/lifecycle-bench-pods.yaml"
	probePods          = 100              // pods per probe variant
	probeSettle        = 10 * time.Second // after the last container started
	probeWindow        = 60 * time.Second // CPU is measured over this
	volumePods         = 30               // pods per volume variant
)

// BenchmarkProbeOverhead measures what readiness probes cost on a real
// node (the harness of BenchmarkPodStartup). Each variant is 100 busybox
// httpd pods of testdata/lifecycle-bench-pods.yaml: none without probes;
// http with an HTTP readiness probe every second; exec with an exec
// readiness probe (cat /tmp/ok) every second; exec20 with the exec probe
// on 20 of the 100 (the rest without), a rate the 2-core machine can
// sustain. For each variant the benchmark creates the pods, waits until
// all their containers run and 10 s more, then reads for 60 s the CPU
// time (user plus system) of:
//   - the nodelet process;
//   - the containerd shims of the node, with the children they reaped
//     (runc for each exec, the exec'd command);
//   - the node's containerd and the control plane;
//   - the pods' cgroup (kubepods: the containers' processes, exec'd
//     probe commands included, so it overlaps the shims');
//   - the whole machine (from /proc/stat; other users' work included).
//
// CPU is reported in cores (CPU seconds per wall second), beside the
// nodelet's RSS at the end of the window, the pods Ready then, the
// probes run per second (TCP connections the node's namespace opened:
// each HTTP probe opens one, the pods have namespaces of their own; exec
// processes containerd started), the pod updates a watch saw and the
// Unhealthy events (failed probes) per second. The variants run one after
// another, each pod set deleted before the next. Run with -benchtime 1x.
func BenchmarkProbeOverhead(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-probe-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	templates, _ := loadLifecycleBench(b)
	for _, name := range []string{"probe-none", "probe-http", "probe-exec"} {
		if templates[name] == nil {
			b.Fatalf("%s has no pod %s", lifecycleBenchFile, name)
		}
	}
	cs := cp.clientset()
	procs := benchProcesses{nodelet: nodeletPID(b, node), containerd: containerdPID(b, node), controlplane: cp.cmd.Process.Pid}
	counters := benchCounters{cs: cs, execs: countExecStarts(b, node), podUpdates: countPodUpdates(b, cs)}
	variants := []struct {
		name, template string
		probed         int // pods from template; the others from probe-none
	}{{"none", "probe-none", 0}, {"http", "probe-http", probePods}, {"exec20", "probe-exec", 20}, {"exec", "probe-exec", probePods}}

	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			var probed, plain []string
			for j := range probePods {
				name := fmt.Sprintf("%s-%d-%d", v.name, i, j)
				if j < v.probed {
					probed = append(probed, name)
				} else {
					plain = append(plain, name)
				}
			}
			start := time.Now()
			createFromTemplate(b, cs, node.name, templates[v.template], probed)
			createFromTemplate(b, cs, node.name, templates["probe-none"], plain)
			testkit.Eventually(b, 3*time.Minute, v.name+": all containers running", func() bool {
				return countPods(b, cs, allRunning) == probePods
			})
			b.ReportMetric(time.Since(start).Seconds(), v.name+"-running100-s")
			time.Sleep(probeSettle)

			before := takeUsage(b, procs, node, counters)
			time.Sleep(probeWindow)
			after := takeUsage(b, procs, node, counters)
			reportWindow(b, v.name, before, after)
			b.ReportMetric(rssMB(b, procs.nodelet), v.name+"-nodelet-rss-MB")
			b.ReportMetric(float64(countPods(b, cs, isReady)), v.name+"-ready-pods")
			if v.template == "probe-exec" && after.execs == before.execs {
				b.Fatal("no exec started during the window: exec probes did not run, or the event subscription failed")
			}
			deleteBenchPods(b, cs, node)
		}
	}
	b.ReportMetric(0, "ns/op") // the scenario's wall time says nothing
}

// countPods counts the benchmark's pods for which cond holds.
func countPods(b testing.TB, cs kubernetes.Interface, cond func(corev1.Pod) bool) int {
	b.Helper()
	list, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "bench=startup"})
	if err != nil {
		b.Fatalf("list pods: %v", err)
	}
	n := 0
	for _, p := range list.Items {
		if cond(p) {
			n++
		}
	}
	return n
}

// allRunning: every container of the pod is running.
func allRunning(p corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// BenchmarkPodStartupWithVolumes measures pod startup latency as
// BenchmarkPodStartup does (from the client's create call to the Ready
// condition seen by a watch; spec.nodeName set, image present) for busybox
// pods with one configMap and one secret volume, beside the same pods
// without volumes: 30 of each created one at a time, the two variants
// alternating (and which goes first alternating) so that the machine's
// drift hits both alike. The pods stay until the end, as in
// BenchmarkPodStartup. Run with -benchtime 1x.
func BenchmarkPodStartupWithVolumes(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-volume-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	templates, objects := loadLifecycleBench(b)
	cs := cp.clientset()
	createObjects(b, cs, objects)
	ready := watchReady(b, cs)
	variants := []string{"vol-none", "vol-cm-secret"}
	for _, v := range variants {
		if templates[v] == nil {
			b.Fatalf("%s has no pod %s", lifecycleBenchFile, v)
		}
	}

	for i := 0; i < b.N; i++ {
		lat := map[string][]time.Duration{}
		for j := range volumePods {
			for k := range variants {
				v := variants[(j+k)%len(variants)]
				name := fmt.Sprintf("%s-%d-%d", v, i, j)
				start := time.Now()
				createFromTemplate(b, cs, node.name, templates[v], []string{name})
				lat[v] = append(lat[v], ready.wait(b, name).Sub(start))
			}
		}
		// The volumes hold what the ConfigMap and the Secret say.
		name := fmt.Sprintf("vol-cm-secret-%d-0", i)
		if out := cp.must("exec", name, "--", "cat", "/cfg/greeting", "/sec/password"); out != "hellos3cret" {
			b.Fatalf("%s: /cfg/greeting and /sec/password hold %q, want %q", name, out, "hellos3cret")
		}
		deleteBenchPods(b, cs, node)
		for _, v := range variants {
			d := lat[v]
			sort.Slice(d, func(a, c int) bool { return d[a] < d[c] })
			b.ReportMetric(ms(d[len(d)/2]), v+"-p50-ms")
			b.ReportMetric(ms(d[len(d)*99/100]), v+"-p99-ms")
		}
	}
	b.ReportMetric(0, "ns/op") // the scenario's wall time says nothing
}

// loadLifecycleBench reads the benchmarks' manifest: the Pods (templates,
// by name) and the other objects (ConfigMaps, Secrets) to create.
func loadLifecycleBench(b testing.TB) (map[string]*corev1.Pod, []any) {
	b.Helper()
	data, err := os.ReadFile(lifecycleBenchFile)
	if err != nil {
		b.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	var objects []any
	r := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatalf("read %s: %v", lifecycleBenchFile, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			b.Fatalf("decode %s: %v", lifecycleBenchFile, err)
		}
		switch o := obj.(type) {
		case *corev1.Pod:
			pods[o.Name] = o
		case *corev1.ConfigMap, *corev1.Secret:
			objects = append(objects, o)
		default:
			b.Fatalf("%s: unexpected %T", lifecycleBenchFile, obj)
		}
	}
	return pods, objects
}

func createObjects(b testing.TB, cs kubernetes.Interface, objects []any) {
	b.Helper()
	ctx := context.Background()
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets("default").Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			b.Fatalf("create %T: %v", obj, err)
		}
	}
}

// createFromTemplate creates a copy of tmpl on the node for each name, by
// ten clients at once. The copies carry bench=startup (so watchReady and
// deleteBenchPods of node_bench_test.go see them) and lifecycle-bench with
// the template's name.
func createFromTemplate(b testing.TB, cs kubernetes.Interface, nodeName string, tmpl *corev1.Pod, names []string) {
	b.Helper()
	ch := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range min(10, len(names)) {
		wg.Go(func() {
			for name := range ch {
				pod := tmpl.DeepCopy()
				pod.Name, pod.Namespace, pod.Spec.NodeName = name, "default", nodeName
				pod.Labels = map[string]string{"bench": "startup", "lifecycle-bench": tmpl.Name}
				if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create pod %s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, name := range names {
		ch <- name
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d of %d pods not created, first: %v", len(errs), len(names), errs[0])
	}
}

// benchProcesses are the processes whose CPU time the probe benchmark
// reads; the shims are found at each reading.
type benchProcesses struct{ nodelet, containerd, controlplane int }

// usageReading is what has been used up to one instant.
type usageReading struct {
	at                                      time.Time
	nodelet, containerd, controlplane, pods float64 // CPU seconds
	machine                                 float64 // busy CPU seconds, all CPUs
	shims                                   map[int]float64
	tcpOpens                                float64 // ActiveOpens of the node's namespace
	execs, podUpdates                       int64
	unhealthy                               int32 // Unhealthy events (their counts)
}

// benchCounters count what happens on the node and in the API.
type benchCounters struct {
	cs                kubernetes.Interface
	execs, podUpdates *atomic.Int64
}

func takeUsage(b testing.TB, p benchProcesses, node *realNode, c benchCounters) usageReading {
	b.Helper()
	u := usageReading{at: time.Now(), shims: map[int]float64{}, execs: c.execs.Load(), podUpdates: c.podUpdates.Load()}
	u.nodelet = cpuSeconds(b, p.nodelet)
	u.containerd = cpuSeconds(b, p.containerd)
	u.controlplane = cpuSeconds(b, p.controlplane)
	for _, pid := range shimPIDs(b, node) {
		if self, children, err := procCPU(pid); err == nil {
			u.shims[pid] = self + children
		}
	}
	u.pods = podsCPUSeconds(b, node)
	u.machine = machineBusySeconds(b)
	u.tcpOpens = tcpActiveOpens(b, p.nodelet)
	events, err := c.cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatalf("list events: %v", err)
	}
	for _, e := range events.Items {
		if e.Reason == "Unhealthy" {
			u.unhealthy += max(e.Count, 1)
		}
	}
	return u
}

// reportWindow reports the CPU cores used between two readings and the
// probe rates, each metric prefixed with the variant.
func reportWindow(b *testing.B, variant string, before, after usageReading) {
	wall := after.at.Sub(before.at).Seconds()
	shims, n := 0.0, 0
	for pid, cpu := range after.shims {
		if prev, ok := before.shims[pid]; ok {
			shims += cpu - prev
			n++
		}
	}
	if n < probePods {
		b.Fatalf("%s: %d shims lived through the window, want at least %d", variant, n, probePods)
	}
	for _, m := range []struct {
		name  string
		value float64
	}{
		{"nodelet-cores", (after.nodelet - before.nodelet) / wall},
		{"shims-cores", shims / wall},
		{"containerd-cores", (after.containerd - before.containerd) / wall},
		{"controlplane-cores", (after.controlplane - before.controlplane) / wall},
		{"pods-cores", (after.pods - before.pods) / wall},
		{"machine-cores", (after.machine - before.machine) / wall},
		{"tcpconns/s", (after.tcpOpens - before.tcpOpens) / wall},
		{"execs/s", float64(after.execs-before.execs) / wall},
		{"podupdates/s", float64(after.podUpdates-before.podUpdates) / wall},
		{"unhealthy/s", float64(after.unhealthy-before.unhealthy) / wall},
	} {
		b.ReportMetric(m.value, variant+"-"+m.name)
	}
	b.Logf("%s: load average %s", variant, loadAverage())
}

// nodeletPID is the nodelet's process: nsenter, entering only a network
// namespace, execs it without forking.
func nodeletPID(b testing.TB, node *realNode) int {
	b.Helper()
	pid := node.cmd.Process.Pid
	if !isExe(pid, "nodelet") {
		b.Fatalf("pid %d (nsenter) is not the nodelet: did nsenter fork?", pid)
	}
	return pid
}

// containerdPID is the node's own containerd (found by its socket).
func containerdPID(b testing.TB, node *realNode) int {
	b.Helper()
	for _, pid := range procsWithArg(node.ctdAddr) {
		if isExe(pid, "containerd") {
			return pid
		}
	}
	b.Fatalf("no containerd process for %s", node.ctdAddr)
	return 0
}

// shimPIDs are the containerd shims serving the node's containerd.
func shimPIDs(b testing.TB, node *realNode) []int {
	b.Helper()
	var out []int
	for _, pid := range procsWithArg(node.ctdAddr) {
		if isExe(pid, "containerd-shim-runc-v2") {
			out = append(out, pid)
		}
	}
	return out
}

// procsWithArg lists the processes with arg in their command line.
func procsWithArg(arg string) []int {
	var out []int
	for _, p := range processes() {
		if strings.Contains(p.cmdline, arg) {
			out = append(out, p.pid)
		}
	}
	return out
}

func isExe(pid int, name string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && filepath.Base(exe) == name
}

// statFields are the fields of /proc/PID/stat after the command name
// (field 3, the state, first).
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 15 {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f, nil
}

// procCPU is a process's own user plus system time and that of the
// children it waited for, in seconds.
func procCPU(pid int) (self, children float64, err error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	var v [4]float64 // utime, stime, cutime, cstime
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[11+i], 64); err != nil {
			return 0, 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
	}
	return (v[0] + v[1]) / 100, (v[2] + v[3]) / 100, nil // USER_HZ is 100
}

// podsCPUSeconds is the CPU time of the node's kubepods cgroup (cgroup v1
// cpuacct, or v2 cpu.stat).
func podsCPUSeconds(b testing.TB, node *realNode) float64 {
	b.Helper()
	for _, h := range testkit.CgroupHierarchies(b) {
		dir := filepath.Join(h, node.cgroupRoot, "kubepods")
		if data, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
			ns, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
			if err != nil {
				b.Fatalf("parse %s/cpuacct.usage: %v", dir, err)
			}
			return ns / 1e9
		}
		if data, err := os.ReadFile(filepath.Join(dir, "cpu.stat")); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					us, _ := strconv.ParseFloat(v, 64)
					return us / 1e6
				}
			}
		}
	}
	b.Fatalf("no CPU accounting for %s/kubepods", node.cgroupRoot)
	return 0
}

// machineBusySeconds is the CPU time all CPUs spent running something
// since boot (user, nice, system, irq, softirq).
func machineBusySeconds(b testing.TB) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	busy := 0.0
	for i, s := range f[1:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			b.Fatalf("parse /proc/stat %q: %v", line, err)
		}
		if i < 7 && i != 3 && i != 4 { // not idle, iowait, steal, guest (in user already)
			busy += v
		}
	}
	return busy / 100
}

// tcpActiveOpens is the TCP connections opened so far in the network
// namespace of the process pid (ActiveOpens in /proc/PID/net/snmp).
func tcpActiveOpens(b testing.TB, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		b.Fatal(err)
	}
	var header []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == "ActiveOpens" && i < len(f) {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					b.Fatalf("parse ActiveOpens %q: %v", f[i], err)
				}
				return v
			}
		}
	}
	b.Fatalf("no Tcp ActiveOpens in /proc/%d/net/snmp", pid)
	return 0
}

// countExecStarts counts the exec processes the node's containerd starts
// (its /tasks/exec-started events), until the benchmark ends.
func countExecStarts(b testing.TB, node *realNode) *atomic.Int64 {
	b.Helper()
	client, err := containerd.New(node.ctdAddr)
	if err != nil {
		b.Fatalf("connect to containerd at %s: %v", node.ctdAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	envelopes, errs := client.Subscribe(ctx, `topic=="/tasks/exec-started"`)
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-envelopes:
				n.Add(1)
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	// Before the harness stops containerd (cleanups run in reverse).
	b.Cleanup(func() { cancel(); <-done; client.Close() })
	return &n
}

// countPodUpdates counts the updates of the benchmark's pods (MODIFIED
// events of a watch, status writes included), until the benchmark ends.
func countPodUpdates(b testing.TB, cs kubernetes.Interface) *atomic.Int64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil { // a watch the server ends is opened again
			w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "bench=startup"})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Modified {
					n.Add(1)
				}
			}
			w.Stop()
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return &n
}

func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
