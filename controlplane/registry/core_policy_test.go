package registry

import (
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func newQuota() *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods:        resource.MustParse("10"),
			corev1.ResourceRequestsCPU: resource.MustParse("1"),
		}},
	}
}

func newLimitRange() *corev1.LimitRange {
	return &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "default"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1"),
				corev1.ResourceMemory: resource.MustParse("1Gi"),
			},
			Min: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}},
	}
}

// TestCoreDiscoveryOrder: upstream lists core/v1 resources by name.
func TestCoreDiscoveryOrder(t *testing.T) {
	var names []string
	for _, r := range All() {
		if r.GroupVersion == corev1.SchemeGroupVersion {
			names = append(names, r.Name)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("core/v1 resources not in upstream's order: %v", names)
	}
}

func TestValidateResourceQuota(t *testing.T) {
	r := resourceByName(t, "resourcequotas")
	tests := []struct {
		name   string
		mutate func(*corev1.ResourceQuota)
		want   []string
	}{
		{"valid", func(*corev1.ResourceQuota) {}, nil},
		{"negative", func(q *corev1.ResourceQuota) { q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("-1") },
			[]string{"FieldValueInvalid spec.hard[pods]"}},
		{"not an integer", func(q *corev1.ResourceQuota) { q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("1500m") },
			[]string{"FieldValueInvalid spec.hard[pods]"}},
		{"unknown resource", func(q *corev1.ResourceQuota) { q.Spec.Hard["widgets"] = resource.MustParse("1") },
			// Upstream reports both: not qualified, and not a quota resource.
			[]string{"FieldValueInvalid spec.hard[widgets]", "FieldValueInvalid spec.hard[widgets]"}},
		{"scope for compute", func(q *corev1.ResourceQuota) {
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		}, []string{"FieldValueInvalid spec.scopes"}},
		{"bad name", func(q *corev1.ResourceQuota) { q.Name = "Compute" }, []string{"FieldValueInvalid metadata.name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQuota()
			tt.mutate(q)
			assertErrors(t, createErrors(r, q), tt.want)
		})
	}

	old := newQuota()
	r.Default(old)
	old.ResourceVersion = "3"
	upd := old.DeepCopy()
	upd.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
	assertErrors(t, r.ValidateUpdate(upd, old), []string{"FieldValueInvalid spec.scopes"})

	st := old.DeepCopy()
	st.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("-2")}
	assertErrors(t, r.ValidateStatusUpdate(st, old), []string{"FieldValueInvalid status.used[pods]"})
}

// TestQuotaStatusSplit: upstream resets the status on create, keeps it on
// updates of the quota and keeps the spec on status updates.
func TestQuotaStatusSplit(t *testing.T) {
	r := resourceByName(t, "resourcequotas")
	if r.TrackGeneration {
		t.Errorf("quotas track their generation; upstream's do not")
	}
	status := corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")},
		Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")},
	}
	q := newQuota()
	q.Status = *status.DeepCopy()
	r.PrepareForCreate(q)
	if q.Status.Hard != nil || q.Status.Used != nil {
		t.Errorf("create kept the status: %+v", q.Status)
	}

	old := newQuota()
	r.Default(old)
	old.ResourceVersion = "7"
	old.Status = *status.DeepCopy()
	upd := old.DeepCopy()
	upd.Status = corev1.ResourceQuotaStatus{}
	upd.Spec.Hard[corev1.ResourcePods] = resource.MustParse("20")
	r.PrepareForUpdate(upd, old)
	if !reflect.DeepEqual(upd.Status, old.Status) {
		t.Errorf("update changed the status: %+v", upd.Status)
	}
	if errs := r.ValidateUpdate(upd, old); len(errs) > 0 {
		t.Errorf("update: %v", errs.ToAggregate())
	}

	st := old.DeepCopy()
	st.Spec.Hard = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	st.Labels = map[string]string{"a": "b"}
	st.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3"), corev1.ResourceRequestsCPU: resource.MustParse("0.5m")}
	r.PrepareForStatusUpdate(st, old)
	if !reflect.DeepEqual(st.Spec, old.Spec) || st.Labels != nil {
		t.Errorf("status update changed the spec or labels: %+v %v", st.Spec, st.Labels)
	}
	used := st.Status.Used[corev1.ResourceRequestsCPU]
	if pods := st.Status.Used[corev1.ResourcePods]; pods.String() != "3" || used.String() != "1m" {
		t.Errorf("status used = %v, want pods 3 and requests.cpu rounded up to 1m", st.Status.Used)
	}
	if errs := r.ValidateStatusUpdate(st, old); len(errs) > 0 {
		t.Errorf("status update: %v", errs.ToAggregate())
	}
}

