package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

// BenchmarkSchedulingThroughput reports pods/s from the first pod creation
// to the last binding observed on a watch, against the real API server,
// with 100, 1,000 and 5,000 nodes and 10,000 pods (1,000 with -short).
// Nodes exist before the scheduler starts; pods are created by 96
// concurrent clients while it runs. Events go to a discarding recorder,
// except in the "events=api" case, where each binding also writes a
// Scheduled event to the API server as a production scheduler does.
func BenchmarkSchedulingThroughput(b *testing.B) {
	pods := 10000
	if testing.Short() {
		pods = 1000
	}
	for _, c := range []struct {
		nodes  int
		events bool
	}{{100, false}, {1000, false}, {5000, false}, {5000, true}} {
		name := fmt.Sprintf("nodes=%d", c.nodes)
		if c.events {
			name += "/events=api"
		}
		nodes := c.nodes
		b.Run(name, func(b *testing.B) {
			srv := controlplanetest.Start(b, controlplanetest.Options{})
			cs := srv.Clientset(b)
			parallel(b, 64, nodes, func(c kubernetes.Interface, i int) error {
				_, err := c.CoreV1().Nodes().Create(context.Background(), benchNode(i), metav1.CreateOptions{})
				return err
			}, cs)
			var rec record.EventRecorder = &record.FakeRecorder{} // nil channel: discards
			if c.events {
				rec = nil // startScheduler records to the API server
			}
			s := startScheduler(b, srv.Clientset(b), rec)
			for n, _ := s.Cache().Counts(); n < nodes; n, _ = s.Cache().Counts() {
				time.Sleep(10 * time.Millisecond)
			}
			creators := []kubernetes.Interface{srv.Clientset(b), srv.Clientset(b), srv.Clientset(b)}
			var total time.Duration
			b.ResetTimer()
			for iter := 0; iter < b.N; iter++ {
				total += benchRound(b, srv.Clientset(b), creators, iter, pods)
			}
			b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
		})
	}
}

// benchRound creates pods and returns the time from the first creation to
// the last binding seen on a watch.
func benchRound(b *testing.B, watcher kubernetes.Interface, creators []kubernetes.Interface, iter, pods int) time.Duration {
	ns := fmt.Sprintf("bench-%d", iter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := watcher.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	w, err := watcher.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	done := make(chan time.Time, 1)
	go func() { done <- countBound(w, pods) }()
	start := time.Now()
	parallel(b, 96, pods, func(c kubernetes.Interface, i int) error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, benchPod(ns, i), metav1.CreateOptions{})
		return err
	}, creators...)
	select {
	case end := <-done:
		return end.Sub(start)
	case <-time.After(5 * time.Minute):
		b.Fatalf("not all %d pods bound after 5m", pods)
		return 0
	}
}

// countBound returns when n distinct pods were seen bound.
func countBound(w watch.Interface, n int) time.Time {
	seen := make(map[string]bool, n)
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		if len(seen) == n {
			return time.Now()
		}
	}
	return time.Time{}
}

// parallel runs f(i) for i in 0..n-1 on workers goroutines spread over
// the clients.
func parallel(b *testing.B, workers, n int, f func(kubernetes.Interface, int) error, clients ...kubernetes.Interface) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(c kubernetes.Interface) {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(c, i); err != nil {
					b.Error(err)
					return
				}
			}
		}(clients[w%len(clients)])
	}
	wg.Wait()
}

func benchNode(i int) *corev1.Node {
	n := testNode(fmt.Sprintf("node-%05d", i), "32", "128Gi")
	n.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", i%3)
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1000")
	return n
}

// benchPod is a pod of one of 20 ReplicaSets, with small requests.
func benchPod(ns string, i int) *corev1.Pod {
	p := testPod(fmt.Sprintf("pod-%05d", i), "10m", types.UID(fmt.Sprintf("rs-%02d", i%20)))
	p.Namespace = ns
	return p
}
