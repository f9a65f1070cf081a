package garbagecollector

import (
	"context"
	"log/slog"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

const ns = "default"

// startGC starts a real API server and a collector on it.
func startGC(t *testing.T) kubernetes.Interface {
	cs, _ := startGCWithController(t)
	return cs
}

func startGCWithController(t *testing.T) (kubernetes.Interface, *Controller) {
	t.Helper()
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	md, err := metadata.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "garbage-collector"})
	gc, err := New(Config{Metadata: md, Discovery: cs.Discovery(), Recorder: rec,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)), ResyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		b.Shutdown()
	})
	return cs, gc
}

func ownerRef(apiVersion, kind string, m metav1.Object, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: m.GetName(), UID: m.GetUID(),
		Controller: &controller, BlockOwnerDeletion: &controller}
}

// must(v, err)(t) fails the test on err and returns v.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func gone[T any](get func(ctx context.Context, name string, o metav1.GetOptions) (T, error), name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

func configMap(name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners}}
}

func TestBackgroundDeletesDependentOfGoneOwner(t *testing.T) {
	cs := startGC(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps(ns)
	owner := must(cms.Create(ctx, configMap("owner"), metav1.CreateOptions{}))(t)
	must(cms.Create(ctx, configMap("dependent", ownerRef("v1", "ConfigMap", owner, false)), metav1.CreateOptions{}))(t)
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "dependent deleted", gone(cms.Get, "dependent"))
}

func TestDependentOfMissingOwnerIsDeleted(t *testing.T) {
	cs := startGC(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps(ns)
	ghost := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: types.UID("00000000-dead-beef-0000-000000000000")}}
	must(cms.Create(ctx, configMap("orphaned", ownerRef("v1", "ConfigMap", ghost, false)), metav1.CreateOptions{}))(t)
	// A namesake with another UID is not the owner either.
	must(cms.Create(ctx, configMap("ghost"), metav1.CreateOptions{}))(t)
	testkit.Eventually(t, 20*time.Second, "dependent of a missing owner deleted", gone(cms.Get, "orphaned"))
	must(cms.Get(ctx, "ghost", metav1.GetOptions{}))(t)
}

func TestDependentWithAnotherLiveOwnerSurvives(t *testing.T) {
	cs := startGC(t)
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps(ns)
	a := must(cms.Create(ctx, configMap("owner-a"), metav1.CreateOptions{}))(t)
	b := must(cms.Create(ctx, configMap("owner-b"), metav1.CreateOptions{}))(t)
	must(cms.Create(ctx, configMap("shared", ownerRef("v1", "ConfigMap", a, false), ownerRef("v1", "ConfigMap", b, false)), metav1.CreateOptions{}))(t)
	if err := cms.Delete(ctx, "owner-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "dangling reference removed", func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == b.UID, nil
	})
	// Losing the last owner deletes it.
	if err := cms.Delete(ctx, "owner-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "shared deleted after its last owner", gone(cms.Get, "shared"))
}

// chain is a Deployment → ReplicaSet → Pods family made by hand, with the
// references the controllers would set (controller, blockOwnerDeletion).
type chain struct {
	dep  *appsv1.Deployment
	rs   *appsv1.ReplicaSet
	pods []*corev1.Pod
}

func makeChain(t *testing.T, cs kubernetes.Interface, pods int, podFinalizers ...string) chain {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	var c chain
	c.dep = must(cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{}))(t)
	c.rs = must(cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", c.dep, true)}},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{}))(t)
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-1-", Labels: labels, Finalizers: podFinalizers,
			OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", c.rs, true)}}, Spec: tmpl.Spec}
		c.pods = append(c.pods, must(cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))(t))
		_ = i
	}
	return c
}

func deleteWith(t *testing.T, cs kubernetes.Interface, name string, p metav1.DeletionPropagation) {
	t.Helper()
	if err := cs.AppsV1().Deployments(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
		t.Fatal(err)
	}
}

func TestDeploymentBackgroundDeletesFamily(t *testing.T) {
	cs := startGC(t)
	c := makeChain(t, cs, 3)
	deleteWith(t, cs, c.dep.Name, metav1.DeletePropagationBackground)
	testkit.Eventually(t, 20*time.Second, "replicaset deleted", gone(cs.AppsV1().ReplicaSets(ns).Get, c.rs.Name))
	for _, p := range c.pods {
		testkit.Eventually(t, 20*time.Second, "pod deleted", gone(cs.CoreV1().Pods(ns).Get, p.Name))
	}
}

