package apiserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func testQuota(name string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:        resource.MustParse("10"),
			corev1.ResourceRequestsCPU: resource.MustParse("1"),
			corev1.ResourceLimitsCPU:   resource.MustParse("2"),
		}},
	}
}

// wantInvalid checks a 422 and its message, which is upstream's.
func wantInvalid(t *testing.T, what string, err error, msg string) {
	t.Helper()
	wantStatus(t, what, err, 422)
	if err.Error() != msg {
		t.Errorf("%s:\n got  %q\n want %q", what, err.Error(), msg)
	}
}

// ResourceQuotas as upstream serves them: the status is reset on create
// and kept on updates of the quota, the spec kept on status updates, both
// validated with upstream's messages.
func TestResourceQuotaStatusSplit(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	quotas := env.clientset(t).CoreV1().ResourceQuotas("default")

	q := testQuota("compute")
	q.Status.Hard = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("99")}
	created, err := quotas.Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Status.Hard != nil || created.Generation != 0 {
		t.Errorf("create kept the status %v or set generation %d", created.Status, created.Generation)
	}

	st := created.DeepCopy()
	st.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1")
	st.Labels = map[string]string{"by": "status"}
	st.Status.Hard = st.Spec.Hard.DeepCopy()
	st.Status.Hard[corev1.ResourcePods] = resource.MustParse("10")
	st.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3"), corev1.ResourceRequestsCPU: resource.MustParse("250m")}
	afterStatus, err := quotas.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if !reflect.DeepEqual(afterStatus.Spec, created.Spec) || afterStatus.Labels != nil {
		t.Errorf("status update changed the spec %v or labels %v", afterStatus.Spec, afterStatus.Labels)
	}
	if used := afterStatus.Status.Used[corev1.ResourcePods]; used.String() != "3" {
		t.Errorf("status used = %v", afterStatus.Status.Used)
	}

	upd := afterStatus.DeepCopy()
	upd.Spec.Hard[corev1.ResourcePods] = resource.MustParse("20")
	upd.Status = corev1.ResourceQuotaStatus{}
	updated, err := quotas.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if pods := updated.Spec.Hard[corev1.ResourcePods]; pods.String() != "20" ||
		!reflect.DeepEqual(updated.Status, afterStatus.Status) {
		t.Errorf("update: spec pods %s, status %v, want 20 and the status kept", pods.String(), updated.Status)
	}
	got, err := quotas.Get(ctx, "compute", metav1.GetOptions{})
	if err != nil || !reflect.DeepEqual(got.Status, afterStatus.Status) {
		t.Errorf("get: %v %v", got, err)
	}
	list, err := quotas.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "compute" {
		t.Fatalf("list: %v %v", list, err)
	}

	bad := testQuota("bad")
	bad.Spec.Hard[corev1.ResourcePods] = resource.MustParse("-1")
	_, err = quotas.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, "negative quota", err,
		`ResourceQuota "bad" is invalid: spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0`)

	scoped := updated.DeepCopy()
	scoped.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
	_, err = quotas.Update(ctx, scoped, metav1.UpdateOptions{})
	wantInvalid(t, "scope change", err,
		`ResourceQuota "compute" is invalid: spec.scopes: Invalid value: ["NotTerminating"]: field is immutable`)

	badStatus := updated.DeepCopy()
	badStatus.Status.Used[corev1.ResourcePods] = resource.MustParse("1500m")
	_, err = quotas.UpdateStatus(ctx, badStatus, metav1.UpdateOptions{})
	wantInvalid(t, "fractional pods used", err,
		`ResourceQuota "compute" is invalid: status.used[pods]: Invalid value: "1500m": must be an integer`)
}

