package apiserver

import (
	"slices"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func TestDeleteFinalizers(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")

	t.Run("finalizer holds the object", func(t *testing.T) {
		cm := testConfigMap("held", nil)
		cm.Finalizers = []string{"example.com/hold"}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := cms.Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("object with a finalizer is gone after delete: %v", err)
		}
		if got.DeletionTimestamp == nil {
			t.Fatal("no deletionTimestamp on the deleted object")
		}
		// No new finalizers once deletion started.
		withMore := got.DeepCopy()
		withMore.Finalizers = append(withMore.Finalizers, "example.com/another")
		if _, err := cms.Update(ctx, withMore, metav1.UpdateOptions{}); err == nil {
			t.Error("adding a finalizer to an object being deleted succeeded")
		}
		// A second delete leaves it as is.
		if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		again, err := cms.Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !again.DeletionTimestamp.Equal(got.DeletionTimestamp) {
			t.Errorf("second delete moved deletionTimestamp %v -> %v", got.DeletionTimestamp, again.DeletionTimestamp)
		}
		again.Finalizers = nil
		if _, err := cms.Update(ctx, again, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = cms.Get(ctx, "held", metav1.GetOptions{})
		wantStatus(t, "get after the last finalizer was removed", err, 404)
	})

	t.Run("propagation policies", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			policy    metav1.DeletionPropagation
			finalizer string
		}{
			{"prop-orphan", metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents},
			{"prop-fg", metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents},
		} {
			name := tc.name
			if _, err := cms.Create(ctx, testConfigMap(name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := tc.policy
			if err := cms.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
				t.Fatal(err)
			}
			got, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: object gone after delete: %v", tc.policy, err)
			}
			if got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, tc.finalizer) {
				t.Errorf("%s: deletionTimestamp=%v finalizers=%v, want %q", tc.policy, got.DeletionTimestamp, got.Finalizers, tc.finalizer)
			}
		}
		// Background removes at once.
		if _, err := cms.Create(ctx, testConfigMap("prop-bg", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bg := metav1.DeletePropagationBackground
		if err := cms.Delete(ctx, "prop-bg", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Fatal(err)
		}
		_, err := cms.Get(ctx, "prop-bg", metav1.GetOptions{})
		wantStatus(t, "get after background delete", err, 404)
	})

	t.Run("preconditions", func(t *testing.T) {
		cm, err := cms.Create(ctx, testConfigMap("pre", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = cms.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions("wrong-uid")})
		wantStatus(t, "delete with a wrong uid precondition", err, 409)
		if _, err := cms.Get(ctx, "pre", metav1.GetOptions{}); err != nil {
			t.Fatalf("object gone after a failed precondition: %v", err)
		}
		stale := "1"
		err = cms.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}})
		wantStatus(t, "delete with a stale resourceVersion precondition", err, 409)
		if err := cms.Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cm.UID))}); err != nil {
			t.Fatalf("delete with the right uid: %v", err)
		}
		err = cms.Delete(ctx, "pre", metav1.DeleteOptions{})
		wantStatus(t, "delete of a missing object", err, 404)
	})
}

