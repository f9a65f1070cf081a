package apiserver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// Helpers shared by the semantics tests (semantics_test.go,
// delete_test.go, listwatch_test.go, table_test.go).

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mkNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func testPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
}

func testDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "nginx:1.27",
					Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
				}}},
			},
		},
	}
}

func testReplicaSet(name string) *appsv1.ReplicaSet {
	d := testDeployment(name)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

func testConfigMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func rvInt(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an integer: %v", rv, err)
	}
	return n
}

// wantStatus checks that err is an API error with the given HTTP code.
func wantStatus(t *testing.T, what string, err error, codes ...int32) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want HTTP %v", what, codes)
	}
	got := apierrors.ReasonForError(err)
	var code int32
	if st, ok := err.(apierrors.APIStatus); ok {
		code = st.Status().Code
	}
	for _, c := range codes {
		if code == c {
			return
		}
	}
	t.Fatalf("%s: got HTTP %d (%s): %v, want %v", what, code, got, err, codes)
}

func TestCreateSemantics(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")

	t.Run("generateName", func(t *testing.T) {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(cm.Name, "gen-") || len(cm.Name) <= len("gen-") {
			t.Fatalf("generated name %q lacks the prefix or a suffix", cm.Name)
		}
		if cm.GenerateName != "gen-" {
			t.Errorf("generateName = %q, want it kept", cm.GenerateName)
		}
		if _, err := cms.Get(ctx, cm.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("get generated object: %v", err)
		}
	})

	t.Run("metadata", func(t *testing.T) {
		a, err := cms.Create(ctx, testConfigMap("meta-a", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a.UID == "" {
			t.Error("uid not set")
		}
		if a.CreationTimestamp.IsZero() || time.Since(a.CreationTimestamp.Time) > time.Minute {
			t.Errorf("creationTimestamp = %v", a.CreationTimestamp)
		}
		if a.Namespace != "default" {
			t.Errorf("namespace = %q, want default", a.Namespace)
		}
		b, err := cms.Create(ctx, testConfigMap("meta-b", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rvInt(t, b.ResourceVersion) <= rvInt(t, a.ResourceVersion) {
			t.Errorf("resourceVersion did not increase: %s then %s", a.ResourceVersion, b.ResourceVersion)
		}
		if a.UID == b.UID {
			t.Error("two objects share a uid")
		}
		got, err := cms.Get(ctx, "meta-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != a.UID || got.ResourceVersion != a.ResourceVersion {
			t.Errorf("get returned uid %s rv %s, create returned uid %s rv %s", got.UID, got.ResourceVersion, a.UID, a.ResourceVersion)
		}
	})

	t.Run("client-set fields are ignored", func(t *testing.T) {
		cm := testConfigMap("preset", nil)
		cm.UID = "not-a-real-uid"
		cm.ResourceVersion = "12345"
		out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.UID == "not-a-real-uid" {
			t.Error("the server kept a client-chosen uid")
		}
	})

	t.Run("deployment generation", func(t *testing.T) {
		d, err := cs.AppsV1().Deployments("default").Create(ctx, testDeployment("gen1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 {
			t.Errorf("generation = %d, want 1", d.Generation)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("replicas not defaulted to 1: %v", d.Spec.Replicas)
		}
	})

	t.Run("namespace mismatch", func(t *testing.T) {
		cm := testConfigMap("mismatch", nil)
		cm.Namespace = "kube-system"
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		wantStatus(t, "create with another namespace in the body", err, 400)
		if !apierrors.IsBadRequest(err) {
			t.Errorf("reason = %s, want BadRequest", apierrors.ReasonForError(err))
		}
	})

	// A create in a missing namespace is refused by the NamespaceLifecycle
	// plugin (admissionplugins' TestNamespaceLifecycle).

	t.Run("already exists", func(t *testing.T) {
		if _, err := cms.Create(ctx, testConfigMap("dup", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := cms.Create(ctx, testConfigMap("dup", nil), metav1.CreateOptions{})
		wantStatus(t, "second create", err, 409)
		if !apierrors.IsAlreadyExists(err) {
			t.Errorf("reason = %s, want AlreadyExists", apierrors.ReasonForError(err))
		}
	})

	t.Run("dryRun", func(t *testing.T) {
		out, err := cms.Create(ctx, testConfigMap("dry", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Name != "dry" {
			t.Errorf("dry-run create returned name %q", out.Name)
		}
		_, err = cms.Get(ctx, "dry", metav1.GetOptions{})
		wantStatus(t, "get after dry-run create", err, 404)
		// A dry-run create of a Service must not hold on to an IP either.
		svc, err := cs.CoreV1().Services("default").Create(ctx, testService("dry-svc", ""), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP == "" {
			t.Error("dry-run service create shows no clusterIP")
		}
		if _, err := cs.CoreV1().Services("default").Get(ctx, "dry-svc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("dry-run service stored: %v", err)
		}
	})
}

func TestUpdateSemantics(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	deps := cs.AppsV1().Deployments("default")
	d, err := deps.Create(ctx, testDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A label change is not a spec change.
	d.Labels = map[string]string{"tier": "front"}
	d, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 {
		t.Errorf("after a label change generation = %d, want 1", d.Generation)
	}

	// A spec change is.
	d.Spec.Replicas = ptr.To(int32(3))
	d, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 {
		t.Errorf("after a spec change generation = %d, want 2", d.Generation)
	}

	// Status on the main resource is ignored.
	d.Status.Replicas = 7
	d.Status.ObservedGeneration = 2
	d, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Replicas != 0 || d.Status.ObservedGeneration != 0 {
		t.Errorf("status written through the main resource: %+v", d.Status)
	}
	if d.Generation != 2 {
		t.Errorf("a status-only change bumped generation to %d", d.Generation)
	}

	// UpdateStatus ignores spec changes and keeps generation.
	d.Spec.Replicas = ptr.To(int32(9))
	d.Status.Replicas = 3
	d.Status.ObservedGeneration = 2
	d, err = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("UpdateStatus changed spec.replicas to %d", *d.Spec.Replicas)
	}
	if d.Status.Replicas != 3 || d.Status.ObservedGeneration != 2 {
		t.Errorf("UpdateStatus did not write status: %+v", d.Status)
	}
	if d.Generation != 2 {
		t.Errorf("UpdateStatus changed generation to %d", d.Generation)
	}
	got, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 || got.Status.Replicas != 3 {
		t.Errorf("stored spec.replicas=%d status.replicas=%d, want 3 and 3", *got.Spec.Replicas, got.Status.Replicas)
	}

	// An update that changes nothing writes nothing.
	before := got.ResourceVersion
	same, err := deps.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != before {
		t.Errorf("no-op update moved resourceVersion %s -> %s", before, same.ResourceVersion)
	}
	if same.Generation != 2 {
		t.Errorf("no-op update changed generation to %d", same.Generation)
	}

	// A stale resourceVersion conflicts.
	stale := got.DeepCopy()
	got.Annotations = map[string]string{"a": "1"}
	if _, err := deps.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Annotations = map[string]string{"a": "2"}
	_, err = deps.Update(ctx, stale, metav1.UpdateOptions{})
	wantStatus(t, "update with a stale resourceVersion", err, 409)
	if !apierrors.IsConflict(err) {
		t.Errorf("reason = %s, want Conflict", apierrors.ReasonForError(err))
	}

	// A creationTimestamp change is ignored.
	cur, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := cur.CreationTimestamp
	cur.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	cur.Annotations["b"] = "2"
	out, err := deps.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.CreationTimestamp.Equal(&created) {
		t.Errorf("update changed creationTimestamp to %v", out.CreationTimestamp)
	}

	// Update of a missing object is 404.
	missing := testDeployment("missing")
	missing.Namespace = "default"
	_, err = deps.Update(ctx, missing, metav1.UpdateOptions{})
	wantStatus(t, "update of a missing deployment", err, 404)
}

func TestPatchSemantics(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	deps := cs.AppsV1().Deployments("default")
	d, err := deps.Create(ctx, testDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("json patch", func(t *testing.T) {
		out, err := deps.Patch(ctx, "web", types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/replicas","value":4},{"op":"add","path":"/metadata/labels","value":{"via":"json"}}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *out.Spec.Replicas != 4 || out.Labels["via"] != "json" {
			t.Errorf("json patch: replicas=%d labels=%v", *out.Spec.Replicas, out.Labels)
		}
		if out.Generation != 2 {
			t.Errorf("json patch of spec: generation = %d, want 2", out.Generation)
		}
	})

	t.Run("merge patch", func(t *testing.T) {
		out, err := deps.Patch(ctx, "web", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"via":"merge","extra":"x"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Labels["via"] != "merge" || out.Labels["extra"] != "x" {
			t.Errorf("merge patch labels = %v", out.Labels)
		}
		if out.Generation != 2 {
			t.Errorf("label-only merge patch: generation = %d, want 2", out.Generation)
		}
		// A null deletes a key.
		out, err = deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"extra":null}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Labels["extra"]; ok {
			t.Errorf("merge patch null did not remove the label: %v", out.Labels)
		}
	})

	t.Run("strategic merge patch merges env by name", func(t *testing.T) {
		out, err := deps.Patch(ctx, "web", types.StrategicMergePatchType,
			[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs := out.Spec.Template.Spec.Containers
		if len(cs) != 1 || cs[0].Image != "nginx:1.27" {
			t.Fatalf("SMP replaced the container list: %+v", cs)
		}
		env := map[string]string{}
		for _, e := range cs[0].Env {
			env[e.Name] = e.Value
		}
		if env["A"] != "1" || env["B"] != "2" || len(env) != 2 {
			t.Errorf("env after SMP = %v, want A=1 and B=2", cs[0].Env)
		}
		if out.Generation != 3 {
			t.Errorf("SMP of the template: generation = %d, want 3", out.Generation)
		}
	})

	t.Run("stale resourceVersion in patch", func(t *testing.T) {
		_, err := deps.Patch(ctx, "web", types.MergePatchType,
			[]byte(`{"metadata":{"resourceVersion":"`+d.ResourceVersion+`","labels":{"stale":"yes"}}}`), metav1.PatchOptions{})
		wantStatus(t, "patch pinned to a stale resourceVersion", err, 409)
		cur, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The current resourceVersion works.
		if _, err := deps.Patch(ctx, "web", types.MergePatchType,
			[]byte(`{"metadata":{"resourceVersion":"`+cur.ResourceVersion+`","labels":{"fresh":"yes"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("patch pinned to the current resourceVersion: %v", err)
		}
	})

	t.Run("invalid json patch", func(t *testing.T) {
		_, err := deps.Patch(ctx, "web", types.JSONPatchType, []byte(`{"not":"a patch"`), metav1.PatchOptions{})
		wantStatus(t, "malformed JSON patch", err, 400, 422)
		// Well-formed but inapplicable: upstream answers 422.
		_, err = deps.Patch(ctx, "web", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/nosuchfield"}]`), metav1.PatchOptions{})
		wantStatus(t, "JSON patch removing a missing path", err, 422)
		// A patch that yields an invalid object is 422 too.
		_, err = deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":-1}}`), metav1.PatchOptions{})
		wantStatus(t, "merge patch to negative replicas", err, 422)
	})

	t.Run("patch of a missing object", func(t *testing.T) {
		_, err := deps.Patch(ctx, "nope", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
		wantStatus(t, "patch of a missing deployment", err, 404)
	})

	t.Run("no-op patch keeps resourceVersion", func(t *testing.T) {
		cur, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"fresh":"yes"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.ResourceVersion != cur.ResourceVersion {
			t.Errorf("no-op patch moved resourceVersion %s -> %s", cur.ResourceVersion, out.ResourceVersion)
		}
	})

	t.Run("status patch", func(t *testing.T) {
		out, err := deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":8},"status":{"replicas":2}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatal(err)
		}
		if out.Status.Replicas != 2 {
			t.Errorf("status patch: status.replicas = %d, want 2", out.Status.Replicas)
		}
		if *out.Spec.Replicas == 8 {
			t.Error("status patch changed spec.replicas")
		}
	})
}
