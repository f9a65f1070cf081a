package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestReplicaSetController runs upstream's ReplicaSet controller against
// the real API server, each case in a namespace of its own.
func TestReplicaSetController(t *testing.T) {
	cs := start(t)
	for name, test := range map[string]func(*fixture){
		"create-and-status":        testReplicaSetCreate,
		"deleted-pods-recreated":   testReplicaSetPodsRecreatedOnce,
		"scale-down-not-ready":     testScaleDownPrefersNotReady,
		"adopt-and-release-orphan": testAdoptAndRelease,
	} {
		t.Run(name, func(t *testing.T) { t.Parallel(); test(newFixture(t, cs, name)) })
	}
}

func (f *fixture) createReplicaSet(name string, n int32) *appsv1.ReplicaSet {
	f.t.Helper()
	l := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}},
			},
		},
	}
	created, err := f.cs.AppsV1().ReplicaSets(f.ns).Create(f.t.Context(), rs, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create replicaset %s: %v", name, err)
	}
	return created
}

// waitStatus waits for the ReplicaSet's status to have observed its
// generation and to satisfy want.
func (f *fixture) waitStatus(name string, want func(appsv1.ReplicaSetStatus) bool) {
	f.t.Helper()
	testkit.Eventually(f.t, 60*time.Second, "replicaset status of "+name, func(ctx context.Context) (bool, error) {
		rs, err := f.cs.AppsV1().ReplicaSets(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return want(rs.Status) && rs.Status.ObservedGeneration == rs.Generation, fmt.Errorf("status %+v", rs.Status)
	})
}

func (f *fixture) scaleReplicaSet(name string, n int32) {
	f.t.Helper()
	ctx := f.t.Context()
	s, err := f.cs.AppsV1().ReplicaSets(f.ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get scale of %s: %v", name, err)
	}
	s.Spec.Replicas = n
	if _, err := f.cs.AppsV1().ReplicaSets(f.ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatalf("scale %s to %d: %v", name, n, err)
	}
}

// testReplicaSetCreate: pods named after the ReplicaSet, controlled by it
// (blocking its deletion), counted in its status; a SuccessfulCreate
// event each.
func testReplicaSetCreate(f *fixture) {
	t := f.t
	rs := f.createReplicaSet("web", 3)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 3 && s.FullyLabeledReplicas == 3 })
	pods := f.pods("web")
	if len(pods) != 3 {
		t.Fatalf("%d pods", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("pod %s owner refs %+v", p.Name, p.OwnerReferences)
		}
		if len(p.Name) != len("web-")+5 || p.Name[:4] != "web-" {
			t.Fatalf("pod name %q", p.Name)
		}
	}
	for _, p := range pods {
		f.markReady(p)
	}
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.ReadyReplicas == 3 && s.AvailableReplicas == 3 })
	testkit.Eventually(f.t, 60*time.Second, "3 SuccessfulCreate events", func(context.Context) (bool, error) {
		n, msgs := f.events("SuccessfulCreate", "web")
		return n == 3, fmt.Errorf("%d: %q", n, msgs)
	})
}

// testReplicaSetPodsRecreatedOnce checks expectations: deleting pods makes
// the controller create exactly as many replacements, never more.
func testReplicaSetPodsRecreatedOnce(f *fixture) {
	t := f.t
	f.createReplicaSet("web", 5)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 5 })
	pw := f.watchPods("web")
	for _, p := range f.pods("web")[:3] {
		if err := f.cs.CoreV1().Pods(f.ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
	}
	testkit.Eventually(f.t, 60*time.Second, "5 pods again", func(context.Context) (bool, error) {
		n := len(f.pods("web"))
		return n == 5, fmt.Errorf("%d pods", n)
	})
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 5 })
	time.Sleep(500 * time.Millisecond) // give a double create the time to show
	if n := len(f.pods("web")); n != 5 {
		t.Fatalf("%d pods, want 5", n)
	}
	if seen := pw.finish(); seen.added != 8 {
		t.Fatalf("%v; want 5 listed + 3 replacements added", seen)
	}
}

// testScaleDownPrefersNotReady: scaling down deletes pods that are not
// ready before ready ones.
func testScaleDownPrefersNotReady(f *fixture) {
	t := f.t
	f.createReplicaSet("web", 4)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 4 })
	pods := f.pods("web")
	f.markReady(pods[0])
	f.markReady(pods[1])
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.ReadyReplicas == 2 })
	f.scaleReplicaSet("web", 2)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
	left := map[string]bool{}
	for _, p := range f.pods("web") {
		left[p.Name] = true
	}
	if len(left) != 2 || !left[pods[0].Name] || !left[pods[1].Name] {
		t.Fatalf("left %v, want the ready %s and %s", left, pods[0].Name, pods[1].Name)
	}
	f.scaleReplicaSet("web", 0)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 0 })
}

// testAdoptAndRelease: a matching orphan is adopted and counts towards
// replicas; relabelled out of the selector it is released and replaced.
func testAdoptAndRelease(f *fixture) {
	t := f.t
	ctx := t.Context()
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: f.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}
	if _, err := f.cs.CoreV1().Pods(f.ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create orphan: %v", err)
	}
	rs := f.createReplicaSet("web", 2)
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
	p, err := f.cs.CoreV1().Pods(f.ns).Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get orphan: %v", err)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != rs.UID {
		t.Fatalf("orphan not adopted: %+v", p.OwnerReferences)
	}
	if n := len(f.pods("web")); n != 2 {
		t.Fatalf("%d pods, want 2 (the adopted orphan and one new)", n)
	}
	p.Labels = map[string]string{"app": "debug"}
	if _, err := f.cs.CoreV1().Pods(f.ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabel orphan: %v", err)
	}
	testkit.Eventually(f.t, 60*time.Second, "release", func(ctx context.Context) (bool, error) {
		p, err := f.cs.CoreV1().Pods(f.ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(p.OwnerReferences) == 0, fmt.Errorf("owner refs %+v", p.OwnerReferences)
	})
	testkit.Eventually(f.t, 60*time.Second, "replacement", func(context.Context) (bool, error) {
		n := len(f.pods("web"))
		return n == 2, fmt.Errorf("%d pods", n)
	})
	f.waitStatus("web", func(s appsv1.ReplicaSetStatus) bool { return s.Replicas == 2 })
}
