package e2e

// Workload benchmarks (issue 20): how long upstream's Job, StatefulSet and
// DaemonSet controllers, running in our control plane with our scheduler,
// take to drive real nodes. The scenarios are written against
// workloadCluster so that upstream_workloads_bench_test.go runs the very
// same ones against upstream's control plane and kubelet.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const (
	workloadRuns        = 3 // runs of each scenario per benchmark iteration
	workloadJobPods     = 100
	workloadJobParallel = 10
	workloadSTSReplicas = 10
	workloadTimeout     = 10 * time.Minute // for one run of a scenario
	workloadLabel       = "bench=workloads"
)

// workloadCluster is what the scenarios need of a cluster: kubectl and
// client-go against its API server, and a wait until the nodes hold
// nothing more of deleted pods (so that one run does not slow the next).
type workloadCluster struct {
	kubectl *controlPlane // kubectl with the cluster's admin kubeconfig
	cs      kubernetes.Interface
	drained func(b testing.TB)
}

// noTokenEnv, set to 1, adds automountServiceAccountToken: false to the
// pod templates. Upstream's ServiceAccount admission plugin, which both
// control planes run, gives every pod a projected token volume (a
// TokenRequest and a tmpfs mount per pod on the node); with it set, both
// leave that work out.
const noTokenEnv = "NODELET_BENCH_NO_SA_TOKEN"

// podSpecExtra is what noTokenEnv adds under each template's spec.
func podSpecExtra() string {
	if os.Getenv(noTokenEnv) == "1" {
		return "\n      automountServiceAccountToken: false"
	}
	return ""
}

// workloadJob is a Job of 100 completions, 10 at a time, of busybox true.
func workloadJob(name string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, labels: {bench: workloads}}
spec:
  completions: %d
  parallelism: %d
  template:
    metadata: {labels: {bench: workloads}}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 5%s
      containers:
      - {name: run, image: "docker.io/library/busybox:1.36", command: ["true"]}
`, name, workloadJobPods, workloadJobParallel, podSpecExtra())
}

// sleeper is a busybox container that sleeps and exits at once on SIGTERM
// (a plain `sleep` as PID 1 ignores it and would be killed only at the end
// of the grace period, which would measure grace periods).
const sleeper = `{name: box, image: "docker.io/library/busybox:1.36", command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']}`

// workloadStatefulSet has 10 replicas, OrderedReady (the default), no probes.
func workloadStatefulSet(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: %[1]s, labels: {bench: workloads}}
spec:
  replicas: %[2]d
  serviceName: %[1]s
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s, bench: workloads}}
    spec:
      terminationGracePeriodSeconds: 5%[4]s
      containers:
      - %[3]s
`, name, workloadSTSReplicas, sleeper, podSpecExtra())
}

// workloadDaemonSet runs one sleeper on every node.
func workloadDaemonSet() string {
	return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: rolling, labels: {bench: workloads}}
spec:
  selector: {matchLabels: {app: rolling}}
  template:
    metadata: {labels: {app: rolling, bench: workloads}}
    spec:
      terminationGracePeriodSeconds: 5` + podSpecExtra() + `
      containers:
      - ` + sleeper + `
`
}