func TestValidateLimitRange(t *testing.T) {
	r := resourceByName(t, "limitranges")
	tests := []struct {
		name   string
		mutate func(*corev1.LimitRange)
		want   []string
	}{
		{"valid", func(*corev1.LimitRange) {}, nil},
		{"min above max", func(lr *corev1.LimitRange) { lr.Spec.Limits[0].Min[corev1.ResourceCPU] = resource.MustParse("2") },
			// The defaulted default and defaultRequest (max) are below min too.
			[]string{"FieldValueInvalid spec.limits[0].min[cpu]", "FieldValueInvalid spec.limits[0].default[cpu]",
				"FieldValueInvalid spec.limits[0].defaultRequest[cpu]"}},
		{"pod defaults", func(lr *corev1.LimitRange) {
			lr.Spec.Limits[0].Type = corev1.LimitTypePod
			lr.Spec.Limits[0].Default = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, []string{"FieldValueForbidden spec.limits[0].default"}},
		{"duplicate type", func(lr *corev1.LimitRange) {
			lr.Spec.Limits = append(lr.Spec.Limits, corev1.LimitRangeItem{Type: corev1.LimitTypeContainer})
		}, []string{"FieldValueDuplicate spec.limits[1].type"}},
		{"claim without storage", func(lr *corev1.LimitRange) {
			lr.Spec.Limits = []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim}}
		}, []string{"FieldValueRequired spec.limits[0].limits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := newLimitRange()
			tt.mutate(lr)
			assertErrors(t, createErrors(r, lr), tt.want)
		})
	}

	old := newLimitRange()
	r.Default(old)
	old.ResourceVersion = "2"
	upd := old.DeepCopy()
	upd.Spec.Limits[0].MaxLimitRequestRatio = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")}
	assertErrors(t, r.ValidateUpdate(upd, old), []string{"FieldValueInvalid spec.limits[0].maxLimitRequestRatio[cpu]"})
}

