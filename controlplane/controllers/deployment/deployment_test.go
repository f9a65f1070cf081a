package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controllers/replicaset"
	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

const ns = "default"

// start runs an API server with the Deployment and ReplicaSet controllers
// (no scheduler: pods stay unbound, and the test plays the kubelet by
// marking them ready).
func start(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-controller-manager"})
	f := informers.NewSharedInformerFactory(cs, 0)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dc, err := New(Config{Client: cs, Informers: f, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	rsc, err := replicaset.New(replicaset.Config{Client: cs, Informers: f, Recorder: rec, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = dc.Run(ctx, 2) }()
	go func() { defer wg.Done(); _ = rsc.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); b.Shutdown() })
	return cs
}

func newDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
			},
		},
	}
}

func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last: %v)", what, last)
}

func getDeploy(t *testing.T, cs kubernetes.Interface, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func replicaSets(t *testing.T, cs kubernetes.Interface, app string) []appsv1.ReplicaSet {
	t.Helper()
	l, err := cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func pods(t *testing.T, cs kubernetes.Interface, app string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// markReady plays the kubelet for one pod: Running and Ready.
func markReady(t *testing.T, cs kubernetes.Interface, p corev1.Pod) {
	t.Helper()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// markAllReady marks every current, not yet ready pod of app ready and
// returns how many it marked.
func markAllReady(t *testing.T, cs kubernetes.Interface, app string) int {
	t.Helper()
	n := 0
	for _, p := range pods(t, cs, app) {
		if p.DeletionTimestamp == nil && !ready(&p) {
			markReady(t, cs, p)
			n++
		}
	}
	return n
}

// rolloutDone is `kubectl rollout status`'s test for a finished rollout.
func rolloutDone(d *appsv1.Deployment) (bool, error) {
	s := d.Status
	done := d.Generation <= s.ObservedGeneration && s.UpdatedReplicas == *d.Spec.Replicas &&
		s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
	return done, fmt.Errorf("generation %d status %+v", d.Generation, s)
}

// waitRollout keeps marking new pods ready until the rollout is done.
func waitRollout(t *testing.T, cs kubernetes.Interface, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, "rollout of "+name, func() (bool, error) {
		markAllReady(t, cs, name)
		d = getDeploy(t, cs, name)
		return rolloutDone(d)
	})
	return d
}

func update(t *testing.T, cs kubernetes.Interface, name string, mutate func(*appsv1.Deployment)) {
	t.Helper()
	eventually(t, "update of "+name, func() (bool, error) {
		d := getDeploy(t, cs, name)
		mutate(d)
		_, err := cs.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func setImage(image string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image }
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	return getCondition(d.Status, t)
}

func TestDeploymentCreatesReplicaSetAndPods(t *testing.T) {
	cs := start(t)
	d0, err := cs.AppsV1().Deployments(ns).Create(context.Background(), newDeployment("web", 3, "nginx:A"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := waitRollout(t, cs, "web")
	rss := replicaSets(t, cs, "web")
	if len(rss) != 1 {
		t.Fatalf("%d replicasets", len(rss))
	}
	rs := rss[0]
	hash := ComputeHash(&d0.Spec.Template, nil)
	if rs.Name != "web-"+hash || rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
		t.Fatalf("replicaset %s labels %v selector %v, want hash %s", rs.Name, rs.Labels, rs.Spec.Selector, hash)
	}
	if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != d0.UID {
		t.Fatalf("replicaset owner %+v", rs.OwnerReferences)
	}
	if rs.Annotations[RevisionAnnotation] != "1" || rs.Annotations[DesiredReplicasAnnotation] != "3" || rs.Annotations[MaxReplicasAnnotation] != "4" {
		t.Fatalf("replicaset annotations %v", rs.Annotations)
	}
	if d.Annotations[RevisionAnnotation] != "1" {
		t.Fatalf("deployment annotations %v", d.Annotations)
	}
	ps := pods(t, cs, "web")
	if len(ps) != 3 {
		t.Fatalf("%d pods", len(ps))
	}
	for _, p := range ps {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID || p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
			t.Fatalf("pod %s refs %+v labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
	}
	if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonMinimumAvailable {
		t.Fatalf("available condition %+v", c)
	}
	eventually(t, "progressing condition", func() (bool, error) {
		c := condition(getDeploy(t, cs, "web"), appsv1.DeploymentProgressing)
		return c != nil && c.Reason == ReasonNewRSAvailable && c.Status == corev1.ConditionTrue, fmt.Errorf("%+v", c)
	})
	eventually(t, "ScalingReplicaSet event", func() (bool, error) {
		evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		want := fmt.Sprintf("Scaled up replica set %s from 0 to 3", rs.Name)
		for _, e := range evs.Items {
			if e.Reason == "ScalingReplicaSet" && e.Message == want && e.InvolvedObject.Name == "web" {
				return true, nil
			}
		}
		return false, fmt.Errorf("no event %q", want)
	})
}

// podWatcher follows the pods of an app and records the extremes of the
// total and the ready count seen at any instant.
type podWatcher struct {
	mu       sync.Mutex
	pods     map[types.UID]*corev1.Pod
	maxTotal int
	minReady int
	both     bool // pods of two templates existed at the same time
	stop     func()
	done     chan struct{}
}

func watchPods(t *testing.T, cs kubernetes.Interface, app string) *podWatcher {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatcher{pods: map[types.UID]*corev1.Pod{}, minReady: 1 << 30, stop: w.Stop, done: make(chan struct{})}
	for i := range l.Items {
		pw.pods[l.Items[i].UID] = &l.Items[i]
	}
	pw.observe()
	go func() {
		defer close(pw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
				delete(pw.pods, p.UID)
			} else {
				pw.pods[p.UID] = p
			}
			pw.mu.Unlock()
			pw.observe()
		}
	}()
	return pw
}

func (pw *podWatcher) observe() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	total, readyN := 0, 0
	hashes := map[string]bool{}
	for _, p := range pw.pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		total++
		hashes[p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = true
		if ready(p) {
			readyN++
		}
	}
	pw.maxTotal = max(pw.maxTotal, total)
	pw.minReady = min(pw.minReady, readyN)
	pw.both = pw.both || len(hashes) > 1
}

func (pw *podWatcher) finish() (maxTotal, minReady int, both bool) {
	pw.stop()
	<-pw.done
	return pw.maxTotal, pw.minReady, pw.both
}

func TestRollingUpdateBoundsAndRollback(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	d := newDeployment("web", 4, "nginx:A")
	one := intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, "web")
	first := replicaSets(t, cs, "web")[0]

	pw := watchPods(t, cs, "web")
	update(t, cs, "web", setImage("nginx:B"))
	// Mark new pods ready one at a time, as slow kubelets would.
	eventually(t, "rolling update to B", func() (bool, error) {
		for _, p := range pods(t, cs, "web") {
			if p.DeletionTimestamp == nil && !ready(&p) {
				markReady(t, cs, p)
				time.Sleep(50 * time.Millisecond)
				break
			}
		}
		return rolloutDone(getDeploy(t, cs, "web"))
	})
	maxTotal, minReady, _ := pw.finish()
	t.Logf("during the update: at most %d pods, at least %d ready", maxTotal, minReady)
	if maxTotal > 4+1 {
		t.Errorf("saw %d pods at once, want at most replicas+maxSurge = 5", maxTotal)
	}
	if minReady < 4-1 {
		t.Errorf("saw %d ready pods at once, want at least replicas-maxUnavailable = 3", minReady)
	}
	rss := replicaSets(t, cs, "web")
	if len(rss) != 2 {
		t.Fatalf("%d replicasets after the update", len(rss))
	}
	for _, rs := range rss {
		if rs.Name == first.Name && *rs.Spec.Replicas != 0 {
			t.Fatalf("old replicaset still has %d replicas", *rs.Spec.Replicas)
		}
		if rs.Name != first.Name && rs.Annotations[RevisionAnnotation] != "2" {
			t.Fatalf("new replicaset revision %q", rs.Annotations[RevisionAnnotation])
		}
	}

	// Rollback as `kubectl rollout undo` does it: patch the old template in.
	tmpl := first.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	dd := waitRollout(t, cs, "web")
	rss = replicaSets(t, cs, "web")
	if len(rss) != 2 {
		t.Fatalf("%d replicasets after rollback, want the first one reused", len(rss))
	}
	for _, rs := range rss {
		if rs.Name == first.Name {
			if *rs.Spec.Replicas != 4 || rs.Annotations[RevisionAnnotation] != "3" || rs.Annotations[RevisionHistoryAnnotation] != "1" {
				t.Fatalf("first replicaset after rollback: replicas %d annotations %v", *rs.Spec.Replicas, rs.Annotations)
			}
		}
	}
	eventually(t, "deployment revision 3", func() (bool, error) {
		dd = getDeploy(t, cs, "web")
		return dd.Annotations[RevisionAnnotation] == "3", fmt.Errorf("annotations %v", dd.Annotations)
	})
	for _, p := range pods(t, cs, "web") {
		if p.Spec.Containers[0].Image != "nginx:A" {
			t.Fatalf("pod %s runs %s after rollback", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

func scaleTo(t *testing.T, cs kubernetes.Interface, name string, n int32) {
	t.Helper()
	s, err := cs.AppsV1().Deployments(ns).GetScale(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(context.Background(), name, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestScaleUpAndToZero(t *testing.T) {
	cs := start(t)
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), newDeployment("web", 3, "nginx:A"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, "web")
	scaleTo(t, cs, "web", 5)
	d := waitRollout(t, cs, "web")
	if d.Status.Replicas != 5 || len(pods(t, cs, "web")) != 5 {
		t.Fatalf("status %+v", d.Status)
	}
	rs := replicaSets(t, cs, "web")
	if len(rs) != 1 || rs[0].Annotations[DesiredReplicasAnnotation] != "5" {
		t.Fatalf("replicasets %v", rs)
	}
	scaleTo(t, cs, "web", 0)
	d = waitRollout(t, cs, "web")
	eventually(t, "no pods", func() (bool, error) {
		n := len(pods(t, cs, "web"))
		return n == 0, fmt.Errorf("%d pods", n)
	})
	if d.Status.Replicas != 0 || d.Status.AvailableReplicas != 0 {
		t.Fatalf("status %+v", d.Status)
	}
}

func TestRecreate(t *testing.T) {
	cs := start(t)
	d := newDeployment("web", 3, "nginx:A")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, "web")
	pw := watchPods(t, cs, "web")
	update(t, cs, "web", setImage("nginx:B"))
	waitRollout(t, cs, "web")
	_, _, both := pw.finish()
	if both {
		t.Error("old and new pods existed at the same time under Recreate")
	}
	ps := pods(t, cs, "web")
	if len(ps) != 3 {
		t.Fatalf("%d pods", len(ps))
	}
	for _, p := range ps {
		if p.Spec.Containers[0].Image != "nginx:B" {
			t.Fatalf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

func TestPauseStopsRollout(t *testing.T) {
	cs := start(t)
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), newDeployment("web", 2, "nginx:A"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, "web")
	update(t, cs, "web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	update(t, cs, "web", setImage("nginx:B"))
	eventually(t, "paused condition and observed generation", func() (bool, error) {
		d := getDeploy(t, cs, "web")
		c := condition(d, appsv1.DeploymentProgressing)
		return d.Status.ObservedGeneration == d.Generation && c != nil && c.Reason == ReasonPaused, fmt.Errorf("%+v", d.Status)
	})
	// Scaling still works while paused.
	scaleTo(t, cs, "web", 3)
	eventually(t, "scaled while paused", func() (bool, error) {
		markAllReady(t, cs, "web")
		d := getDeploy(t, cs, "web")
		return d.Status.Replicas == 3 && d.Status.AvailableReplicas == 3, fmt.Errorf("%+v", d.Status)
	})
	time.Sleep(300 * time.Millisecond)
	if rss := replicaSets(t, cs, "web"); len(rss) != 1 {
		t.Fatalf("%d replicasets while paused, want no new one", len(rss))
	}
	update(t, cs, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	waitRollout(t, cs, "web")
	if rss := replicaSets(t, cs, "web"); len(rss) != 2 {
		t.Fatalf("%d replicasets after resume", len(rss))
	}
	for _, p := range pods(t, cs, "web") {
		if p.Spec.Containers[0].Image != "nginx:B" {
			t.Fatalf("pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

// TestDeletedPodsRecreatedOnce: the ReplicaSet replaces deleted pods exactly
// once (its expectations keep a resync from creating again).
func TestDeletedPodsRecreatedOnce(t *testing.T) {
	cs := start(t)
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), newDeployment("web", 3, "nginx:A"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, cs, "web")
	pw := watchPods(t, cs, "web")
	for _, p := range pods(t, cs, "web")[:2] {
		if err := cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitRollout(t, cs, "web")
	time.Sleep(300 * time.Millisecond)
	maxTotal, _, _ := pw.finish()
	if n := len(pods(t, cs, "web")); n != 3 || maxTotal > 3 {
		t.Fatalf("%d pods now, %d at most; want 3", n, maxTotal)
	}
}