// BenchmarkWorkloadsJob: a Job of 100 completions with parallelism 10
// (busybox true), from `kubectl create` to the Complete condition seen by a
// watch, on one real node (the harness of BenchmarkPodStartup; the
// scheduler places the pods). Runs 3 times per iteration and reports the
// median, min and max, and the same of two parts of each pod's life (see
// jobRun). Run with -benchtime 1x.
func BenchmarkWorkloadsJob(b *testing.B) {
	c := ourWorkloadCluster(b, "node-job-bench")
	for i := 0; i < b.N; i++ {
		benchJob(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWorkloadsStatefulSet: a StatefulSet of 10 replicas (OrderedReady,
// busybox sleeping, no probes), from `kubectl create` to all 10 pods seen
// Ready by a watch, on one real node. Runs 3 times per iteration and
// reports the median, min and max, and the same of the two parts each pod
// adds (see stsRun). Run with -benchtime 1x.
func BenchmarkWorkloadsStatefulSet(b *testing.B) {
	c := ourWorkloadCluster(b, "node-sts-bench")
	for i := 0; i < b.N; i++ {
		benchStatefulSet(b, c, i)
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWorkloadsDaemonSetRollout: a DaemonSet on the 3-node lab (the
// network-namespace lab of the multi-node tests), rolled 3 times by
// `kubectl set env`; each roll is timed from the start of `kubectl set
// env` to the return of `kubectl rollout status` (default RollingUpdate,
// maxUnavailable 1). Reports the median, min and max. Run with -benchtime 1x.
func BenchmarkWorkloadsDaemonSetRollout(b *testing.B) {
	for i := 0; i < b.N; i++ {
		e := startLab(b, 3)
		c := workloadCluster{kubectl: e.cp, cs: e.cp.clientset(), drained: func(testing.TB) {}}
		reportRuns(b, "ds3-rollout-s", benchDaemonSetRollouts(b, c, 3))
		e.down()
	}
	b.ReportMetric(0, "ns/op")
}

// ourWorkloadCluster starts our control plane and one real node.
func ourWorkloadCluster(b *testing.B, nodeName string) workloadCluster {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, nodeName)
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	return workloadCluster{kubectl: cp, cs: cp.clientset(), drained: func(b testing.TB) { waitNoLeftovers(b, node) }}
}

// reportRuns reports the median, min and max of runs (in seconds) and logs
// each run.
func reportRuns(b *testing.B, unit string, runs []time.Duration) {
	b.Helper()
	var s []string
	for _, d := range runs {
		s = append(s, fmt.Sprintf("%.3f", d.Seconds()))
	}
	b.Logf("%s, each run: %s", unit, strings.Join(s, " "))
	sorted := slices.Clone(runs)
	slices.Sort(sorted)
	base := strings.TrimSuffix(unit, "-s")
	b.ReportMetric(sorted[len(sorted)/2].Seconds(), base+"-med-s")
	b.ReportMetric(sorted[0].Seconds(), base+"-min-s")
	b.ReportMetric(sorted[len(sorted)-1].Seconds(), base+"-max-s")
}

// jobRun is one run of the Job scenario: the total, and the medians over
// its 100 pods, from a watch on them, of bind (first sighting to first
// sighting with a node: the scheduler) and run (from there to the phase
// Succeeded: the node starts the pod, busybox true exits, the node
// reports it).
type jobRun struct{ total, bind, run time.Duration }

// benchJob runs the Job scenario workloadRuns times and reports the total
// and its two parts per pod.
func benchJob(b *testing.B, c workloadCluster, iteration int) {
	benchPodRuns(b, "job100-complete-s", "job-pod-bind-s", "job-pod-run-s", func(r int) jobRun {
		return benchJobComplete(b, c, fmt.Sprintf("job-%d-%d", iteration, r))
	})
}

// benchPodRuns runs a scenario workloadRuns times and reports its totals
// and the medians of its two per-pod parts under the three units.
func benchPodRuns(b *testing.B, totalUnit, bindUnit, runUnit string, run func(r int) jobRun) {
	var total, bind, part []time.Duration
	for r := range workloadRuns {
		j := run(r)
		total, bind, part = append(total, j.total), append(bind, j.bind), append(part, j.run)
	}
	reportRuns(b, totalUnit, total)
	reportRuns(b, bindUnit, bind)
	reportRuns(b, runUnit, part)
}

// podParts are the medians over the pods that reached their goal (at) of
// bind (first sighting to first sighting with a node) and run (from there
// to the goal), and how many pods reached it.
func podParts(seen, bound, at map[string]time.Time) (bind, run time.Duration, n int) {
	var binds, runs []time.Duration
	for pod, t := range at {
		binds = append(binds, bound[pod].Sub(seen[pod]))
		runs = append(runs, t.Sub(bound[pod]))
	}
	if len(runs) == 0 {
		return 0, 0, 0
	}
	return median(binds), median(runs), len(runs)
}

// benchJobComplete creates the Job and returns the time until a watch sees
// it Complete; then checks its 100 successes, deletes it and waits until
// its pods are gone.
func benchJobComplete(b testing.TB, c workloadCluster, name string) jobRun {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w, err := c.cs.BatchV1().Jobs("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatalf("watch job %s: %v", name, err)
	}
	defer w.Stop()
	pw, err := c.cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		b.Fatalf("watch pods of job %s: %v", name, err)
	}
	var mu sync.Mutex
	seen, bound, done := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	podsDone := make(chan struct{})
	go func() {
		defer close(podsDone)
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			firstAt(seen, p.Name, now, true)
			firstAt(bound, p.Name, now, p.Spec.NodeName != "")
			firstAt(done, p.Name, now, p.Status.Phase == corev1.PodSucceeded)
			mu.Unlock()
		}
	}()
	start := time.Now()
	c.kubectl.mustStdin(workloadJob(name), "create", "-f", "-")
	job := waitEvent(b, w, "job "+name+" Complete", func(obj any) bool {
		j, ok := obj.(*batchv1.Job)
		return ok && jobCondition(j, batchv1.JobComplete)
	}).(*batchv1.Job)
	r := jobRun{total: time.Since(start)}
	if job.Status.Succeeded != workloadJobPods || job.Status.Failed != 0 {
		b.Fatalf("job %s: %d succeeded, %d failed; want %d and 0", name, job.Status.Succeeded, job.Status.Failed, workloadJobPods)
	}
	// The pod watch may trail the Job's by a few events.
	testkit.Eventually(b, 10*time.Second, "the pod watch sees every pod of "+name+" succeed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) >= workloadJobPods
	})
	pw.Stop()
	<-podsDone
	var n int
	r.bind, r.run, n = podParts(seen, bound, done)
	if n != workloadJobPods {
		b.Fatalf("job %s: the pod watch saw %d pods succeed, want %d", name, n, workloadJobPods)
	}
	b.Logf("job %s: Complete after %.2fs; per pod (median): bound %.3fs after its creation, Succeeded %.3fs after that",
		name, r.total.Seconds(), r.bind.Seconds(), r.run.Seconds())
	deleteWorkload(b, c, "job/"+name)
	return r
}

// firstAt records at in m[key] when cond holds and m has no time for key yet.
func firstAt(m map[string]time.Time, key string, at time.Time, cond bool) {
	if _, ok := m[key]; cond && !ok {
		m[key] = at
	}
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// stsRun is one run of the StatefulSet scenario: the total, and the
// medians over its pods of the three parts each pod adds in OrderedReady
// order, from the watch's clock: nextPod from pod k-1's Ready to pod k's
// first sighting (the StatefulSet controller, through the API), bind from
// there to its first sighting with a node (the scheduler), start from
// there to its Ready (the node).
type stsRun struct{ total, nextPod, bind, start time.Duration }

// benchStatefulSet runs the StatefulSet scenario workloadRuns times and
// reports the total and its three parts per pod.
func benchStatefulSet(b *testing.B, c workloadCluster, iteration int) {
	var total, nextPod, bind, start []time.Duration
	for run := range workloadRuns {
		r := benchStatefulSetReady(b, c, fmt.Sprintf("sts-%d-%d", iteration, run))
		total, nextPod = append(total, r.total), append(nextPod, r.nextPod)
		bind, start = append(bind, r.bind), append(start, r.start)
	}
	reportRuns(b, "sts10-ready-s", total)
	reportRuns(b, "sts-next-pod-s", nextPod)
	reportRuns(b, "sts-bind-s", bind)
	reportRuns(b, "sts-start-s", start)
}

// benchStatefulSetReady creates the StatefulSet and returns the time until
// a watch on its pods has seen all 10 Ready at once; then deletes it.
func benchStatefulSetReady(b testing.TB, c workloadCluster, name string) stsRun {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), workloadTimeout)
	defer cancel()
	w, err := c.cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		b.Fatalf("watch pods of %s: %v", name, err)
	}
	defer w.Stop()
	start := time.Now()
	c.kubectl.mustStdin(workloadStatefulSet(name), "create", "-f", "-")
	ready := map[string]bool{}
	seenAt, boundAt, readyAt := map[int]time.Time{}, map[int]time.Time{}, map[int]time.Time{}
	waitEvent(b, w, fmt.Sprintf("%d pods of %s Ready", workloadSTSReplicas, name), func(obj any) bool {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return false
		}
		var k int
		fmt.Sscanf(strings.TrimPrefix(p.Name, name+"-"), "%d", &k)
		if _, seen := ready[p.Name]; !seen {
			seenAt[k] = time.Now()
			// OrderedReady: pod k appears only once pods 0..k-1 are Ready
			// (the watch delivers events in the order they were written).
			for j := range k {
				if !ready[fmt.Sprintf("%s-%d", name, j)] {
					b.Fatalf("statefulset %s: %s created before %s-%d was Ready", name, p.Name, name, j)
				}
			}
		}
		if _, done := boundAt[k]; p.Spec.NodeName != "" && !done {
			boundAt[k] = time.Now()
		}
		ready[p.Name] = p.DeletionTimestamp == nil && isReady(*p)
		if _, done := readyAt[k]; ready[p.Name] && !done {
			readyAt[k] = time.Now()
		}
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n == workloadSTSReplicas
	})
	r := stsRun{total: time.Since(start)}
	var nextPod, bind, startup []time.Duration
	for k := range workloadSTSReplicas {
		bind = append(bind, boundAt[k].Sub(seenAt[k]))
		startup = append(startup, readyAt[k].Sub(boundAt[k]))
		if k > 0 {
			nextPod = append(nextPod, seenAt[k].Sub(readyAt[k-1]))
		}
	}
	r.nextPod, r.bind, r.start = median(nextPod), median(bind), median(startup)
	b.Logf("statefulset %s: %d pods Ready after %.2fs; per pod (median): created %.3fs after the previous one's Ready, bound %.3fs later, Ready %.3fs after that",
		name, workloadSTSReplicas, r.total.Seconds(), r.nextPod.Seconds(), r.bind.Seconds(), r.start.Seconds())
	deleteWorkload(b, c, "statefulset/"+name)
	return r
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchDaemonSetRollouts creates the DaemonSet, waits for its first
// rollout, then times rolls rolls of it; finally deletes it.
func benchDaemonSetRollouts(b testing.TB, c workloadCluster, rolls int) []time.Duration {
	b.Helper()
	c.kubectl.mustStdin(workloadDaemonSet(), "create", "-f", "-")
	if out, err := kubectlFor(c.kubectl, workloadTimeout, "rollout", "status", "daemonset/rolling", "--timeout=600s"); err != nil {
		b.Fatalf("first rollout of daemonset/rolling: %v\n%s", err, out)
	}
	nodes, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var runs []time.Duration
	for r := range rolls {
		start := time.Now()
		c.kubectl.must("set", "env", "daemonset/rolling", fmt.Sprintf("ROLL=%d", r+1))
		if out, err := kubectlFor(c.kubectl, workloadTimeout, "rollout", "status", "daemonset/rolling", "--timeout=600s"); err != nil {
			b.Fatalf("rollout %d of daemonset/rolling: %v\n%s", r+1, err, out)
		}
		took := time.Since(start)
		pods, err := c.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=rolling"})
		if err != nil {
			b.Fatal(err)
		}
		rolled := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && isReady(p) && slices.Contains(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "ROLL", Value: fmt.Sprint(r + 1)}) {
				rolled++
			}
		}
		if rolled != len(nodes.Items) {
			b.Fatalf("rollout %d: %d Ready pods with ROLL=%d, want one on each of the %d nodes", r+1, rolled, r+1, len(nodes.Items))
		}
		b.Logf("daemonset rollout %d over %d nodes: %.2fs", r+1, len(nodes.Items), took.Seconds())
		runs = append(runs, took)
	}
	deleteWorkload(b, c, "daemonset/rolling")
	return runs
}

// waitEvent reads w until done holds for an event's object and returns
// that object; it fails when the watch ends first.
func waitEvent(b testing.TB, w watch.Interface, what string, done func(any) bool) any {
	b.Helper()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			b.Fatalf("%s: watch error: %v", what, ev.Object)
		}
		if done(ev.Object) {
			return ev.Object
		}
	}
	b.Fatalf("%s: the watch ended first (timeout %s)", what, workloadTimeout)
	return nil
}

// deleteWorkload deletes obj and waits until no pod of the benchmark is
// left in the API and the nodes have let go of them.
func deleteWorkload(b testing.TB, c workloadCluster, obj string) {
	b.Helper()
	c.kubectl.must("delete", obj, "--wait=false")
	testkit.Eventually(b, 5*time.Minute, obj+": pods gone", func() bool {
		list, err := c.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: workloadLabel})
		return err == nil && len(list.Items) == 0
	})
	c.drained(b)
}

// kubectlFor runs kubectl with a timeout of its own (cp.kubectl stops at
// 60 s) and returns its combined output.
func kubectlFor(cp *controlPlane, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(cp.dataDir, "kubectl-cache"))
	err := cmd.Run()
	return out.String(), err
}
