package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodelet/nodelet/test/testkit"
)

// workloadLifeManifest: a StatefulSet of two and a DaemonSet to roll, a
// Job that always fails, an Indexed Job of three and a Job removed once
// finished. All busybox, pre-loaded on the node.
const workloadLifeManifest = `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: web, image: "busybox:1.36", imagePullPolicy: Never, command: [sleep, "3600"]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: agent, image: "busybox:1.36", imagePullPolicy: Never, command: [sleep, "3600"]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: fails, image: "busybox:1.36", imagePullPolicy: Never, command: [sh, -c, "exit 1"]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: indexed}
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: indexed, image: "busybox:1.36", imagePullPolicy: Never, command: [sh, -c, "echo index $JOB_COMPLETION_INDEX"]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: shortlived}
spec:
  ttlSecondsAfterFinished: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: shortlived, image: "busybox:1.36", imagePullPolicy: Never, command: [echo, done]}
`

// TestWorkloadLifecycleOnRealNode drives the workload controllers through
// their life with the real kubectl on one real node: StatefulSet and
// DaemonSet roll out, update, list their history and undo; Jobs fail on
// their backoff limit, run indexed, and go once finished with a TTL of 0;
// a Job made from a CronJob completes, and a CronJob due every minute
// makes a Job of its own on schedule; a high-priority pod preempts a
// low-priority one (the node has one CPU allocatable). The objects are
// created together so their pods run side by side.
func TestWorkloadLifecycleOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-life", preemptionNodeArgs()...)
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})

	// The TTL Job may be gone before a poll sees it finish: watch it from
	// before it exists.
	w, err := cp.clientset().BatchV1().Jobs("default").Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=shortlived"})
	if err != nil {
		t.Fatalf("watch jobs: %v", err)
	}
	defer w.Stop()
	if out, errOut, err := cp.kubectlStdin(workloadLifeManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	cp.must("create", "cronjob", "nightly", "--image=busybox:1.36", "--schedule=0 3 * * *", "--", "echo", "from cron")
	// A CronJob due every minute: its first Job comes at the next minute
	// boundary, so it is created now and checked last, while the rest runs.
	minutelyCreated := time.Now()
	cp.must("create", "cronjob", "minutely", "--image=busybox:1.36", "--schedule=*/1 * * * *", "--", "echo", "tick from the schedule")

	// sub gives a subtest its own kubectl runner, failing that subtest.
	sub := func(t *testing.T) *controlPlane { c := *cp; c.t = t; return &c }

	t.Run("StatefulSet", func(t *testing.T) { testStatefulSetLife(t, sub(t)) })
	t.Run("DaemonSet", func(t *testing.T) { testDaemonSetLife(t, sub(t)) })
	t.Run("Jobs", func(t *testing.T) { testJobsLife(t, sub(t), w) })
	t.Run("CronJob", func(t *testing.T) {
		cp := sub(t)
		cp.must("create", "job", "manual", "--from=cronjob/nightly")
		cp.must("wait", "--for=condition=complete", "job/manual", "--timeout=90s")
		if out := cp.must("get", "job", "manual", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}"); out != "CronJob/nightly" {
			t.Fatalf("job manual owned by %q, want CronJob/nightly", out)
		}
		if out := cp.must("logs", "job/manual"); strings.TrimSpace(out) != "from cron" {
			t.Fatalf("kubectl logs job/manual = %q", out)
		}
	})

	t.Run("Preemption", func(t *testing.T) { testPreemption(t, sub(t), node.name) })
	t.Run("CronJob schedule", func(t *testing.T) { testCronSchedule(t, sub(t), minutelyCreated) })

	cp.must("delete", "statefulset/web", "daemonset/agent", "cronjob/nightly", "cronjob/minutely", "--wait=false")
	cp.must("delete", "jobs", "--all", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// webPods maps the StatefulSet's live pods by name.
func webPods(t *testing.T, cp *controlPlane) map[string]corev1.Pod {
	pods := map[string]corev1.Pod{}
	for _, p := range podsWithLabel(t, cp, "app=web") {
		if p.DeletionTimestamp == nil {
			pods[p.Name] = p
		}
	}
	return pods
}

func testStatefulSetLife(t *testing.T, cp *controlPlane) {
	cp.must("rollout", "status", "statefulset/web", "--timeout=90s")
	for _, name := range []string{"web-0", "web-1"} {
		if out := cp.must("exec", name, "--", "hostname"); strings.TrimSpace(out) != name {
			t.Fatalf("hostname in %s = %q", name, out)
		}
	}
	before := webPods(t, cp)

	// A template change rolls the pods from the highest ordinal down: a
	// watch records the order in which the old pods start terminating.
	pw, err := cp.clientset().CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	defer pw.Stop()
	cp.must("set", "env", "statefulset/web", "ROUND=2")
	cp.must("rollout", "status", "statefulset/web", "--timeout=90s")
	var order []string
	seen := map[string]bool{}
	for drained := false; !drained; {
		select {
		case ev := <-pw.ResultChan():
			p, _ := ev.Object.(*corev1.Pod)
			if p != nil && p.UID == before[p.Name].UID && !seen[p.Name] && (p.DeletionTimestamp != nil || ev.Type == watch.Deleted) {
				seen[p.Name] = true
				order = append(order, p.Name)
			}
		case <-time.After(time.Second):
			drained = true
		}
	}
	if fmt.Sprint(order) != "[web-1 web-0]" {
		t.Fatalf("old pods terminated in order %v, want [web-1 web-0]", order)
	}
	after := webPods(t, cp)
	if len(after) != 2 {
		t.Fatalf("after the update: %d pods", len(after))
	}
	for name, p := range after {
		if p.UID == before[name].UID {
			t.Fatalf("%s not replaced by the update", name)
		}
		if len(p.Spec.Containers[0].Env) != 1 || p.Spec.Containers[0].Env[0].Value != "2" {
			t.Fatalf("%s env %v, want ROUND=2", name, p.Spec.Containers[0].Env)
		}
	}
	if web0, web1 := after["web-0"], after["web-1"]; web0.CreationTimestamp.Before(&web1.CreationTimestamp) || web0.CreationTimestamp.Time.Before(readySince(web1)) {
		t.Fatalf("web-0 replaced at %s, before web-1 (created %s, ready %s)", web0.CreationTimestamp, web1.CreationTimestamp, readySince(web1))
	}
	t.Logf("rolled: web-1 created %s, ready %s; web-0 created %s", after["web-1"].CreationTimestamp.Format(time.RFC3339Nano), readySince(after["web-1"]).Format(time.RFC3339Nano), after["web-0"].CreationTimestamp.Format(time.RFC3339Nano))
	if revs := historyRevisions(t, cp, "statefulset/web"); fmt.Sprint(revs) != "[1 2]" {
		t.Fatalf("rollout history statefulset/web: revisions %v, want [1 2]", revs)
	}

	cp.must("rollout", "undo", "statefulset/web")
	cp.must("rollout", "status", "statefulset/web", "--timeout=90s")
	if out := cp.must("get", "statefulset", "web", "-o", "jsonpath={.spec.template.spec.containers[0].env}"); out != "" {
		t.Fatalf("template env after undo: %q, want none", out)
	}
	for name, p := range webPods(t, cp) {
		if p.UID == after[name].UID || len(p.Spec.Containers[0].Env) != 0 {
			t.Fatalf("%s not back on revision 1's template: env %v", name, p.Spec.Containers[0].Env)
		}
	}
}

func testDaemonSetLife(t *testing.T, cp *controlPlane) {
	cp.must("rollout", "status", "daemonset/agent", "--timeout=90s")
	agent := func() corev1.Pod {
		var live []corev1.Pod
		for _, p := range podsWithLabel(t, cp, "app=agent") {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			t.Fatalf("daemonset pods: %d, want 1", len(live))
		}
		return live[0]
	}
	first := agent()

	cp.must("set", "env", "daemonset/agent", "ROUND=2")
	cp.must("rollout", "status", "daemonset/agent", "--timeout=90s")
	second := agent()
	if second.UID == first.UID || len(second.Spec.Containers[0].Env) != 1 {
		t.Fatalf("daemonset pod not rolled to the new template: env %v", second.Spec.Containers[0].Env)
	}
	if revs := historyRevisions(t, cp, "daemonset/agent"); fmt.Sprint(revs) != "[1 2]" {
		t.Fatalf("rollout history daemonset/agent: revisions %v, want [1 2]", revs)
	}

	cp.must("rollout", "undo", "daemonset/agent")
	cp.must("rollout", "status", "daemonset/agent", "--timeout=90s")
	if out := cp.must("get", "daemonset", "agent", "-o", "jsonpath={.spec.template.spec.containers[0].env}"); out != "" {
		t.Fatalf("template env after undo: %q, want none", out)
	}
	if third := agent(); third.UID == second.UID || len(third.Spec.Containers[0].Env) != 0 {
		t.Fatalf("daemonset pod not back on revision 1's template: env %v", third.Spec.Containers[0].Env)
	}
}

// historyRevisions lists the revision numbers kubectl rollout history shows.
func historyRevisions(t *testing.T, cp *controlPlane, what string) []int {
	out := cp.must("rollout", "history", what)
	var revs []int
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "%d", &n); err == nil {
			revs = append(revs, n)
		}
	}
	sort.Ints(revs)
	if len(revs) == 0 {
		t.Logf("rollout history %s:\n%s", what, out)
	}
	return revs
}

