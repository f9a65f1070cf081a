package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// workloadCase describes one workload kind for the shared checks of
// runWorkloadCases: upstream's validation and defaults through the hooks,
// and the strategy's spec/status split.
type workloadCase struct {
	resource string
	// valid returns a fresh object that passes create validation.
	valid func() runtime.Object
	// breakIt makes a valid object invalid; want are upstream's errors.
	breakIt func(runtime.Object)
	want    []string
	// defaulted reports what is missing after the Default hook ("" if none).
	defaulted func(runtime.Object) string
	// For kinds with a status subresource: setStatus gives the object a
	// non-empty status, hasStatus reports one, changeSpec alters the spec.
	setStatus  func(runtime.Object)
	hasStatus  func(runtime.Object) bool
	changeSpec func(runtime.Object)
}

func runWorkloadCases(t *testing.T, cases []workloadCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			r := resourceByName(t, tc.resource)
			if errs := createErrors(r, tc.valid()); len(errs) > 0 {
				t.Errorf("valid object: %v", errs.ToAggregate())
			}
			bad := tc.valid()
			tc.breakIt(bad)
			assertErrors(t, createErrors(r, bad), tc.want)

			obj := tc.valid()
			r.Default(obj)
			if missing := tc.defaulted(obj); missing != "" {
				t.Errorf("not defaulted: %s", missing)
			}
			if tc.setStatus != nil {
				checkStatusSplit(t, r, tc)
			}
		})
	}
}

// checkStatusSplit checks upstream's strategy semantics: status reset on
// create, kept on an update of the main resource, the spec kept on a
// status update, and a spec change counted as one (generation bump).
func checkStatusSplit(t *testing.T, r *Resource, tc workloadCase) {
	t.Helper()
	obj := tc.valid()
	tc.setStatus(obj)
	r.Default(obj)
	r.PrepareForCreate(obj)
	if tc.hasStatus(obj) {
		t.Errorf("create kept the status")
	}

	stored := func() runtime.Object {
		o := tc.valid()
		r.Default(o)
		r.PrepareForCreate(o)
		o.(metav1.Object).SetResourceVersion("7")
		return o
	}
	old := stored()
	tc.setStatus(old)
	upd := stored()
	tc.changeSpec(upd)
	r.PrepareForUpdate(upd, old)
	if !tc.hasStatus(upd) {
		t.Errorf("update of the main resource dropped the status")
	}
	if !r.SpecChanged(upd, old) {
		t.Errorf("spec change not seen: generation would not be bumped")
	}
	if same := old.DeepCopyObject(); r.SpecChanged(same, old) {
		t.Errorf("unchanged spec counted as a change")
	}
	if errs := r.ValidateUpdate(upd, old); len(errs) > 0 {
		t.Errorf("update: %v", errs.ToAggregate())
	}

	st := old.DeepCopyObject()
	tc.changeSpec(st)
	r.PrepareForStatusUpdate(st, old)
	if !equality.Semantic.DeepEqual(st, old) {
		t.Errorf("status update changed more than status")
	}
	if errs := r.ValidateStatusUpdate(st, old); len(errs) > 0 {
		t.Errorf("status update: %v", errs.ToAggregate())
	}
}
