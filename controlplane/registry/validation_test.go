package registry

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestValidatePodCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"valid", func(*corev1.Pod) {}, nil},
		{"bad name", func(p *corev1.Pod) { p.Name = "Web_1" }, []string{"FieldValueInvalid metadata.name"}},
		{"missing namespace", func(p *corev1.Pod) { p.Namespace = "" }, []string{"FieldValueRequired metadata.namespace"}},
		{"bad label", func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b c"} }, []string{"FieldValueInvalid metadata.labels"}},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, []string{"FieldValueRequired spec.containers"}},
		{"container name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "App" }, []string{"FieldValueInvalid spec.containers[0].name"}},
		{"duplicate across init", func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{ctr("app", "busybox")} },
			[]string{"FieldValueDuplicate spec.initContainers[0].name"}},
		{"image required", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, []string{"FieldValueRequired spec.containers[0].image"}},
		{"image whitespace", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" }, []string{"FieldValueInvalid spec.containers[0].image"}},
		{"ports", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{
				{Name: "http", ContainerPort: 70000, Protocol: "TCP"},
				{Name: "http", ContainerPort: 81, HostPort: -1, Protocol: "ICMP"},
			}
		}, []string{"FieldValueInvalid spec.containers[0].ports[0].containerPort", "FieldValueDuplicate spec.containers[0].ports[1].name",
			"FieldValueInvalid spec.containers[0].ports[1].hostPort", "FieldValueNotSupported spec.containers[0].ports[1].protocol"}},
		{"host port clash", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}})
		}, []string{"FieldValueDuplicate spec.containers[1].ports[0].hostPort"}},
		{"env", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: ""}, {Name: "A=B"}, {Name: "OK", Value: "x", ValueFrom: &corev1.EnvVarSource{}}}
		}, []string{"FieldValueRequired spec.containers[0].env[0].name", "FieldValueInvalid spec.containers[0].env[1].name",
			"FieldValueInvalid spec.containers[0].env[2].valueFrom"}},
		{"requests above limits", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("-1")},
			}
		}, []string{"FieldValueInvalid spec.containers[0].resources.requests", "FieldValueInvalid spec.containers[0].resources.requests[memory]"}},
		{"volumes", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
				{Name: "Bad", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			}
		}, []string{"FieldValueForbidden spec.volumes[1].hostPath", "FieldValueDuplicate spec.volumes[1].name",
			"FieldValueInvalid spec.volumes[2].name", "FieldValueRequired spec.volumes[2].configMap.name"}},
		{"volume mounts", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data"}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "nope", MountPath: "/d"}, {Name: "data"}}
		}, []string{"FieldValueNotFound spec.containers[0].volumeMounts[1].name", "FieldValueInvalid spec.containers[0].volumeMounts[1].mountPath",
			"FieldValueRequired spec.containers[0].volumeMounts[2].mountPath"}},
		{"policies", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = "Sometimes"
			p.Spec.DNSPolicy = "Google"
			p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(-1))
		}, []string{"FieldValueNotSupported spec.restartPolicy", "FieldValueNotSupported spec.dnsPolicy"}}, // a negative grace period is defaulted to 1 (SetDefaults_Pod)
		{"probes on plain init container", func(p *corev1.Pod) {
			c := ctr("init", "busybox")
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			p.Spec.InitContainers = []corev1.Container{c}
		}, []string{"FieldValueForbidden spec.initContainers[0].readinessProbe"}},
		{"liveness successThreshold", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}, []string{"FieldValueInvalid spec.containers[0].livenessProbe.successThreshold"}},
	}
	r := resourceByName(t, "pods")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(ctr("app", "nginx"))
			tt.mutate(pod)
			assertErrors(t, createErrors(r, pod), tt.want)
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"image change", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:2" }, nil},
		{"add toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}, nil},
		{"set deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) }, nil},
		{"change restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, []string{"FieldValueForbidden spec"}},
		// The default tolerations come back (admission runs on update too), a
		// user's toleration may not be removed.
		{"remove toleration", func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[1:] }, []string{"FieldValueForbidden spec.tolerations"}},
		{"add container", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, ctr("b", "x")) }, []string{"FieldValueForbidden spec.containers"}},
		{"change name", func(p *corev1.Pod) { p.Name = "other" }, []string{"FieldValueInvalid metadata.name"}},
	}
	r := resourceByName(t, "pods")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPod(ctr("app", "nginx"))
			old.ResourceVersion = "1"
			old.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			if errs := createErrors(r, old); len(errs) > 0 {
				t.Fatal(errs)
			}
			pod := old.DeepCopy()
			tt.mutate(pod)
			r.Default(pod)
			r.PrepareForUpdate(pod, old)
			errs := r.ValidateUpdate(pod, old)
			assertErrors(t, errs, tt.want)
			if tt.name == "change restart policy" && !strings.HasPrefix(errs[0].Detail, "pod updates may not change fields other than") {
				t.Errorf("detail = %q", errs[0].Detail)
			}
		})
	}
}

func newDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("app", "nginx")}},
			},
		},
	}
}

func TestValidateDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   []string
	}{
		{"valid", func(*appsv1.Deployment) {}, nil},
		// As upstream: a nil selector selects nothing, so the template does not match it either.
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]string{"FieldValueRequired spec.selector", "FieldValueInvalid spec.template.metadata.labels"}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, []string{"FieldValueInvalid spec.selector"}},
		{"selector mismatch", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "api"} },
			[]string{"FieldValueInvalid spec.template.metadata.labels"}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(-1)) }, []string{"FieldValueInvalid spec.replicas"}},
		{"restart policy", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]string{"FieldValueNotSupported spec.template.spec.restartPolicy"}},
		{"strategy type", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, []string{"FieldValueNotSupported spec.strategy"}},
		{"both zero", func(d *appsv1.Deployment) {
			zero := ptr.To(intstrZero())
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: zero, MaxUnavailable: zero}
		}, []string{"FieldValueInvalid spec.strategy.rollingUpdate.maxUnavailable"}},
		{"progress deadline", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 700
		}, []string{"FieldValueInvalid spec.progressDeadlineSeconds"}},
		{"revision history", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To(int32(-1)) },
			[]string{"FieldValueInvalid spec.revisionHistoryLimit"}},
		{"template container", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{"FieldValueRequired spec.template.spec.containers[0].image"}},
	}
	r := resourceByName(t, "deployments")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment()
			tt.mutate(d)
			errs := createErrors(r, d)
			assertErrors(t, errs, tt.want)
			if tt.name == "selector mismatch" && errs[0].Detail != "`selector` does not match template `labels`" {
				t.Errorf("detail = %q", errs[0].Detail)
			}
		})
	}
}

func TestDeploymentSelectorImmutable(t *testing.T) {
	r := resourceByName(t, "deployments")
	old := newDeployment()
	old.ResourceVersion = "1"
	createErrors(r, old)
	d := old.DeepCopy()
	d.Spec.Selector.MatchLabels = map[string]string{"app": "web", "tier": "front"}
	d.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
	assertErrors(t, r.ValidateUpdate(d, old), []string{"FieldValueInvalid spec.selector"})
}

func TestValidateReplicaSet(t *testing.T) {
	r := resourceByName(t, "replicasets")
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{ctr("app", "nginx")}},
			},
		},
	}
	assertErrors(t, createErrors(r, rs), []string{"FieldValueInvalid spec.template.metadata.labels"})
	rs.Spec.Template.Labels["app"] = "web"
	assertErrors(t, r.Validate(rs), nil)
}

