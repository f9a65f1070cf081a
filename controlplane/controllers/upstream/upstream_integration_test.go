package upstream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// start runs every upstream controller against a real API server until the
// test ends. No node runs pods: the tests play the nodelet through
// pods/status.
func start(t *testing.T) kubernetes.Interface {
	return startWith(t, controlplanetest.Options{}, Config{})
}

// startWith is start with a server and controllers configured by opts and
// cfg (cfg's Rest and Informers are filled in).
func startWith(t *testing.T, opts controlplanetest.Options, cfg Config) kubernetes.Interface {
	t.Helper()
	return startOn(t, controlplanetest.Start(t, opts), cfg)
}

// startOn runs the controllers, configured by cfg, against srv.
func startOn(t *testing.T, srv *controlplanetest.Server, cfg Config) kubernetes.Interface {
	t.Helper()
	cs := srv.Clientset(t)
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctx, cancel := context.WithCancel(context.Background())
	// Every controller as an admin: this server authorizes nothing.
	cfg.Accounts = func(string) (*rest.Config, error) { return rest.CopyConfig(srv.Config), nil }
	cfg.Informers, cfg.RootCA = factory, srv.Bundle.CAPEM()
	runs, err := Build(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() { run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return cs
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// podsOf lists the pods labelled app=app.
func podsOf(ctx context.Context, cs kubernetes.Interface, app string) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", app, err)
	}
	return list.Items, nil
}

// setStatus plays the nodelet: it sets a pod's phase (and Ready condition
// for a running pod) through pods/status.
func setStatus(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	now := metav1.Now()
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}}
	pod.Status.StartTime = &now
	var state corev1.ContainerState
	switch phase {
	case corev1.PodRunning:
		state.Running = &corev1.ContainerStateRunning{StartedAt: now}
	case corev1.PodSucceeded:
		state.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "busybox", ImageID: "busybox",
		Ready: phase == corev1.PodRunning, Started: ptr.To(phase == corev1.PodRunning), State: state}}
	if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set pod %s %s: %v", pod.Name, phase, err)
	}
}

func TestUpstreamControllers(t *testing.T) {
	cs := start(t)
	t.Run("job", func(t *testing.T) { t.Parallel(); testJob(t, cs) })
	t.Run("daemonset", func(t *testing.T) { t.Parallel(); testDaemonSet(t, cs) })
	t.Run("statefulset", func(t *testing.T) { t.Parallel(); testStatefulSet(t, cs) })
	t.Run("cronjob", func(t *testing.T) { t.Parallel(); testCronJob(t, cs) })
	t.Run("poddisruptionbudget", func(t *testing.T) { t.Parallel(); testDisruptionBudget(t, cs) })
}

// testJob: a Job of two completions creates its pods; once they succeed
// the Job is Complete, and its TTL after finishing has it deleted
// (foreground: without a garbage collector here, it stays terminating).
func testJob(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default"},
		Spec: batchv1.JobSpec{Completions: ptr.To(int32(2)), Parallelism: ptr.To(int32(2)),
			TTLSecondsAfterFinished: ptr.To(int32(3)), Template: podTemplate("pi")},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := cs.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job pi: %v", err)
	}
	var pods []corev1.Pod
	testkit.Eventually(t, 20*time.Second, "job pods", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = podsOf(ctx, cs, "pi")
		return len(pods) == 2, err
	})
	for i := range pods {
		setStatus(t, cs, &pods[i], corev1.PodSucceeded)
	}
	testkit.Eventually(t, 30*time.Second, "job complete", func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs("default").Get(ctx, "pi", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return j.Status.Succeeded == 2, nil
			}
		}
		return false, nil
	})
	testkit.Eventually(t, 20*time.Second, "job deleted after its TTL", func(ctx context.Context) (bool, error) {
		j, err := cs.BatchV1().Jobs("default").Get(ctx, "pi", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && j.DeletionTimestamp != nil, err
	})
}

// testDisruptionBudget: the disruption controller computes a budget's
// status over ready pods it selects.
func testDisruptionBudget(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	for _, name := range []string{"db-0", "db-1"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{"app": "db"}}, Spec: podTemplate("db").Spec}
		created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		setStatus(t, cs, created, corev1.PodRunning)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pdb db: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, "pdb status", func(ctx context.Context) (bool, error) {
		got, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status
		return st.ExpectedPods == 2 && st.CurrentHealthy == 2 && st.DesiredHealthy == 1 && st.DisruptionsAllowed == 1, nil
	})
}

// testDaemonSet: one pod per node, each pinned to its node by affinity.
func testDaemonSet(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	for _, name := range []string{"node-a", "node-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: podTemplate("agent")},
	}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create daemonset agent: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, "a daemon pod per node", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, cs, "agent")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[affinityNode(p)] = true
		}
		return nodes["node-a"] && nodes["node-b"], nil
	})
	testkit.Eventually(t, 20*time.Second, "daemonset status", func(ctx context.Context) (bool, error) {
		got, err := cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && got.Status.DesiredNumberScheduled == 2, err
	})
}

// affinityNode is the node a daemon pod's required node affinity names.
func affinityNode(p corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// testStatefulSet: web-0 first; web-1 only once web-0 is Running and Ready.
func testStatefulSet(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(2)), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: podTemplate("web")},
	}
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, ss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset web: %v", err)
	}
	var web0 *corev1.Pod
	testkit.Eventually(t, 20*time.Second, "web-0", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		web0 = p
		return err == nil, err
	})
	// Give the controller time to (wrongly) create web-1 early.
	time.Sleep(2 * time.Second)
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("web-1 exists (err %v) before web-0 is ready", err)
	}
	setStatus(t, cs, web0, corev1.PodRunning)
	testkit.Eventually(t, 20*time.Second, "web-1 after web-0 is ready", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// testCronJob: a schedule of every minute creates a Job within a minute.
func testCronJob(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick", Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: podTemplate("tick")}}},
	}
	cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	created, err := cs.BatchV1().CronJobs("default").Create(ctx, cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cronjob tick: %v", err)
	}
	testkit.Eventually(t, 75*time.Second, "a job of the cronjob", func(ctx context.Context) (bool, error) {
		jobs, err := cs.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == created.UID {
				return true, nil
			}
		}
		return false, nil
	})
}
