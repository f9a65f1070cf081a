package podresources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func resources(req, lim map[corev1.ResourceName]string) corev1.ResourceRequirements {
	conv := func(m map[corev1.ResourceName]string) corev1.ResourceList {
		if m == nil {
			return nil
		}
		l := corev1.ResourceList{}
		for k, v := range m {
			l[k] = resource.MustParse(v)
		}
		return l
	}
	return corev1.ResourceRequirements{Requests: conv(req), Limits: conv(lim)}
}

func TestQOSClass(t *testing.T) {
	cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
	full := map[corev1.ResourceName]string{cpu: "1", mem: "1Gi"}
	tests := []struct {
		name string
		res  []corev1.ResourceRequirements
		init []corev1.ResourceRequirements
		want corev1.PodQOSClass
	}{
		{"nothing", []corev1.ResourceRequirements{{}}, nil, corev1.PodQOSBestEffort},
		{"only other resources", []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{"ephemeral-storage": "1Gi"}, nil)}, nil, corev1.PodQOSBestEffort},
		{"zero requests", []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "0"}, nil)}, nil, corev1.PodQOSBestEffort},
		{"requests equal limits", []corev1.ResourceRequirements{resources(full, full)}, nil, corev1.PodQOSGuaranteed},
		{"limits only (requests defaulted)", []corev1.ResourceRequirements{resources(full, full), resources(full, full)}, nil, corev1.PodQOSGuaranteed},
		{"requests below limits", []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "500m", mem: "1Gi"}, full)}, nil, corev1.PodQOSBurstable},
		{"cpu limit only", []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "1"}, map[corev1.ResourceName]string{cpu: "1"})}, nil, corev1.PodQOSBurstable},
		{"one container without limits", []corev1.ResourceRequirements{resources(full, full), {}}, nil, corev1.PodQOSBurstable},
		{"init container without limits", []corev1.ResourceRequirements{resources(full, full)}, []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "1"}, nil)}, corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			for _, r := range tt.res {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Resources: r})
			}
			for _, r := range tt.init {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Resources: r})
			}
			if got := QOSClass(pod); got != tt.want {
				t.Errorf("QOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}