// TestLimitRangeDefaults: upstream's defaulter copies a container item's
// max into its default and the default into defaultRequest; a Pod item
// gets neither (it may not have them).
func TestLimitRangeDefaults(t *testing.T) {
	r := resourceByName(t, "limitranges")
	lr := newLimitRange()
	lr.Spec.Limits = append(lr.Spec.Limits, corev1.LimitRangeItem{Type: corev1.LimitTypePod,
		Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}})
	r.Default(lr)
	ctr := lr.Spec.Limits[0]
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if !equalLists(ctr.Default, want) || !equalLists(ctr.DefaultRequest, want) {
		t.Errorf("container item: default %v, defaultRequest %v; want max %v in both", ctr.Default, ctr.DefaultRequest, want)
	}
	if pod := lr.Spec.Limits[1]; pod.Default != nil || pod.DefaultRequest != nil {
		t.Errorf("pod item defaulted: %+v", pod)
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// TestLimitRangeName: upstream names a LimitRange created without a name.
func TestLimitRangeName(t *testing.T) {
	r := resourceByName(t, "limitranges")
	lr := newLimitRange()
	lr.Name = ""
	if errs := createErrors(r, lr); len(errs) > 0 {
		t.Errorf("unnamed: %v", errs.ToAggregate())
	}
	if msgs := validation.IsDNS1123Subdomain(lr.Name); lr.Name == "" || len(msgs) > 0 {
		t.Errorf("generated name %q: %v", lr.Name, msgs)
	}
	named := newLimitRange()
	r.PrepareForCreate(named)
	if named.Name != "limits" {
		t.Errorf("name %q replaced", named.Name)
	}
}

func TestResourceQuotaRow(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	q := newQuota()
	q.CreationTimestamp = metav1.NewTime(now.Add(-3 * time.Hour))
	want := []interface{}{"compute", "", "", "3h"}
	if got := resourceQuotaRow(q, now); !reflect.DeepEqual(got, want) {
		t.Errorf("row without status = %q\nwant %q", got, want)
	}
	q.Status.Hard = corev1.ResourceList{
		corev1.ResourceServices: resource.MustParse("5"), corev1.ResourcePods: resource.MustParse("10"),
		corev1.ResourceLimitsMemory: resource.MustParse("2Gi"), corev1.ResourceRequestsCPU: resource.MustParse("1"),
		corev1.ResourceLimitsCPU: resource.MustParse("2"), "count/deployments.apps": resource.MustParse("3"),
	}
	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1"), corev1.ResourceRequestsCPU: resource.MustParse("500m"),
		corev1.ResourceLimitsMemory: resource.MustParse("512Mi"), corev1.ResourceSecrets: resource.MustParse("4")}
	want = []interface{}{"compute", "count/deployments.apps: 0/3, pods: 1/10, requests.cpu: 500m/1, services: 0/5",
		"limits.cpu: 0/2, limits.memory: 512Mi/2Gi", "3h"}
	if got := resourceQuotaRow(q, now); !reflect.DeepEqual(got, want) {
		t.Errorf("row = %q\nwant %q", got, want)
	}
	cols := resourceByName(t, "resourcequotas").Columns
	if names := []string{cols[0].Name, cols[1].Name, cols[2].Name, cols[3].Name}; !reflect.DeepEqual(names, []string{"Name", "Request", "Limit", "Age"}) {
		t.Errorf("columns %v", names)
	}
}

func TestLimitRangeRow(t *testing.T) {
	r := resourceByName(t, "limitranges")
	lr := newLimitRange()
	lr.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 3, 13, 4, 5, 0, time.FixedZone("CET", 3600)))
	want := []interface{}{"limits", "2025-01-03T12:04:05Z"}
	if got := r.Row(lr, time.Now()); !reflect.DeepEqual(got, want) {
		t.Errorf("row = %q, want %q", got, want)
	}
	if len(r.Columns) != 2 || r.Columns[1].Name != "Created At" || r.Columns[1].Type != "date" {
		t.Errorf("columns %+v", r.Columns)
	}
}

// TestResourceQuotaWarnings: upstream warns when a quota's requests are
// above its limits, the bare cpu and memory counting as requests.
func TestResourceQuotaWarnings(t *testing.T) {
	r := resourceByName(t, "resourcequotas")
	q := newQuota()
	q.Spec.Hard[corev1.ResourceLimitsCPU] = resource.MustParse("500m")
	q.Spec.Hard[corev1.ResourceMemory] = resource.MustParse("2Gi")
	q.Spec.Hard[corev1.ResourceLimitsMemory] = resource.MustParse("1Gi")
	want := []string{
		"ResourceQuota requests.cpu (1) should be less than limits.cpu (500m)",
		"ResourceQuota memory (2Gi) should be less than limits.memory (1Gi)",
	}
	if got := r.WarningsOnCreate(q); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings = %q\nwant %q", got, want)
	}
	if got := r.WarningsOnCreate(newQuota()); len(got) > 0 {
		t.Errorf("warnings for a quota without limits: %q", got)
	}
}
