package registry

import (
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The adapters below turn typed per-resource functions into the untyped
// hooks of Resource. The handlers promise to pass objects of the resource's
// own type (the one New returns); anything else is a programming error and
// panics.

func mutate[T runtime.Object](f func(T)) func(runtime.Object) {
	return func(obj runtime.Object) { f(obj.(T)) }
}

func mutate2[T runtime.Object](f func(obj, old T)) func(obj, old runtime.Object) {
	return func(obj, old runtime.Object) { f(obj.(T), old.(T)) }
}

func changed[T runtime.Object](f func(obj, old T) bool) func(obj, old runtime.Object) bool {
	return func(obj, old runtime.Object) bool { return f(obj.(T), old.(T)) }
}

func selectable[T runtime.Object](f func(T) fields.Set) func(runtime.Object) fields.Set {
	return func(obj runtime.Object) fields.Set { return f(obj.(T)) }
}

func row[T runtime.Object](f func(T, time.Time) []interface{}) func(runtime.Object, time.Time) []interface{} {
	return func(obj runtime.Object, now time.Time) []interface{} { return f(obj.(T), now) }
}

// allVerbs is what discovery lists for an ordinary stored resource.
func allVerbs() []string {
	return []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// verbsWithoutDeleteCollection is for namespaces and services, which upstream
// does not let clients delete as a collection.
func verbsWithoutDeleteCollection() []string {
	return []string{"create", "delete", "get", "list", "patch", "update", "watch"}
}

// keepMetaForStatus makes a status update leave metadata alone: dst becomes a
// copy of old except for the resourceVersion, which the client sends for
// optimistic concurrency, and the managed fields, which the API server's
// field manager keeps.
func keepMetaForStatus(dst, old *metav1.ObjectMeta) {
	rv, managed := dst.ResourceVersion, dst.ManagedFields
	*dst = *old.DeepCopy()
	dst.ResourceVersion, dst.ManagedFields = rv, managed
}

func nonNegative(value int64, path *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(value, path)
}

// age renders how long ago ts was, like kubectl's AGE column.
func age(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

func microAge(ts metav1.MicroTime, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}