func TestDeploymentOrphanKeepsFamily(t *testing.T) {
	cs := startGC(t)
	ctx := t.Context()
	c := makeChain(t, cs, 2)
	deleteWith(t, cs, c.dep.Name, metav1.DeletePropagationOrphan)
	testkit.Eventually(t, 20*time.Second, "deployment deleted once orphaning is done", gone(cs.AppsV1().Deployments(ns).Get, c.dep.Name))
	rs := must(cs.AppsV1().ReplicaSets(ns).Get(ctx, c.rs.Name, metav1.GetOptions{}))(t)
	if len(rs.OwnerReferences) != 0 {
		t.Errorf("replicaset still has owners: %+v", rs.OwnerReferences)
	}
	// The pods belong to the surviving ReplicaSet, as upstream leaves them.
	time.Sleep(300 * time.Millisecond)
	for _, p := range c.pods {
		got := must(cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}))(t)
		if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != rs.UID {
			t.Errorf("pod %s owners = %+v, want the replicaset", p.Name, got.OwnerReferences)
		}
	}
}

func TestDeploymentForegroundWaitsForDependents(t *testing.T) {
	cs := startGC(t)
	ctx := t.Context()
	const hold = "example.com/hold"
	c := makeChain(t, cs, 2, hold)
	deleteWith(t, cs, c.dep.Name, metav1.DeletePropagationForeground)

	// The pods are deleted but held by a finalizer: the ReplicaSet (deleted
	// in the foreground, it has dependents) and the Deployment wait.
	pods := cs.CoreV1().Pods(ns)
	for _, p := range c.pods {
		testkit.Eventually(t, 20*time.Second, "pod marked deleted", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.DeletionTimestamp != nil, err
		})
	}
	time.Sleep(300 * time.Millisecond)
	rs := must(cs.AppsV1().ReplicaSets(ns).Get(ctx, c.rs.Name, metav1.GetOptions{}))(t)
	if rs.DeletionTimestamp == nil || !hasFinalizer(rs, metav1.FinalizerDeleteDependents) {
		t.Errorf("replicaset not deleted in the foreground: deletionTimestamp=%v finalizers=%v", rs.DeletionTimestamp, rs.Finalizers)
	}
	dep := must(cs.AppsV1().Deployments(ns).Get(ctx, c.dep.Name, metav1.GetOptions{}))(t)
	if dep.DeletionTimestamp == nil || !hasFinalizer(dep, metav1.FinalizerDeleteDependents) {
		t.Errorf("deployment: deletionTimestamp=%v finalizers=%v", dep.DeletionTimestamp, dep.Finalizers)
	}

	for _, p := range c.pods {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.pods {
		testkit.Eventually(t, 20*time.Second, "pod gone", gone(pods.Get, p.Name))
	}
	testkit.Eventually(t, 20*time.Second, "replicaset gone", gone(cs.AppsV1().ReplicaSets(ns).Get, c.rs.Name))
	testkit.Eventually(t, 20*time.Second, "deployment gone", gone(cs.AppsV1().Deployments(ns).Get, c.dep.Name))
}

func TestForegroundWithoutDependents(t *testing.T) {
	cs := startGC(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	must(cms.Create(t.Context(), configMap("alone"), metav1.CreateOptions{}))(t)
	fg := metav1.DeletePropagationForeground
	if err := cms.Delete(t.Context(), "alone", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "owner without dependents gone", gone(cms.Get, "alone"))
}

// A cluster-scoped owner (a Node) of namespaced dependents, with
// everything created after the collector has synced, so that the graph is
// built from watch events alone.
func TestClusterScopedOwnerFromWatchEvents(t *testing.T) {
	cs, gc := startGCWithController(t)
	ctx := t.Context()
	testkit.Eventually(t, 20*time.Second, "collector synced", func(context.Context) (bool, error) {
		ms := gc.allMonitors()
		return len(ms) > 0 && synced(ms)(), nil
	})
	node := must(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}))(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	must(cms.Create(ctx, configMap("node-data", ownerRef("v1", "Node", node, false)), metav1.CreateOptions{}))(t)
	testkit.Eventually(t, 20*time.Second, "graph links the configmap to the node", func(context.Context) (bool, error) {
		v, ok := gc.graph.view(node.UID)
		return ok && v.observed && len(v.dependents) == 1, nil
	})
	if err := cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "dependent of the deleted node deleted", gone(cms.Get, "node-data"))
}