func TestValidateService(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{"valid", func(*corev1.Service) {}, nil},
		// RelaxedServiceNameValidation (GA in 1.37): a DNS-1123 label will do.
		{"name may start with a digit", func(s *corev1.Service) { s.Name = "1web" }, nil},
		{"name must be a DNS-1123 label", func(s *corev1.Service) { s.Name = "web.1" }, []string{"FieldValueInvalid metadata.name"}},
		{"ports required", func(s *corev1.Service) { s.Spec.Ports = nil }, []string{"FieldValueRequired spec.ports"}},
		{"headless needs no ports", func(s *corev1.Service) { s.Spec.Ports = nil; s.Spec.ClusterIP = "None" }, nil},
		{"names required with two ports", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 443})
		}, []string{"FieldValueRequired spec.ports[0].name", "FieldValueRequired spec.ports[1].name"}},
		{"duplicate names", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "a", Port: 81}}
		}, []string{"FieldValueDuplicate spec.ports[1].name"}},
		{"port range", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }, []string{"FieldValueInvalid spec.ports[0].port", "FieldValueInvalid spec.ports[0].targetPort"}},
		{"type", func(s *corev1.Service) { s.Spec.Type = "Magic" }, []string{"FieldValueNotSupported spec.type"}},
		{"node port on cluster ip", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30000 }, []string{"FieldValueForbidden spec.ports[0].nodePort"}},
	}
	r := resourceByName(t, "services")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
			}
			tt.mutate(svc)
			assertErrors(t, createErrors(r, svc), tt.want)
		})
	}
}

func TestServiceClusterIPImmutable(t *testing.T) {
	r := resourceByName(t, "services")
	old := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}},
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
	createErrors(r, old)
	// A client leaving the allocated IP out keeps it.
	svc := old.DeepCopy()
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	r.Default(svc)
	r.PrepareForUpdate(svc, old)
	assertErrors(t, r.ValidateUpdate(svc, old), nil)
	if svc.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("clusterIP = %q, want it kept", svc.Spec.ClusterIP)
	}
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.11", []string{"10.96.0.11"}
	r.PrepareForUpdate(svc, old)
	assertErrors(t, r.ValidateUpdate(svc, old), []string{"FieldValueInvalid spec.clusterIPs[0]"})
}

func TestValidateMiscResources(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "x", Namespace: "default"}
	cases := []struct {
		resource string
		build    func() (obj runtime.Object)
		want     []string
	}{
		{"namespaces", func() runtime.Object { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}} }, []string{"FieldValueInvalid metadata.name"}},
		{"namespaces", func() runtime.Object {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"custom"}}}
		}, []string{"FieldValueInvalid spec.finalizers"}},
		{"nodes", func() runtime.Object { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1.example.com"}} }, nil},
		{"nodes", func() runtime.Object {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "default"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "Sometimes"}}}}
		}, []string{"FieldValueForbidden metadata.namespace", "FieldValueNotSupported metadata.taints[0].effect"}},
		{"configmaps", func() runtime.Object { return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"a/b": "x"}} }, []string{"FieldValueInvalid data[a/b]"}},
		{"secrets", func() runtime.Object {
			return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil}}
		}, []string{"FieldValueRequired data[tls.key]"}},
		{"secrets", func() runtime.Object {
			return &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"big": make([]byte, maxSecretSize+1)}}
		}, []string{"FieldValueTooLong data"}},
		{"leases", func() runtime.Object {
			return &coordinationv1.Lease{ObjectMeta: meta, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(int32(0))}}
		}, []string{"FieldValueInvalid spec.leaseDurationSeconds"}},
		{"events", func() runtime.Object {
			return &corev1.Event{ObjectMeta: meta, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "p"}}
		}, []string{"FieldValueInvalid involvedObject.namespace"}},
		{"endpoints", func() runtime.Object {
			return &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
		}, []string{"FieldValueInvalid subsets[0].addresses[0].ip"}},
		{"endpointslices", func() runtime.Object {
			return &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: "IPv4", Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"not-an-ip"}}}}
		}, []string{"FieldValueInvalid endpoints[0].addresses[0]"}},
	}
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			assertErrors(t, createErrors(resourceByName(t, tc.resource), tc.build()), tc.want)
		})
	}
}

func intstrZero() intstr.IntOrString { return intstr.FromInt32(0) }
