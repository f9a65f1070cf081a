package framework

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func container(cpu, mem string) corev1.Container {
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl}}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("200m", "100Mi")
	sidecar.RestartPolicy = &always
	mi := int64(1024 * 1024)
	for _, tc := range []struct {
		name    string
		spec    corev1.PodSpec
		want    Resource
		nonZero Resource
	}{
		{"containers summed", corev1.PodSpec{Containers: []corev1.Container{container("100m", "64Mi"), container("200m", "64Mi")}},
			Resource{MilliCPU: 300, Memory: 128 * mi}, Resource{MilliCPU: 300, Memory: 128 * mi}},
		{"init container peak wins", corev1.PodSpec{InitContainers: []corev1.Container{container("1", "10Mi")}, Containers: []corev1.Container{container("100m", "64Mi")}},
			Resource{MilliCPU: 1000, Memory: 64 * mi}, Resource{MilliCPU: 1000, Memory: 64 * mi}},
		{"sidecar adds and runs beside later init", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container("1", "")},
			Containers:     []corev1.Container{container("100m", "64Mi")}},
			Resource{MilliCPU: 1200, Memory: 164 * mi}, Resource{MilliCPU: 1200, Memory: 300 * mi}},
		{"overhead added", corev1.PodSpec{Containers: []corev1.Container{container("100m", "")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
			Resource{MilliCPU: 150}, Resource{MilliCPU: 150, Memory: DefaultMemoryRequest}},
		{"best effort", corev1.PodSpec{Containers: []corev1.Container{container("", "")}},
			Resource{}, Resource{MilliCPU: DefaultMilliCPURequest, Memory: DefaultMemoryRequest}},
	} {
		if got := PodRequests(&tc.spec, false); got != tc.want {
			t.Errorf("%s: requests %+v, want %+v", tc.name, got, tc.want)
		}
		if got := PodRequests(&tc.spec, true); got != tc.nonZero {
			t.Errorf("%s: non-zero %+v, want %+v", tc.name, got, tc.nonZero)
		}
	}
}

func TestNodeInfoAddRemoveClone(t *testing.T) {
	n := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
	n.Name = "n"
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{container("100m", "")}}}
	p.Name, p.Namespace = "p", "ns"
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 80}}
	info := NewNodeInfo(n, NewPodInfo(p))
	clone := info.Clone()
	if !clone.RemovePod("ns/p") {
		t.Fatal("RemovePod: not found")
	}
	if clone.Requested != (Resource{}) || len(clone.UsedPorts) != 0 || len(clone.Pods) != 0 {
		t.Errorf("after remove: %+v", clone)
	}
	if info.Requested.MilliCPU != 100 || len(info.UsedPorts) != 1 || len(info.Pods) != 1 {
		t.Errorf("clone changed the original: %+v", info)
	}
	if clone.RemovePod("ns/p") {
		t.Error("second RemovePod found the pod")
	}
}
