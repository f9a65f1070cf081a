package fieldpath

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u1",
			Labels: map[string]string{"b": "2", "a": `say "hi"`}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}},
			{Name: "side", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("128Mi"), "hugepages-2Mi": resource.MustParse("4Mi")}}},
		}},
	}
}

func TestPodField(t *testing.T) {
	pod := testPod()
	for path, want := range map[string]string{
		"metadata.name": "web", "metadata.namespace": "prod", "metadata.uid": "u1", "spec.nodeName": "n1",
		"metadata.labels": "a=\"say \\\"hi\\\"\"\nb=\"2\"", "metadata.labels['b']": "2",
		"status.podIP": "10.0.0.1", "status.podIPs": "10.0.0.1,fd00::1", "status.hostIP": "192.0.2.1",
	} {
		got, err := PodField(pod, path, []string{"10.0.0.1", "fd00::1"}, []string{"192.0.2.1"})
		if err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, p := range []string{"metadata.labels[app]", "metadata.labels['app'", "metadata.annotations['x\"]", "spec.nope"} {
		if _, err := PodField(pod, p, nil, nil); err == nil {
			t.Errorf("%s: want error", p)
		}
	}
}

func TestContainerResource(t *testing.T) {
	pod := testPod()
	app := &pod.Spec.Containers[0]
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	for _, tc := range []struct {
		ref  corev1.ResourceFieldSelector
		want string
	}{
		{corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}, "250"},
		{corev1.ResourceFieldSelector{Resource: "requests.cpu"}, "1"}, // rounded up
		{corev1.ResourceFieldSelector{Resource: "limits.cpu"}, "2"},   // unset: allocatable
		{corev1.ResourceFieldSelector{ContainerName: "side", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, "128"},
		{corev1.ResourceFieldSelector{ContainerName: "side", Resource: "limits.hugepages-2Mi", Divisor: resource.MustParse("1Mi")}, "4"},
	} {
		got, err := ContainerResource(pod, app, &tc.ref, alloc)
		if err != nil || got != tc.want {
			t.Errorf("%+v = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	for _, ref := range []*corev1.ResourceFieldSelector{
		{ContainerName: "nope", Resource: "limits.cpu"},
		{Resource: "limits.gpu"},
		{Resource: "cpu"},
	} {
		if _, err := ContainerResource(pod, app, ref, nil); err == nil {
			t.Errorf("%+v: want error", ref)
		}
	}
}