// The quota table is upstream's printer's: status.hard as "used/hard",
// limits.* in their own column. Creating a quota whose requests exceed its
// limits warns as upstream does.
func TestResourceQuotaTableAndWarnings(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	seen := &warningsSeen{}
	cfg := rest.CopyConfig(env.config)
	cfg.WarningHandler = seen
	quotas := newClientset(t, cfg).CoreV1().ResourceQuotas("default")

	q := testQuota("compute")
	q.Spec.Hard[corev1.ResourceLimitsCPU] = resource.MustParse("500m")
	created, err := quotas.Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want := []string{"ResourceQuota requests.cpu (1) should be less than limits.cpu (500m)"}
	if got := seen.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	created.Status.Hard = created.Spec.Hard.DeepCopy()
	created.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
	if _, err := quotas.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}

	table := getTable(t, env, "/api/v1/namespaces/default/resourcequotas")
	if got := columnNames(table); !reflect.DeepEqual(got, []string{"Name", "Request", "Limit", "Age"}) {
		t.Errorf("columns %v", got)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[0] != "compute" || cells[1] != "pods: 2/10, requests.cpu: 0/1" || cells[2] != "limits.cpu: 0/500m" {
		t.Errorf("row %q", cells)
	}
}

func testLimitRange(name string) *corev1.LimitRange {
	return &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		}}},
	}
}

// LimitRanges are defaulted by upstream's defaulter (a container item's
// max becomes its default and defaultRequest), named when created without
// a name, validated with upstream's messages, and listed as upstream's
// default table (Name, Created At).
func TestLimitRanges(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	limits := env.clientset(t).CoreV1().LimitRanges("default")

	created, err := limits.Create(ctx, testLimitRange("limits"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	item := created.Spec.Limits[0]
	for _, list := range []corev1.ResourceList{item.Default, item.DefaultRequest} {
		cpu, mem := list[corev1.ResourceCPU], list[corev1.ResourceMemory]
		if len(list) != 2 || cpu.String() != "1" || mem.String() != "512Mi" {
			t.Errorf("default %v, defaultRequest %v; want max in both", item.Default, item.DefaultRequest)
		}
	}

	unnamed, err := limits.Create(ctx, testLimitRange(""), metav1.CreateOptions{})
	if err != nil || len(unnamed.Name) != 36 {
		t.Fatalf("create without a name: %v %v", unnamed, err)
	}
	if _, err := limits.Get(ctx, unnamed.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("get %s: %v", unnamed.Name, err)
	}

	bad := testLimitRange("bad")
	bad.Spec.Limits[0].Min = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	bad.Spec.Limits[0].Default = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	_, err = limits.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, "min above max", err, `LimitRange "bad" is invalid: [`+
		`spec.limits[0].min[memory]: Invalid value: "1Gi": min value 1Gi is greater than max value 512Mi, `+
		`spec.limits[0].defaultRequest[memory]: Invalid value: "1Gi": default request value 1Gi is greater than max value 512Mi, `+
		`spec.limits[0].default[memory]: Invalid value: "512Mi": default value 1Gi is greater than max value 512Mi]`)

	upd := created.DeepCopy()
	upd.Spec.Limits[0].Type = corev1.LimitTypePod
	_, err = limits.Update(ctx, upd, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("update to a Pod item with defaults: %v, want 422", err)
	}

	table := getTable(t, env, "/api/v1/namespaces/default/limitranges/limits")
	if got := columnNames(table); !reflect.DeepEqual(got, []string{"Name", "Created At"}) {
		t.Errorf("columns %v", got)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "limits" ||
		table.Rows[0].Cells[1] != created.CreationTimestamp.UTC().Format(time.RFC3339) {
		t.Errorf("rows %+v", table.Rows)
	}
}

// Discovery lists both kinds with upstream's short names, and the quota's
// status subresource.
func TestPolicyDiscovery(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	list, err := env.clientset(t).Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	for _, r := range list.APIResources {
		found[r.Name] = r.ShortNames
	}
	if !reflect.DeepEqual(found["limitranges"], []string{"limits"}) || !reflect.DeepEqual(found["resourcequotas"], []string{"quota"}) {
		t.Errorf("short names: limitranges %v, resourcequotas %v", found["limitranges"], found["resourcequotas"])
	}
	if _, ok := found["resourcequotas/status"]; !ok {
		t.Errorf("no resourcequotas/status in discovery")
	}
}

func getTable(t *testing.T, env *testEnv, path string) metav1.Table {
	t.Helper()
	code, _, body := rawDo(t, env, "GET", path, "", tableAccept, nil)
	if code != 200 {
		t.Fatalf("table %s: HTTP %d: %s", path, code, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	return table
}

func columnNames(table metav1.Table) []string {
	names := make([]string, 0, len(table.ColumnDefinitions))
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}
