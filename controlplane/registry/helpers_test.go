package registry

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// resourceByName finds a resource of All() or fails the test.
func resourceByName(t testing.TB, name string) *Resource {
	t.Helper()
	for _, r := range All() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no resource %q", name)
	return nil
}

// resourceByVersion finds the resource of All served at gv ("v1",
// "apps/v1") under name.
func resourceByVersion(t testing.TB, gv, name string) *Resource {
	t.Helper()
	for _, r := range All() {
		if r.Name == name && r.GroupVersion.String() == gv {
			return r
		}
	}
	t.Fatalf("no resource %s %q", gv, name)
	return nil
}

// defaultWith runs the Default hook (upstream's defaulters, then the
// registry's own) of the resource in All(opts) that serves obj's type.
func defaultWith(t testing.TB, obj runtime.Object) {
	t.Helper()
	for _, r := range All() {
		if reflect.TypeOf(r.New()) == reflect.TypeOf(obj) {
			r.Default(obj)
			return
		}
	}
	t.Fatalf("no resource for %T", obj)
}

// createErrors runs the create hooks in the handlers' order and returns the
// validation errors.
func createErrors(r *Resource, obj runtime.Object) field.ErrorList {
	if r.Default != nil {
		r.Default(obj)
	}
	if r.PrepareForCreate != nil {
		r.PrepareForCreate(obj)
	}
	return r.Validate(obj)
}

// errorKeys renders errors as sorted "Type field" strings for comparison.
func errorKeys(errs field.ErrorList) []string {
	keys := make([]string, 0, len(errs))
	for _, e := range errs {
		keys = append(keys, string(e.Type)+" "+e.Field)
	}
	sort.Strings(keys)
	return keys
}

func assertErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errorKeys(errs)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got  %q\n want %q\n(%v)", got, want, errs.ToAggregate())
	}
}

func newPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func ctr(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}
