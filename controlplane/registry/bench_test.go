package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkPodCreateHooks measures what the registry adds to each pod
// create: Default, PrepareForCreate and Validate of a typical two-container
// pod with ports, env, resources, a probe and volumes.
func BenchmarkPodCreateHooks(b *testing.B) {
	r := resourceByName(b, "pods")
	template := newPod(ctr("app", "nginx:1.27"), ctr("sidecar", "busybox:1.36"))
	c := &template.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	c.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	b.ReportAllocs()
	for b.Loop() {
		pod := template.DeepCopy()
		if errs := createErrors(r, pod); len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
	}
}
