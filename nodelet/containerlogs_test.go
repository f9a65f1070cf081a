package nodelet

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/pleg"
	"github.com/nodelet/nodelet/runtime"
)

type refEvents []string

func (r *refEvents) Eventf(obj apiruntime.Object, eventtype, reason, format string, args ...any) {
	ref := obj.(*corev1.ObjectReference)
	*r = append(*r, fmt.Sprintf("%s/%s %s %s %s: %s", ref.Namespace, ref.Name, ref.FieldPath, eventtype, reason, fmt.Sprintf(format, args...)))
}

// A container whose log drops output is found in the PLEG's cache, and
// its pod gets a Warning event naming the container.
func TestLogDroppedEvent(t *testing.T) {
	cache := pleg.NewCache()
	cache.Set("uid-1", &runtime.PodStatus{UID: "uid-1", Name: "web", Namespace: "default",
		Containers: []runtime.ContainerStatus{{ID: "c-old", Name: "app"}, {ID: "c-side", Name: "side"}}}, time.Now())
	uid, name := containerOf(cache, "c-side")
	if uid != "uid-1" || name != "side" {
		t.Fatalf("containerOf = %q, %q", uid, name)
	}
	if uid, name := containerOf(cache, "gone"); uid != "" || name != "" {
		t.Errorf("containerOf(gone) = %q, %q", uid, name)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}}}
	var events refEvents
	logDroppedEvent(&events, pod, name, containerlogs.Drops{Bytes: 300, Lines: 3, Episodes: 1, Err: "no space left on device"})
	want := "default/web spec.containers{side} Warning ContainerLogDropped: " +
		"Container side's log dropped 300 bytes of output (3 lines) it could not write: no space left on device"
	if len(events) != 1 || events[0] != want {
		t.Errorf("events %q, want %q", events, want)
	}
}
