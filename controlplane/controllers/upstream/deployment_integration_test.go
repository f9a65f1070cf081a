package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/pkg/controller"
	deploymentutil "k8s.io/kubernetes/pkg/controller/deployment/util"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestDeploymentController runs upstream's Deployment and ReplicaSet
// controllers against the real API server, each case in a namespace of
// its own. No scheduler runs: pods stay unbound and the test plays the
// nodelet by marking them ready.
func TestDeploymentController(t *testing.T) {
	cs := start(t)
	for name, test := range map[string]func(*fixture){
		"create":                      testDeploymentCreate,
		"rolling-update-and-rollback": testRollingUpdateAndRollback,
		"scale":                       testDeploymentScale,
		"recreate":                    testRecreate,
		"pause":                       testPause,
		"deleted-pods-recreated-once": testDeploymentPodsRecreatedOnce,
	} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(newFixture(t, cs, name)) })
	}
}

func (f *fixture) newDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
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

func (f *fixture) createDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	f.t.Helper()
	created, err := f.cs.AppsV1().Deployments(f.ns).Create(f.t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create deployment %s: %v", d.Name, err)
	}
	return created
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	f.t.Helper()
	d, err := f.cs.AppsV1().Deployments(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get deployment %s: %v", name, err)
	}
	return d
}

// rolloutDone is `kubectl rollout status`'s test for a finished rollout.
func rolloutDone(d *appsv1.Deployment) (bool, error) {
	s := d.Status
	done := d.Generation <= s.ObservedGeneration && s.UpdatedReplicas == *d.Spec.Replicas &&
		s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
	return done, fmt.Errorf("generation %d status %+v", d.Generation, s)
}

// waitRollout keeps marking new pods ready until the rollout is done.
func (f *fixture) waitRollout(name string) *appsv1.Deployment {
	f.t.Helper()
	var d *appsv1.Deployment
	testkit.Eventually(f.t, 60*time.Second, "rollout of "+name, func(context.Context) (bool, error) {
		f.markAllReady(name)
		d = f.deployment(name)
		return rolloutDone(d)
	})
	return d
}

