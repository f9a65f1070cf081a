package apiserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestUpdateVariants covers unconditional and dry-run updates and an
// immutable field.
func TestUpdateVariants(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, testConfigMap("u", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// No resourceVersion: an unconditional update.
	blind := testConfigMap("u", nil)
	blind.Data = map[string]string{"blind": "yes"}
	out, err := cms.Update(ctx, blind, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("unconditional update: %v", err)
	}
	if out.UID != cm.UID || out.Data["blind"] != "yes" {
		t.Errorf("unconditional update returned uid %s data %v", out.UID, out.Data)
	}

	// Dry run changes nothing.
	out.Data["dry"] = "yes"
	if _, err := cms.Update(ctx, out, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "u", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Data["dry"]; ok || got.ResourceVersion != out.ResourceVersion {
		t.Errorf("dry-run update was stored: %v rv %s -> %s", got.Data, out.ResourceVersion, got.ResourceVersion)
	}
	if _, err := cms.Patch(ctx, "u", types.MergePatchType, []byte(`{"data":{"dry":"patch"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if got, _ = cms.Get(ctx, "u", metav1.GetOptions{}); got.Data["dry"] != "" {
		t.Errorf("dry-run patch was stored: %v", got.Data)
	}

	// A deployment's selector is immutable in apps/v1.
	deps := cs.AppsV1().Deployments("default")
	d, err := deps.Create(ctx, testDeployment("sel"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sel", "x": "y"}}
	d.Spec.Template.Labels = map[string]string{"app": "sel", "x": "y"}
	_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	wantStatus(t, "changing an apps/v1 deployment selector", err, 422)
}

// TestFinalizerRemovalByPatch removes the last finalizer with a merge
// patch, as controllers do, and checks the watch sees DELETED.
func TestFinalizerRemovalByPatch(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")
	cm := testConfigMap("fin", nil)
	cm.Finalizers = []string{"example.com/a", "example.com/b"}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cms.Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := expectEvent(t, w, watch.Modified, "fin"); m.DeletionTimestamp == nil {
		t.Error("MODIFIED after delete lacks deletionTimestamp")
	}
	if _, err := cms.Patch(ctx, "fin", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers/0"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, w, watch.Modified, "fin")
	if _, err := cms.Patch(ctx, "fin", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, w, watch.Deleted, "fin")
	_, err = cms.Get(ctx, "fin", metav1.GetOptions{})
	wantStatus(t, "get after the finalizers were patched away", err, 404)
}

// TestKubeletStyleWatch watches pods by spec.nodeName, as a kubelet does,
// and sees a pod appear when it is bound, and its graceful deletion.
func TestKubeletStyleWatch(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	pods := cs.CoreV1().Pods("")
	l, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1", ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	dp := cs.CoreV1().Pods("default")
	if _, err := dp.Create(ctx, testPod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.Create(ctx, testPod("elsewhere", "node-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	if pod, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || pod.Name != "p" || pod.Spec.NodeName != "node-1" {
		t.Fatalf("after binding: %s %v, want ADDED p", ev.Type, objName(ev.Object))
	}
	before := time.Now()
	if err := dp.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, w)
	pod, ok := ev.Object.(*corev1.Pod)
	if ev.Type != watch.Modified || !ok || pod.DeletionTimestamp == nil {
		t.Fatalf("after graceful delete: %s %v, want MODIFIED with deletionTimestamp", ev.Type, objName(ev.Object))
	}
	// Upstream sets deletionTimestamp to now + the grace period.
	if d := pod.DeletionTimestamp.Sub(before); d < 25*time.Second || d > 35*time.Second {
		t.Errorf("deletionTimestamp is %v after the delete, want about 30s", d)
	}
	// The kubelet finishes the deletion.
	if err := dp.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, w)
	if ev.Type != watch.Deleted || objName(ev.Object) != "p" {
		t.Fatalf("after the final delete: %s %v, want DELETED p", ev.Type, objName(ev.Object))
	}
	expectNoEvent(t, w)
}

func TestDeleteCollection(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")
	for _, c := range []struct{ name, group string }{{"a", "x"}, {"b", "x"}, {"c", "y"}} {
		if _, err := cms.Create(ctx, testConfigMap(c.name, map[string]string{"group": c.group}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "group=x"}); err != nil {
		t.Fatal(err)
	}
	l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "group"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "c" {
		t.Errorf("after deletecollection group=x: %v", cmNames(l))
	}
}

// TestUpdateUIDPrecondition: a uid in an update's body is a precondition
// (upstream's defaultUpdatedObjectInfo.Preconditions; a mismatch is 409
// Conflict from the storage precondition check), and metadata.uid is
// immutable (ValidateObjectMetaAccessorUpdate; a patch changing it is 422).
func TestUpdateUIDPrecondition(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	deps := cs.AppsV1().Deployments("default")
	d, err := deps.Create(ctx, testDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const otherUID = "00000000-0000-0000-0000-000000000000"

	t.Run("update with another uid and the current resourceVersion", func(t *testing.T) {
		cur, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.UID = otherUID
		cur.Annotations = map[string]string{"c": "3"}
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{})
		wantStatus(t, "update with another uid", err, 409)
	})

	t.Run("unconditional update with another uid", func(t *testing.T) {
		// Without a resourceVersion the uid is the only guard against
		// overwriting an object recreated under the same name.
		other := d.DeepCopy()
		other.UID = otherUID
		other.ResourceVersion = ""
		other.Annotations = map[string]string{"c": "4"}
		_, err := deps.Update(ctx, other, metav1.UpdateOptions{})
		wantStatus(t, "unconditional update with another uid", err, 409)
	})

	t.Run("nothing was stored", func(t *testing.T) {
		got, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != d.UID || got.Annotations["c"] != "" {
			t.Errorf("an update with another uid was stored: uid %s annotations %v", got.UID, got.Annotations)
		}
	})

	t.Run("patch changing the uid", func(t *testing.T) {
		_, err := deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"uid":"`+otherUID+`"}}`), metav1.PatchOptions{})
		wantStatus(t, "patch changing metadata.uid", err, 422)
	})

	t.Run("the right uid is fine", func(t *testing.T) {
		cur, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.ResourceVersion = ""
		cur.Annotations = map[string]string{"ok": "yes"}
		if _, err := deps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Errorf("unconditional update with the right uid: %v", err)
		}
	})
}
