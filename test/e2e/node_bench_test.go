package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// BenchmarkPodStartup measures a real node (the nodelet binary, a private
// containerd, runc and the CNI plugins, images present):
//   - startup latency of 50 pods created one after another, from the
//     client's create call to the Ready condition seen by a watch (p50, p99);
//   - the time for a burst of 100 pods created at once to be all Ready;
//   - the nodelet's resident memory idle and with the 100 pods running.
//
// Pods carry spec.nodeName, so the numbers are the node's, not the
// scheduler's. Run with -benchtime 1x: one iteration is the whole scenario.
func BenchmarkPodStartup(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cs := cp.clientset()
	ready := watchReady(b, cs)
	time.Sleep(3 * time.Second) // let start-up work settle before the idle reading
	idleRSS := rssMB(b, node.cmd.Process.Pid)
	cpuBefore := cpuSeconds(b, node.cmd.Process.Pid)

	for i := 0; i < b.N; i++ {
		var lat []time.Duration
		for j := range 50 {
			name := fmt.Sprintf("seq-%d-%d", i, j)
			start := time.Now()
			createBenchPod(b, cs, node.name, name)
			lat = append(lat, ready.wait(b, name).Sub(start))
		}
		deleteBenchPods(b, cs, node)
		sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
		b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
		b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")

		profiled := profileNodelet(b, cp, node.name)
		start := time.Now()
		var wg sync.WaitGroup
		names := make(chan string)
		for range 10 { // ten clients create concurrently
			wg.Go(func() {
				for name := range names {
					createBenchPod(b, cs, node.name, name)
				}
			})
		}
		for j := range 100 {
			names <- fmt.Sprintf("burst-%d-%d", i, j)
		}
		close(names)
		wg.Wait()
		var last time.Time
		for j := range 100 {
			if at := ready.wait(b, fmt.Sprintf("burst-%d-%d", i, j)); at.After(last) {
				last = at
			}
		}
		b.ReportMetric(last.Sub(start).Seconds(), "burst100-s")
		profiled()
		time.Sleep(5 * time.Second) // steady state with 100 pods
		b.ReportMetric(rssMB(b, node.cmd.Process.Pid), "rss100-MB")
		deleteBenchPods(b, cs, node)
	}
	b.ReportMetric(idleRSS, "rss-idle-MB")
	b.ReportMetric((cpuSeconds(b, node.cmd.Process.Pid)-cpuBefore)/float64(b.N), "nodelet-cpu-s")
	b.ReportMetric(0, "ns/op") // the scenario's wall time says nothing
}

// cpuProfileEnv, when set, names a file for the nodelet's CPU profile of
// the burst's first 15 s, fetched through the API server's node proxy
// from the nodelet's /debug/pprof/profile.
const cpuProfileEnv = "NODELET_BENCH_CPUPROFILE"

// profileNodelet starts the profile when cpuProfileEnv is set and returns
// a wait for it.
func profileNodelet(b testing.TB, cp *controlPlane, node string) (wait func()) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err := kubectlRaw(cp, "/api/v1/nodes/"+node+"/proxy/debug/pprof/profile?seconds=15")
		if err == nil {
			err = os.WriteFile(path, out, 0o644)
		}
		if err != nil {
			b.Errorf("nodelet CPU profile: %v", err)
		}
	}()
	return func() { <-done }
}

// kubectlRaw GETs path from the API server as the admin, bytes as sent.
func kubectlRaw(cp *controlPlane, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "get", "--raw", path).Output()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func createBenchPod(b testing.TB, cs kubernetes.Interface, nodeName, name string) {
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"bench": "startup"}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "nginx", Image: "nginx:1.22", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		b.Errorf("create pod %s: %v", name, err)
	}
}

// deleteBenchPods deletes every benchmark pod and waits until the node
// holds nothing of them.
func deleteBenchPods(b testing.TB, cs kubernetes.Interface, node *realNode) {
	b.Helper()
	ctx := context.Background()
	err := cs.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench=startup"})
	if err != nil {
		b.Fatalf("delete pods: %v", err)
	}
	testkit.Eventually(b, 3*time.Minute, "benchmark pods gone", func() bool {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "bench=startup"})
		return err == nil && len(list.Items) == 0 && len(node.leftovers(b)) == 0
	})
}

// readyTimes records when a watch first saw each pod Ready.
type readyTimes struct {
	mu   sync.Mutex
	at   map[string]time.Time
	cond *sync.Cond
}

func watchReady(b testing.TB, cs kubernetes.Interface) *readyTimes {
	b.Helper()
	w, err := cs.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: "bench=startup"})
	if err != nil {
		b.Fatalf("watch pods: %v", err)
	}
	r := &readyTimes{at: map[string]time.Time{}}
	r.cond = sync.NewCond(&r.mu)
	b.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || !isReady(*p) {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			if _, seen := r.at[p.Name]; !seen {
				r.at[p.Name] = now
				r.cond.Broadcast()
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// wait returns when the pod was seen Ready, failing after two minutes.
func (r *readyTimes) wait(b testing.TB, name string) time.Time {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	timer := time.AfterFunc(2*time.Minute, func() { r.mu.Lock(); r.cond.Broadcast(); r.mu.Unlock() })
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if at, ok := r.at[name]; ok {
			return at
		}
		if time.Now().After(deadline) {
			b.Fatalf("pod %s not Ready after 2 minutes", name)
		}
		r.cond.Wait()
	}
}

// rssMB is a process's resident set size in MiB (VmRSS).
func rssMB(b testing.TB, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("read status of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatalf("parse %q: %v", line, err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// cpuSeconds is the user plus system CPU time a process has used.
func cpuSeconds(b testing.TB, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("read stat of pid %d: %v", pid, err)
	}
	// Fields after the command name (which may hold spaces) start at ")".
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}