func testJobsLife(t *testing.T, cp *controlPlane, w watch.Interface) {
	// Two failed pods (the first and one retry) exhaust backoffLimit 1.
	cp.must("wait", "--for=condition=failed", "job/fails", "--timeout=90s")
	if out := cp.must("get", "job", "fails", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].reason}`); out != "BackoffLimitExceeded" {
		t.Fatalf("job fails: Failed reason %q, want BackoffLimitExceeded", out)
	}
	if out := cp.must("get", "job", "fails", "-o", "jsonpath={.status.failed}"); out != "2" {
		t.Fatalf("job fails: %s failed pods, want 2", out)
	}

	cp.must("wait", "--for=condition=complete", "job/indexed", "--timeout=90s")
	var logs []string
	for _, p := range podsWithLabel(t, cp, "job-name=indexed") {
		index := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		out := strings.TrimSpace(cp.must("logs", p.Name))
		if out != "index "+index {
			t.Fatalf("pod %s of completion index %q logged %q", p.Name, index, out)
		}
		logs = append(logs, out)
	}
	sort.Strings(logs)
	if got := strings.Join(logs, ","); got != "index 0,index 1,index 2" {
		t.Fatalf("indexed job logs: %s", got)
	}
	if out := cp.must("get", "job", "indexed", "-o", "jsonpath={.status.completedIndexes}"); out != "0-2" {
		t.Fatalf("indexed job completedIndexes %q, want 0-2", out)
	}

	// The TTL Job completes, then the TTL controller deletes it.
	completed := false
	timeout := time.After(90 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("job watch closed")
			}
			job, _ := ev.Object.(*batchv1.Job)
			if job == nil {
				t.Fatalf("job watch: %v %T", ev.Type, ev.Object)
			}
			for _, c := range job.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					completed = true
				}
			}
			deleted = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("job shortlived not deleted after 90s (completed: %v)", completed)
		}
	}
	if !completed {
		t.Fatal("job shortlived deleted before it completed")
	}
	testkit.Eventually(t, 90*time.Second, "job shortlived's pod gone", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-l", "job-name=shortlived", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}

// testCronSchedule waits, up to 90 s from the minutely CronJob's creation
// (the next minute boundary, then one busybox pod on a shared machine),
// for a Job the schedule made: owned by the CronJob, stamped with a
// scheduled time on a minute boundary after the creation, named after
// that minute, not instantiated by hand, complete, and its pod's log is
// what the CronJob echoes. The CronJob's status then has the schedule's
// last and last successful times, and kubectl get cronjob shows it.
func testCronSchedule(t *testing.T, cp *controlPlane, created time.Time) {
	var job *batchv1.Job
	var scheduled time.Time
	var last string
	deadline := created.Add(90 * time.Second)
	for job == nil {
		var list batchv1.JobList
		if err := json.Unmarshal([]byte(cp.must("get", "jobs", "-o", "json")), &list); err != nil {
			t.Fatalf("jobs: %v", err)
		}
		last = "no Job owned by cronjob/minutely"
		for i := range list.Items {
			j := &list.Items[i]
			if ref := metav1.GetControllerOf(j); ref == nil || ref.Kind != "CronJob" || ref.Name != "minutely" {
				continue
			}
			if how := j.Annotations["cronjob.kubernetes.io/instantiate"]; how != "" {
				t.Fatalf("job %s was instantiated %q, not by the schedule", j.Name, how)
			}
			at, err := time.Parse(time.RFC3339, j.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
			if err != nil {
				t.Fatalf("job %s: scheduled timestamp: %v (annotations %v)", j.Name, err, j.Annotations)
			}
			if at.Second() != 0 || at.Before(created.Truncate(time.Minute)) || j.Name != fmt.Sprintf("minutely-%d", at.Unix()/60) {
				t.Fatalf("job %s scheduled at %s: want a minute boundary after the CronJob's creation (%s), named after it",
					j.Name, at.Format(time.RFC3339), created.Format(time.RFC3339Nano))
			}
			last = fmt.Sprintf("job %s (scheduled %s) not complete: %+v", j.Name, at.Format(time.RFC3339), j.Status)
			if jobComplete(j) {
				job, scheduled = j, at
				break
			}
		}
		if job == nil {
			if time.Now().After(deadline) {
				t.Fatalf("90s after creating cronjob/minutely: %s", last)
			}
			time.Sleep(time.Second)
		}
	}
	t.Logf("job %s scheduled at %s, created %s after the CronJob, complete at %s",
		job.Name, scheduled.Format(time.RFC3339), job.CreationTimestamp.Sub(created).Round(time.Second), job.Status.CompletionTime)
	if out := strings.TrimSpace(cp.must("logs", "job/"+job.Name)); out != "tick from the schedule" {
		t.Fatalf("kubectl logs job/%s = %q", job.Name, out)
	}

	// The CronJob's status follows the Job's completion.
	var cj batchv1.CronJob
	testkit.Eventually(t, 30*time.Second, "cronjob/minutely's lastSuccessfulTime", func() bool {
		if err := json.Unmarshal([]byte(cp.must("get", "cronjob", "minutely", "-o", "json")), &cj); err != nil {
			t.Fatalf("cronjob: %v", err)
		}
		return cj.Status.LastSuccessfulTime != nil
	})
	if lst := cj.Status.LastScheduleTime; lst == nil || lst.Time.Before(scheduled) {
		t.Errorf("cronjob/minutely lastScheduleTime %v, want %s or later", lst, scheduled.Format(time.RFC3339))
	}
	if lst := cj.Status.LastSuccessfulTime; job.Status.CompletionTime == nil || lst.Time.Before(job.Status.CompletionTime.Time.Truncate(time.Second)) {
		t.Errorf("cronjob/minutely lastSuccessfulTime %s, job %s completed %v", lst, job.Name, job.Status.CompletionTime)
	}

	// kubectl's table: the schedule, not suspended, a last schedule.
	out := cp.must("get", "cronjob", "minutely")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get cronjob minutely:\n%s", out)
	}
	col := strings.Index(lines[0], "LAST SCHEDULE")
	if !strings.HasPrefix(lines[0], "NAME") || col < 0 || len(lines[1]) <= col ||
		!strings.HasPrefix(lines[1], "minutely ") || !strings.Contains(lines[1], " */1 * * * * ") ||
		!strings.Contains(lines[1], " False ") || strings.HasPrefix(lines[1][col:], "<none>") {
		t.Fatalf("kubectl get cronjob minutely: want its schedule, False and a last schedule:\n%s", out)
	}
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
