package apiserver

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cbor "k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/storage"
)

const applyDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: %s
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
`

func applyDeploymentYAML(replicas string) []byte {
	return []byte(strings.Replace(applyDeployment, "%s", replicas, 1))
}

func apply(ctx context.Context, cs kubernetes.Interface, ns, manager string, force bool, body []byte, dryRun bool) (*appsv1.Deployment, error) {
	opts := metav1.PatchOptions{FieldManager: manager}
	if force {
		opts.Force = &force
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.ApplyPatchType, body, opts)
}

// managers returns the managedFields entries by "manager operation
// subresource", and checks each has a time and a FieldsV1 set (but for
// scale entries: upstream's ScaleHandler.ToParent gives a new one the
// parent's time of that manager, none).
func managers(t *testing.T, m metav1.Object) map[string]metav1.ManagedFieldsEntry {
	t.Helper()
	out := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range m.GetManagedFields() {
		if e.Time == nil && e.Subresource != "scale" || e.FieldsV1 == nil || e.FieldsType != "FieldsV1" {
			t.Errorf("entry %+v lacks time or fields", e)
		}
		out[e.Manager+" "+string(e.Operation)+" "+e.Subresource] = e
	}
	return out
}

func TestServerSideApply(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	mkNamespace(t, cs, "ssa")

	// Apply creates the object (201) with the applier's fields.
	d, err := apply(ctx, cs, "ssa", "alice", false, applyDeploymentYAML("2"), false)
	if err != nil {
		t.Fatalf("apply create: %v", err)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].ImagePullPolicy == "" || d.UID == "" {
		t.Fatalf("applied deployment not created and defaulted: %+v", d.Spec)
	}
	e, ok := managers(t, d)["alice Apply "]
	if !ok || !strings.Contains(string(e.FieldsV1.Raw), `"f:replicas"`) || e.APIVersion != "apps/v1" {
		t.Fatalf("managedFields after apply create: %+v", d.ManagedFields)
	}

	// Another manager applying a different replicas conflicts.
	_, err = apply(ctx, cs, "ssa", "bob", false, applyDeploymentYAML("3"), false)
	wantStatus(t, "conflicting apply", err, 409)
	st := err.(apierrors.APIStatus).Status()
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict ||
		st.Details.Causes[0].Field != ".spec.replicas" || !strings.Contains(st.Details.Causes[0].Message, `"alice"`) {
		t.Fatalf("conflict status: %+v", st)
	}
	if !strings.Contains(st.Message, "Apply failed with 1 conflict") {
		t.Errorf("conflict message: %s", st.Message)
	}

	// Dry-run apply with force stores nothing.
	d, err = apply(ctx, cs, "ssa", "bob", true, applyDeploymentYAML("4"), true)
	if err != nil || *d.Spec.Replicas != 4 {
		t.Fatalf("dry-run forced apply: %v", err)
	}
	cur, err := cs.AppsV1().Deployments("ssa").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *cur.Spec.Replicas != 2 || len(cur.ManagedFields) != 1 {
		t.Fatalf("dry-run apply stored something: %v %+v", err, cur)
	}

	// Force takes the field over: alice keeps the rest, bob owns replicas.
	d, err = apply(ctx, cs, "ssa", "bob", true, applyDeploymentYAML("3"), false)
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("forced apply: %v", err)
	}
	ms := managers(t, d)
	if a, b := ms["alice Apply "], ms["bob Apply "]; strings.Contains(string(a.FieldsV1.Raw), "f:replicas") ||
		!strings.Contains(string(b.FieldsV1.Raw), "f:replicas") || !strings.Contains(string(a.FieldsV1.Raw), "f:template") {
		t.Fatalf("after force: alice %s, bob %s", a.FieldsV1.Raw, b.FieldsV1.Raw)
	}

	// An update records its manager (the user agent's first part without
	// fieldManager) as an Update.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	d, err = cs.AppsV1().Deployments("ssa").Update(ctx, d, metav1.UpdateOptions{FieldManager: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := managers(t, d)["carol Update "]; !ok || !strings.Contains(string(e.FieldsV1.Raw), "f:image") {
		t.Fatalf("managedFields after update: %+v", d.ManagedFields)
	}
	// Now alice's reapplying the old image conflicts with carol.
	_, err = apply(ctx, cs, "ssa", "alice", false, applyDeploymentYAML("3"), false)
	wantStatus(t, "apply over an updated field", err, 409)

	// The scale subresource owns spec.replicas for its manager.
	_, err = cs.AppsV1().Deployments("ssa").UpdateScale(ctx, "web", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}, metav1.UpdateOptions{FieldManager: "scaler"})
	if err != nil {
		t.Fatal(err)
	}
	d, _ = cs.AppsV1().Deployments("ssa").Get(ctx, "web", metav1.GetOptions{})
	ms = managers(t, d)
	if e, ok := ms["scaler Update scale"]; !ok || e.APIVersion != "apps/v1" || !strings.Contains(string(e.FieldsV1.Raw), "f:replicas") ||
		strings.Contains(string(ms["bob Apply "].FieldsV1.Raw), "f:replicas") || *d.Spec.Replicas != 5 {
		t.Fatalf("managedFields after scale: %+v", d.ManagedFields)
	}

	// A status write is recorded with its subresource.
	d.Status.ObservedGeneration = d.Generation
	d, err = cs.AppsV1().Deployments("ssa").UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := managers(t, d)["controller Update status"]; !ok || !strings.Contains(string(e.FieldsV1.Raw), "f:observedGeneration") {
		t.Fatalf("managedFields after status update (%+v): %+v", d.Status, d.ManagedFields)
	}

	// An apply to status owns only status: the spec and the labels it
	// sends are neither written nor owned (upstream's reset fields).
	statusCfg := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {x: z}\nspec:\n  replicas: 9\nstatus:\n  replicas: 1\n"
	d, err = cs.AppsV1().Deployments("ssa").Patch(ctx, "web", types.ApplyPatchType, []byte(statusCfg), metav1.PatchOptions{FieldManager: "st"}, "status")
	if err != nil {
		t.Fatalf("apply to status: %v", err)
	}
	if e, ok := managers(t, d)["st Apply status"]; !ok || d.Status.Replicas != 1 || *d.Spec.Replicas != 5 || d.Labels["x"] != "" ||
		string(e.FieldsV1.Raw) != `{"f:status":{"f:replicas":{}}}` {
		t.Fatalf("after an apply to status: replicas %d, labels %v, managedFields %+v", *d.Spec.Replicas, d.Labels, d.ManagedFields)
	}

	// Apply needs a field manager; force is for apply only.
	force := true
	_, err = apply(ctx, cs, "ssa", "", false, applyDeploymentYAML("3"), false)
	wantStatus(t, "apply without fieldManager", err, 422)
	_, err = cs.AppsV1().Deployments("ssa").Patch(ctx, "web", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{Force: &force})
	wantStatus(t, "merge patch with force", err, 422)

	// fieldValidation: a duplicate field fails a Strict apply.
	dup := []byte(strings.Replace(string(applyDeploymentYAML("3")), "  replicas: 3\n", "  replicas: 3\n  replicas: 3\n", 1))
	_, err = cs.AppsV1().Deployments("ssa").Patch(ctx, "web", types.ApplyPatchType, dup,
		metav1.PatchOptions{FieldManager: "bob", FieldValidation: "Strict", Force: &force})
	wantStatus(t, "strict apply with a duplicate field", err, 400)
	if !strings.Contains(err.Error(), `key "replicas" already set in map`) {
		t.Errorf("strict apply error: %v", err)
	}

	// A field the schema does not declare fails the merge as upstream's does.
	_, err = apply(ctx, cs, "ssa", "bob", true, []byte(strings.Replace(string(applyDeploymentYAML("3")), "  replicas: 3\n", "  replicas: 3\n  replicaz: 3\n", 1)), false)
	wantStatus(t, "apply of an unknown field", err, 500)
	if !strings.Contains(err.Error(), ".spec.replicaz: field not declared in schema") || strings.Contains(err.Error(), "Internal error occurred") {
		t.Errorf("apply of an unknown field: %v", err)
	}

	// Dry-run apply of a missing object creates nothing.
	_, err = cs.AppsV1().Deployments("ssa").Patch(ctx, "other", types.ApplyPatchType,
		[]byte(strings.Replace(string(applyDeploymentYAML("1")), "name: web", "name: other", 1)),
		metav1.PatchOptions{FieldManager: "alice", DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry-run apply create: %v", err)
	}
	_, err = cs.AppsV1().Deployments("ssa").Get(ctx, "other", metav1.GetOptions{})
	wantStatus(t, "get after dry-run apply create", err, 404)
}

func TestManagedFieldsOnWrites(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)

	// Create without fieldManager: the user agent's first part.
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate ||
		cm.ManagedFields[0].Manager != "apiserver.test" || !strings.Contains(string(cm.ManagedFields[0].FieldsV1.Raw), `"f:k"`) {
		t.Fatalf("managedFields after create: %+v", cm.ManagedFields)
	}
	// A no-op update changes nothing (not even the entry's time).
	before := cm.ResourceVersion
	cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil || cm.ResourceVersion != before {
		t.Fatalf("no-op update wrote: %v %s -> %s", err, before, cm.ResourceVersion)
	}
	// A strategic merge patch by another manager adds its entry.
	cm, err = cs.CoreV1().ConfigMaps("default").Patch(ctx, "c", types.StrategicMergePatchType, []byte(`{"data":{"k2":"v2"}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := managers(t, cm)["patcher Update "]; !ok || !strings.Contains(string(e.FieldsV1.Raw), `"f:k2"`) || strings.Contains(string(e.FieldsV1.Raw), `"f:k"`+"}") {
		t.Fatalf("managedFields after patch: %+v", cm.ManagedFields)
	}
	// Invalid managedFields sent by a client are ignored: the live ones stay.
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", Operation: "Bogus"}}
	cm.Data["k3"] = "v3"
	cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{FieldManager: "u"})
	if err != nil {
		t.Fatal(err)
	}
	ms := managers(t, cm)
	if _, ok := ms["patcher Update "]; !ok || len(ms) != 3 {
		t.Fatalf("managedFields after an invalid set: %+v", cm.ManagedFields)
	}
	// A list of one empty entry strips them (upstream's reset).
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	cm.Data["k4"] = "v4"
	cm, err = cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{FieldManager: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 0 {
		t.Fatalf("managedFields after reset: %+v", cm.ManagedFields)
	}
	// An apply in CBOR creates as one in YAML does.
	body, err := cbor.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "e"}, "data": map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	cm, err = cs.CoreV1().ConfigMaps("default").Patch(ctx, "e", types.ApplyCBORPatchType, body, metav1.PatchOptions{FieldManager: "cbor"})
	if err != nil || cm.Data["k"] != "v" || len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("CBOR apply: %v %+v", err, cm)
	}

	// Dry-run create stores nothing but answers with managed fields.
	cm2, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Data: map[string]string{"k": "v"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "dry"})
	if err != nil || len(cm2.ManagedFields) != 1 || cm2.ManagedFields[0].Manager != "dry" {
		t.Fatalf("dry-run create: %v %+v", err, cm2)
	}
}