func TestDeletePods(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	pods := cs.CoreV1().Pods("default")

	if _, err := pods.Create(ctx, testPod("bound", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod gone at once after a graceful delete: %v", err)
	}
	if got.DeletionTimestamp == nil {
		t.Error("bound pod has no deletionTimestamp")
	}
	if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Errorf("deletionGracePeriodSeconds = %v, want 30", got.DeletionGracePeriodSeconds)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	_, err = pods.Get(ctx, "bound", metav1.GetOptions{})
	wantStatus(t, "get after delete with grace 0", err, 404)

	// A shorter grace period shortens an earlier one.
	if _, err := pods.Create(ctx, testPod("shorten", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "shorten", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "shorten", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(5))}); err != nil {
		t.Fatal(err)
	}
	got, err = pods.Get(ctx, "shorten", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 5 {
		t.Errorf("deletionGracePeriodSeconds after a shorter delete = %v, want 5", got.DeletionGracePeriodSeconds)
	}

	if _, err := pods.Create(ctx, testPod("unbound", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "unbound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = pods.Get(ctx, "unbound", metav1.GetOptions{})
	wantStatus(t, "get after deleting an unbound pod", err, 404)
}

func TestNamespaceDeletion(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	mkNamespace(t, cs, "doomed")
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("new namespace phase = %q, want Active", ns.Status.Phase)
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Errorf("new namespace spec.finalizers = %v, want kubernetes", ns.Spec.Finalizers)
	}
	if _, err := cs.CoreV1().ConfigMaps("doomed").Create(ctx, testConfigMap("before", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err = cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace gone before it was finalized: %v", err)
	}
	if ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("deleted namespace: phase=%q deletionTimestamp=%v, want Terminating", ns.Status.Phase, ns.DeletionTimestamp)
	}
	// Creating in it is refused by the NamespaceLifecycle plugin
	// (admissionplugins); existing content can still be deleted.
	if err := cs.CoreV1().ConfigMaps("doomed").Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete content of a terminating namespace: %v", err)
	}

	// The namespace controller's finalize call, through the raw client.
	ns.Spec.Finalizers = nil
	result := cs.CoreV1().RESTClient().Put().AbsPath("/api/v1/namespaces/doomed/finalize").Body(ns).Do(ctx)
	if err := result.Error(); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	_, err = cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
	wantStatus(t, "get after finalize", err, 404)

	// The same through the typed Finalize.
	mkNamespace(t, cs, "doomed2")
	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err = cs.CoreV1().Namespaces().Get(ctx, "doomed2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Spec.Finalizers = []corev1.FinalizerName{}
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("typed finalize: %v", err)
	}
	_, err = cs.CoreV1().Namespaces().Get(ctx, "doomed2", metav1.GetOptions{})
	wantStatus(t, "get after typed finalize", err, 404)
}

func TestPodBinding(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, testPod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("spec.nodeName = %q, want node-1", pod.Spec.NodeName)
	}
	scheduled := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled = true
		}
	}
	if !scheduled {
		t.Errorf("no PodScheduled=True condition: %+v", pod.Status.Conditions)
	}
	b2 := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}
	err = pods.Bind(ctx, b2, metav1.CreateOptions{})
	wantStatus(t, "binding a bound pod", err, 409)
	err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "ghost"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	wantStatus(t, "binding a missing pod", err, 404)
}

func TestScaleSubresource(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	deps := cs.AppsV1().Deployments("default")
	rss := cs.AppsV1().ReplicaSets("default")
	if _, err := deps.Create(ctx, testDeployment("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rss.Create(ctx, testReplicaSet("rs"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 1 || sc.Name != "web" || sc.Status.Selector != "app=web" {
		t.Errorf("deployment scale = %+v", sc)
	}
	sc.Spec.Replicas = 3
	if sc, err = deps.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 3 {
		t.Errorf("UpdateScale returned replicas %d", sc.Spec.Replicas)
	}
	d, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || d.Generation != 2 {
		t.Errorf("after UpdateScale: replicas=%d generation=%d, want 3 and 2", *d.Spec.Replicas, d.Generation)
	}
	if sc.ResourceVersion != d.ResourceVersion {
		t.Errorf("scale resourceVersion %s != deployment %s", sc.ResourceVersion, d.ResourceVersion)
	}

	rsc, err := rss.GetScale(ctx, "rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsc.Spec.Replicas = 2
	if _, err := rss.UpdateScale(ctx, "rs", rsc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs, err := rss.Get(ctx, "rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *rs.Spec.Replicas != 2 {
		t.Errorf("replicaset replicas = %d, want 2", *rs.Spec.Replicas)
	}

	// A merge patch of the scale subresource.
	patched := &autoscalingv1.Scale{}
	err = cs.AppsV1().RESTClient().Patch(types.MergePatchType).Namespace("default").Resource("deployments").Name("web").
		SubResource("scale").Body([]byte(`{"spec":{"replicas":5}}`)).Do(ctx).Into(patched)
	if err != nil {
		t.Fatal(err)
	}
	if patched.Spec.Replicas != 5 {
		t.Errorf("scale patch returned replicas %d", patched.Spec.Replicas)
	}
	if d, err = deps.Get(ctx, "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 5 {
		t.Errorf("after the scale patch: %v, %v", d.Spec.Replicas, err)
	}

	// A stale resourceVersion on the scale conflicts.
	stale := sc.DeepCopy() // from before the patch
	stale.Spec.Replicas = 9
	_, err = deps.UpdateScale(ctx, "web", stale, metav1.UpdateOptions{})
	wantStatus(t, "UpdateScale with a stale resourceVersion", err, 409)

	cur, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = -1
	_, err = deps.UpdateScale(ctx, "web", cur, metav1.UpdateOptions{})
	wantStatus(t, "negative replicas on deployments/scale", err, 422)
	rsc, _ = rss.GetScale(ctx, "rs", metav1.GetOptions{})
	rsc.Spec.Replicas = -2
	_, err = rss.UpdateScale(ctx, "rs", rsc, metav1.UpdateOptions{})
	wantStatus(t, "negative replicas on replicasets/scale", err, 422)

	_, err = deps.GetScale(ctx, "ghost", metav1.GetOptions{})
	wantStatus(t, "scale of a missing deployment", err, 404)
}
