package runtime

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestEphemeralContainersPlan: an ephemeral container starts once in the
// running sandbox (even before initialization is done), is never
// restarted, and is not started in a new sandbox.
func TestEphemeralContainersPlan(t *testing.T) {
	pod := planPod(corev1.RestartPolicyAlways, 1)
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}, TargetContainerName: "a"},
		{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "done", Image: "busybox"}},
	}
	for _, tt := range []struct {
		name   string
		status *PodStatus
		want   []int
	}{
		{"new pod: a new sandbox starts none", status(nil), nil},
		{"init running: both start", status(sb(goodSandbox()), running("init0", "init:1")), []int{0, 1}},
		{"one exited: never again", status(sb(goodSandbox()), exited("init0", "init:1", 0), running("a", "img-a:1"), running("b", "img-b:1"),
			exited("done", "busybox", 0)), []int{0}},
	} {
		a := ComputePodActions(pod, PlanInputs{Status: tt.status, Now: t0})
		if !reflect.DeepEqual(a.EphemeralContainersToStart, tt.want) {
			t.Errorf("%s: ephemeral to start %v, want %v", tt.name, a.EphemeralContainersToStart, tt.want)
		}
		if len(tt.want) > 0 && !a.StartsAnything() {
			t.Errorf("%s: StartsAnything false", tt.name)
		}
	}
	if c := EphemeralContainer(pod, 0); c.Name != "debug" || c.Image != "busybox" {
		t.Errorf("EphemeralContainer: %+v", c)
	}
}