// update applies mutate to the Deployment, retrying on conflict.
func (f *fixture) update(name string, mutate func(*appsv1.Deployment)) {
	f.t.Helper()
	testkit.Eventually(f.t, 60*time.Second, "update of "+name, func(ctx context.Context) (bool, error) {
		d := f.deployment(name)
		mutate(d)
		_, err := f.cs.AppsV1().Deployments(f.ns).Update(ctx, d, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func setImage(image string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image }
}

func (f *fixture) scaleDeployment(name string, n int32) {
	f.t.Helper()
	ctx := f.t.Context()
	s, err := f.cs.AppsV1().Deployments(f.ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get scale of %s: %v", name, err)
	}
	s.Spec.Replicas = n
	if _, err := f.cs.AppsV1().Deployments(f.ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("scale %s to %d: %v", name, n, err)
	}
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	return deploymentutil.GetDeploymentCondition(d.Status, t)
}

func images(pods []corev1.Pod) map[string]int {
	n := map[string]int{}
	for _, p := range pods {
		n[p.Spec.Containers[0].Image]++
	}
	return n
}

// testDeploymentCreate: a Deployment makes one hash-named ReplicaSet it
// controls, with upstream's annotations, whose pods it labels with the
// hash; conditions and the ScalingReplicaSet event follow.
func testDeploymentCreate(f *fixture) {
	t := f.t
	d0 := f.createDeployment(f.newDeployment("web", 3, "nginx:A"))
	d := f.waitRollout("web")
	rss := f.replicaSets("web")
	if len(rss) != 1 {
		t.Fatalf("%d replicasets", len(rss))
	}
	rs := rss[0]
	hash := controller.ComputeHash(&d0.Spec.Template, nil)
	if rs.Name != "web-"+hash || rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash ||
		rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
		t.Fatalf("replicaset %s labels %v selector %v, want hash %s", rs.Name, rs.Labels, rs.Spec.Selector, hash)
	}
	if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != d0.UID {
		t.Fatalf("replicaset owner %+v", rs.OwnerReferences)
	}
	a := rs.Annotations
	if a[deploymentutil.RevisionAnnotation] != "1" || a[deploymentutil.DesiredReplicasAnnotation] != "3" ||
		a[deploymentutil.MaxReplicasAnnotation] != "4" {
		t.Fatalf("replicaset annotations %v", a)
	}
	if d.Annotations[deploymentutil.RevisionAnnotation] != "1" {
		t.Fatalf("deployment annotations %v", d.Annotations)
	}
	ps := f.pods("web")
	if len(ps) != 3 {
		t.Fatalf("%d pods", len(ps))
	}
	for _, p := range ps {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID || p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash {
			t.Fatalf("pod %s refs %+v labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
	}
	if c := deploymentCondition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue ||
		c.Reason != deploymentutil.MinimumReplicasAvailable {
		t.Fatalf("available condition %+v", c)
	}
	testkit.Eventually(f.t, 60*time.Second, "progressing condition", func(context.Context) (bool, error) {
		c := deploymentCondition(f.deployment("web"), appsv1.DeploymentProgressing)
		return c != nil && c.Reason == deploymentutil.NewRSAvailableReason && c.Status == corev1.ConditionTrue, fmt.Errorf("%+v", c)
	})
	want := fmt.Sprintf("Scaled up replica set %s from 0 to 3", rs.Name)
	testkit.Eventually(f.t, 60*time.Second, "ScalingReplicaSet event", func(context.Context) (bool, error) {
		_, msgs := f.events("ScalingReplicaSet", "web")
		for _, m := range msgs {
			if m == want {
				return true, nil
			}
		}
		return false, fmt.Errorf("events %q, want %q", msgs, want)
	})
}

// testRollingUpdateAndRollback: a rolling update stays within maxSurge and
// maxUnavailable; `kubectl rollout undo` (the old template patched in)
// reuses the first ReplicaSet as revision 3.
func testRollingUpdateAndRollback(f *fixture) {
	t := f.t
	d := f.newDeployment("web", 4, "nginx:A")
	one := intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}}
	f.createDeployment(d)
	f.waitRollout("web")
	first := f.replicaSets("web")[0]

	pw := f.watchPods("web")
	f.update("web", setImage("nginx:B"))
	// Mark new pods ready one at a time, as slow nodes would.
	testkit.Eventually(f.t, 60*time.Second, "rolling update to B", func(context.Context) (bool, error) {
		for _, p := range f.pods("web") {
			if p.DeletionTimestamp == nil && !podReady(&p) {
				f.markReady(p)
				time.Sleep(50 * time.Millisecond)
				break
			}
		}
		return rolloutDone(f.deployment("web"))
	})
	seen := pw.finish()
	t.Logf("during the update: %v", seen)
	if seen.maxTotal > 4+1 {
		t.Errorf("saw %d pods at once, want at most replicas+maxSurge = 5", seen.maxTotal)
	}
	if seen.minReady < 4-1 {
		t.Errorf("saw %d ready pods at once, want at least replicas-maxUnavailable = 3", seen.minReady)
	}
	rss := f.replicaSets("web")
	if len(rss) != 2 {
		t.Fatalf("%d replicasets after the update", len(rss))
	}
	for _, rs := range rss {
		if rs.Name == first.Name && *rs.Spec.Replicas != 0 {
			t.Fatalf("old replicaset still has %d replicas", *rs.Spec.Replicas)
		}
		if rs.Name != first.Name && rs.Annotations[deploymentutil.RevisionAnnotation] != "2" {
			t.Fatalf("new replicaset revision %q", rs.Annotations[deploymentutil.RevisionAnnotation])
		}
	}

	tmpl := first.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cs.AppsV1().Deployments(f.ns).Patch(t.Context(), "web", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("roll back: %v", err)
	}
	f.waitRollout("web")
	rss = f.replicaSets("web")
	if len(rss) != 2 {
		t.Fatalf("%d replicasets after rollback, want the first one reused", len(rss))
	}
	for _, rs := range rss {
		a := rs.Annotations
		if rs.Name == first.Name && (*rs.Spec.Replicas != 4 || a[deploymentutil.RevisionAnnotation] != "3" ||
			a[deploymentutil.RevisionHistoryAnnotation] != "1") {
			t.Fatalf("first replicaset after rollback: replicas %d annotations %v", *rs.Spec.Replicas, a)
		}
	}
	testkit.Eventually(f.t, 60*time.Second, "deployment revision 3", func(context.Context) (bool, error) {
		a := f.deployment("web").Annotations
		return a[deploymentutil.RevisionAnnotation] == "3", fmt.Errorf("annotations %v", a)
	})
	if n := images(f.pods("web")); len(n) != 1 || n["nginx:A"] != 4 {
		t.Fatalf("images after rollback: %v", n)
	}
}

// testDeploymentScale: through the scale subresource, up and then to zero.
func testDeploymentScale(f *fixture) {
	t := f.t
	f.createDeployment(f.newDeployment("web", 3, "nginx:A"))
	f.waitRollout("web")
	f.scaleDeployment("web", 5)
	d := f.waitRollout("web")
	if d.Status.Replicas != 5 || len(f.pods("web")) != 5 {
		t.Fatalf("status %+v", d.Status)
	}
	if rss := f.replicaSets("web"); len(rss) != 1 || rss[0].Annotations[deploymentutil.DesiredReplicasAnnotation] != "5" {
		t.Fatalf("replicasets %v", rss)
	}
	f.scaleDeployment("web", 0)
	d = f.waitRollout("web")
	testkit.Eventually(f.t, 60*time.Second, "no pods", func(context.Context) (bool, error) {
		n := len(f.pods("web"))
		return n == 0, fmt.Errorf("%d pods", n)
	})
	if d.Status.Replicas != 0 || d.Status.AvailableReplicas != 0 {
		t.Fatalf("status %+v", d.Status)
	}
}

// testRecreate: old and new pods never exist at the same time.
func testRecreate(f *fixture) {
	t := f.t
	d := f.newDeployment("web", 3, "nginx:A")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	f.createDeployment(d)
	f.waitRollout("web")
	pw := f.watchPods("web")
	f.update("web", setImage("nginx:B"))
	f.waitRollout("web")
	if seen := pw.finish(); seen.both {
		t.Errorf("old and new pods existed at the same time under Recreate: %v", seen)
	}
	if n := images(f.pods("web")); len(n) != 1 || n["nginx:B"] != 3 {
		t.Fatalf("images after the update: %v", n)
	}
}

// testPause: a paused Deployment records the new template (observed
// generation, the paused condition) and scales, but rolls out only once
// resumed.
func testPause(f *fixture) {
	t := f.t
	f.createDeployment(f.newDeployment("web", 2, "nginx:A"))
	f.waitRollout("web")
	f.update("web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
	f.update("web", setImage("nginx:B"))
	testkit.Eventually(f.t, 60*time.Second, "paused condition and observed generation", func(context.Context) (bool, error) {
		d := f.deployment("web")
		c := deploymentCondition(d, appsv1.DeploymentProgressing)
		return d.Status.ObservedGeneration == d.Generation && c != nil && c.Reason == deploymentutil.PausedDeployReason,
			fmt.Errorf("%+v", d.Status)
	})
	f.scaleDeployment("web", 3)
	testkit.Eventually(f.t, 60*time.Second, "scaled while paused", func(context.Context) (bool, error) {
		f.markAllReady("web")
		d := f.deployment("web")
		return d.Status.Replicas == 3 && d.Status.AvailableReplicas == 3, fmt.Errorf("%+v", d.Status)
	})
	time.Sleep(300 * time.Millisecond)
	if rss := f.replicaSets("web"); len(rss) != 1 {
		t.Fatalf("%d replicasets while paused, want no new one", len(rss))
	}
	f.update("web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
	f.waitRollout("web")
	if rss := f.replicaSets("web"); len(rss) != 2 {
		t.Fatalf("%d replicasets after resume", len(rss))
	}
	if n := images(f.pods("web")); len(n) != 1 || n["nginx:B"] != 3 {
		t.Fatalf("images after resume: %v", n)
	}
}

// testDeploymentPodsRecreatedOnce: deleted pods are replaced exactly once
// (the ReplicaSet controller's expectations keep a resync from creating
// again).
func testDeploymentPodsRecreatedOnce(f *fixture) {
	t := f.t
	f.createDeployment(f.newDeployment("web", 3, "nginx:A"))
	f.waitRollout("web")
	pw := f.watchPods("web")
	for _, p := range f.pods("web")[:2] {
		if err := f.cs.CoreV1().Pods(f.ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
	}
	f.waitRollout("web")
	time.Sleep(300 * time.Millisecond)
	seen := pw.finish()
	if n := len(f.pods("web")); n != 3 || seen.maxTotal > 3 || seen.added != 5 {
		t.Fatalf("%d pods now; %v; want 3 now, 3 at most, 3 listed + 2 replacements added", n, seen)
	}
}
