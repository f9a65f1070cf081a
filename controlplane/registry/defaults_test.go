package registry

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestImagePullPolicyDefault(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"registry.local:5000/team/app", corev1.PullAlways},
		{"registry.local:5000/team/app:v1", corev1.PullIfNotPresent},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"Nginx", corev1.PullIfNotPresent}, // unparseable: upper case in the path
		{"", corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		pod := newPod(corev1.Container{Name: "app", Image: tt.image})
		defaultWith(t, pod)
		c := pod.Spec.Containers[0]
		if c.ImagePullPolicy != tt.want {
			t.Errorf("image %q: pull policy %q, want %q", tt.image, c.ImagePullPolicy, tt.want)
		}
	}
}

func TestPodDefaults(t *testing.T) {
	pod := newPod(corev1.Container{
		Name:  "app",
		Image: "nginx:1.27",
		Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
	})
	pod.Spec.InitContainers = []corev1.Container{ctr("init", "busybox")}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch"},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
	}
	defaultWith(t, pod)

	spec := pod.Spec
	if spec.RestartPolicy != corev1.RestartPolicyAlways || spec.DNSPolicy != corev1.DNSClusterFirst ||
		spec.SchedulerName != "default-scheduler" || *spec.TerminationGracePeriodSeconds != 30 ||
		spec.SecurityContext == nil || !*spec.EnableServiceLinks {
		t.Errorf("pod spec defaults wrong: %+v", spec)
	}
	// The account, priority and tolerations are admission's, not defaults.
	if spec.ServiceAccountName != "" || spec.Priority != nil || spec.PreemptionPolicy != nil || len(spec.Tolerations) != 0 {
		t.Errorf("admission's fields defaulted: account %q priority %v policy %v tolerations %v",
			spec.ServiceAccountName, spec.Priority, spec.PreemptionPolicy, spec.Tolerations)
	}
	c := spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullIfNotPresent || c.TerminationMessagePath != "/dev/termination-log" ||
		c.TerminationMessagePolicy != corev1.TerminationMessageReadFile || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("container defaults wrong: %+v", c)
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("cpu request = %s, want 500m from the limit", q.String())
	}
	want := corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80), Path: "/", Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	if !apiequality.Semantic.DeepEqual(*c.LivenessProbe, want) {
		t.Errorf("probe = %+v, want %+v", *c.LivenessProbe, want)
	}
	if spec.InitContainers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("init container pull policy = %q", spec.InitContainers[0].ImagePullPolicy)
	}
	if spec.Volumes[0].EmptyDir == nil || *spec.Volumes[1].ConfigMap.DefaultMode != 0644 ||
		*spec.Volumes[2].HostPath.Type != corev1.HostPathUnset {
		t.Errorf("volume defaults wrong: %+v", spec.Volumes)
	}
}

func TestDeploymentDefaults(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("app", "nginx")}},
	}}}
	defaultWith(t, d)
	s := d.Spec
	if *s.Replicas != 1 || s.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		s.Strategy.RollingUpdate.MaxSurge.String() != "25%" || s.Strategy.RollingUpdate.MaxUnavailable.String() != "25%" ||
		*s.RevisionHistoryLimit != 10 || *s.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment defaults wrong: %+v", s)
	}
	if s.Selector != nil || d.Labels != nil {
		t.Errorf("apps/v1 must not default selector or labels: %v %v", s.Selector, d.Labels)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyAlways || ps.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("template defaults wrong: %+v", ps)
	}
	if ps.EnableServiceLinks != nil || ps.ServiceAccountName != "" || len(ps.Tolerations) != 0 || ps.Priority != nil {
		t.Errorf("pod-only defaults leaked into the template: %+v", ps)
	}
	rec := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}}
	defaultWith(t, rec)
	if rec.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("Recreate got rollingUpdate %+v", rec.Spec.Strategy.RollingUpdate)
	}
}

func TestServiceDefaults(t *testing.T) {
	tests := []struct {
		name       string
		svc        corev1.ServiceSpec
		wantETP    corev1.ServiceExternalTrafficPolicy
		wantPolicy corev1.IPFamilyPolicy
	}{
		{"cluster ip", corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"a": "b"}}, "", corev1.IPFamilyPolicySingleStack},
		{"node port", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}, corev1.ServiceExternalTrafficPolicyCluster, corev1.IPFamilyPolicySingleStack},
		{"headless without selector", corev1.ServiceSpec{ClusterIP: "None"}, "", corev1.IPFamilyPolicyRequireDualStack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: tt.svc}
			defaultService(svc)
			s := svc.Spec
			if s.SessionAffinity != corev1.ServiceAffinityNone || s.ExternalTrafficPolicy != tt.wantETP ||
				*s.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster || *s.IPFamilyPolicy != tt.wantPolicy {
				t.Errorf("service defaults wrong: %+v", s)
			}
			if s.Type == "" {
				t.Errorf("type not defaulted")
			}
			for _, p := range s.Ports {
				if p.Protocol != corev1.ProtocolTCP || p.TargetPort != intstr.FromInt32(p.Port) {
					t.Errorf("port defaults wrong: %+v", p)
				}
			}
		})
	}
}

func TestNamespaceAndSecretDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	r := resourceByName(t, "namespaces")
	r.Default(ns)
	r.PrepareForCreate(ns)
	if ns.Labels[corev1.LabelMetadataName] != "team-a" || ns.Status.Phase != corev1.NamespaceActive ||
		len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Errorf("namespace defaults wrong: %+v", ns)
	}
	s := &corev1.Secret{StringData: map[string]string{"k": "v"}}
	defaultSecret(s)
	if s.Type != corev1.SecretTypeOpaque || string(s.Data["k"]) != "v" || s.StringData != nil {
		t.Errorf("secret defaults wrong: %+v", s)
	}
}
