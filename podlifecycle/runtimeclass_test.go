package podlifecycle

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// The sandbox is created with the handler of the pod's RuntimeClass; a
// class that cannot be resolved creates nothing (not even the network)
// and leaves the pod in ContainerCreating with kubelet's event.
func TestSandboxRuntimeHandler(t *testing.T) {
	f := newFakeSyncer(t)
	f.s.cfg.RuntimeHandler = func(_ context.Context, pod *corev1.Pod) (string, error) {
		switch name := ptr.Deref(pod.Spec.RuntimeClassName, ""); name {
		case "":
			return "", nil
		case "alt":
			return "runc-alt", nil
		default:
			return "", apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
		}
	}
	pod := busyboxPod()
	pod.Spec.InitContainers = nil
	pod.Spec.RuntimeClassName = ptr.To("alt")
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if want := []string{"runc-alt"}; !reflect.DeepEqual(f.rt.handlers, want) {
		t.Errorf("sandbox handlers %v, want %v", f.rt.handlers, want)
	}

	f = newFakeSyncer(t)
	f.s.cfg.RuntimeHandler = func(context.Context, *corev1.Pod) (string, error) {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), "gone")
	}
	_, err := f.s.SyncPod(context.Background(), pod)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("sync with a missing class: %v, want NotFound", err)
	}
	if len(f.rt.handlers) != 0 || len(f.net.setups) != 0 {
		t.Errorf("sandboxes %v, network setups %v: want none", f.rt.handlers, f.net.setups)
	}
	found := false
	for _, e := range f.events.events {
		found = found || strings.HasPrefix(e, "Warning FailedCreatePodSandBox Failed to create pod sandbox: ") && strings.Contains(e, `"gone" not found`)
	}
	if !found {
		t.Errorf("events %q lack FailedCreatePodSandBox naming the class", f.events.events)
	}
	st := f.status.last()
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("container status %+v, want waiting ContainerCreating", st.ContainerStatuses)
	}
}