// A resource served in two versions keeps the managed fields recorded in
// either: an update through autoscaling/v1 compares with the entry an
// autoscaling/v2 create made instead of dropping it; so for Events
// written through events.k8s.io/v1 and core/v1.
func TestManagedFieldsAcrossVersions(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, newHPAv2("h"), metav1.CreateOptions{FieldManager: "v2-creator"}); err != nil {
		t.Fatal(err)
	}
	h, err := cs.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "h", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Spec.MaxReplicas = 7
	h, err = cs.AutoscalingV1().HorizontalPodAutoscalers("default").Update(ctx, h, metav1.UpdateOptions{FieldManager: "v1-updater"})
	if err != nil {
		t.Fatal(err)
	}
	ms := managers(t, h)
	created, updated := ms["v2-creator Update "], ms["v1-updater Update "]
	if created.APIVersion != "autoscaling/v2" || updated.APIVersion != "autoscaling/v1" ||
		!strings.Contains(string(updated.FieldsV1.Raw), "f:maxReplicas") || strings.Contains(string(created.FieldsV1.Raw), "f:maxReplicas") ||
		!strings.Contains(string(created.FieldsV1.Raw), "f:scaleTargetRef") {
		t.Fatalf("managedFields across versions: %+v", h.ManagedFields)
	}

	now := metav1.NowMicro()
	if _, err := cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e"}, EventTime: now, ReportingController: "example.com/ctl", ReportingInstance: "ctl-1",
		Action: "Scale", Reason: "Scaled", Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "web"},
		Note: "scaled", Type: corev1.EventTypeNormal}, metav1.CreateOptions{FieldManager: "recorder"}); err != nil {
		t.Fatal(err)
	}
	ev, err := cs.CoreV1().Events("default").Get(ctx, "e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev.Message = "scaled again"
	if ev, err = cs.CoreV1().Events("default").Update(ctx, ev, metav1.UpdateOptions{FieldManager: "core"}); err != nil {
		t.Fatal(err)
	}
	ms = managers(t, ev)
	if r, c := ms["recorder Update "], ms["core Update "]; r.APIVersion != "events.k8s.io/v1" || c.APIVersion != "v1" ||
		!strings.Contains(string(c.FieldsV1.Raw), "f:message") || strings.Contains(string(r.FieldsV1.Raw), "f:note") {
		t.Fatalf("Event managedFields across groups: %+v", ev.ManagedFields)
	}
}
