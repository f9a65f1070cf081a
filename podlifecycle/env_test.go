package podlifecycle

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/runtime"
)

// TestEnvLimitsDefaultToAllocatable: the downward API's limits.cpu and
// limits.memory of a container without limits are the node's allocatable
// (upstream's conformance "should provide default limits.cpu/memory from
// node allocatable").
func TestEnvLimitsDefaultToAllocatable(t *testing.T) {
	f := newFakeSyncer(t)
	f.s.cfg.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	pod := busyboxPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
	}
	envCtx, err := f.s.envContext(context.Background(), &podContext{pod: pod}, c)
	if err != nil {
		t.Fatal(err)
	}
	env, err := runtime.ContainerEnv(pod, c, envCtx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CPU_LIMIT=2", "MEMORY_LIMIT=4294967296"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %s", env, want)
		}
	}
}
