package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func pod(name, cpu, mem string, ports ...corev1.ContainerPort) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name = name
	c := corev1.Container{Name: "c", Ports: ports, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	if cpu != "" {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	p.Spec.Containers = []corev1.Container{c}
	return p
}

func alloc(cpu, mem, pods string) func() corev1.ResourceList {
	return func() corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods)}
	}
}

func TestResourcesFit(t *testing.T) {
	fit := ResourcesFit(alloc("2", "1Gi", "3"))
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		admitted []*corev1.Pod
		reason   string
	}{
		{"fits", pod("a", "1", "512Mi"), []*corev1.Pod{pod("b", "1", "512Mi")}, ""},
		{"cpu", pod("a", "1500m", ""), []*corev1.Pod{pod("b", "1", "")}, "OutOfcpu"},
		{"memory", pod("a", "", "600Mi"), []*corev1.Pod{pod("b", "", "512Mi")}, "OutOfmemory"},
		{"pods first", pod("a", "3", ""), []*corev1.Pod{pod("b", "", ""), pod("c", "", ""), pod("d", "", "")}, "OutOfpods"},
		{"best effort always fits resources", pod("a", "", ""), []*corev1.Pod{pod("b", "2", "1Gi")}, ""},
	} {
		r := fit.Admit(Attributes{Pod: tc.pod, Admitted: tc.admitted})
		if r.Admit != (tc.reason == "") || r.Reason != tc.reason {
			t.Errorf("%s: %+v, want reason %q", tc.name, r, tc.reason)
		}
	}
}

func TestHostPorts(t *testing.T) {
	port := func(p int32, ip string, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: 80, HostPort: p, HostIP: ip, Protocol: proto}
	}
	h := HostPorts()
	for _, tc := range []struct {
		name   string
		want   corev1.ContainerPort
		held   corev1.ContainerPort
		refuse bool
	}{
		{"same port", port(8080, "", ""), port(8080, "", "TCP"), true},
		{"other port", port(8081, "", ""), port(8080, "", ""), false},
		{"other protocol", port(8080, "", "UDP"), port(8080, "", "TCP"), false},
		{"wildcard against an address", port(8080, "", ""), port(8080, "10.0.0.1", ""), true},
		{"an address against the wildcard", port(8080, "10.0.0.1", ""), port(8080, "0.0.0.0", ""), true},
		{"two addresses", port(8080, "10.0.0.1", ""), port(8080, "10.0.0.2", ""), false},
		{"no host port", port(0, "", ""), port(0, "", ""), false},
	} {
		r := h.Admit(Attributes{Pod: pod("a", "", "", tc.want), Admitted: []*corev1.Pod{pod("b", "", "", tc.held)}})
		if r.Admit == tc.refuse || (tc.refuse && r.Reason != "NodePorts") {
			t.Errorf("%s: %+v, refuse %v", tc.name, r, tc.refuse)
		}
	}
}

func TestChainFirstRefusalWins(t *testing.T) {
	var asked []string
	h := func(name string, admit bool) Handler {
		return HandlerFunc(func(Attributes) Result {
			asked = append(asked, name)
			return Result{Admit: admit, Reason: name}
		})
	}
	r := Chain{h("a", true), h("b", false), h("c", false)}.Admit(Attributes{Pod: pod("p", "", "")})
	if r.Admit || r.Reason != "b" || len(asked) != 2 {
		t.Fatalf("chain: %+v after %v", r, asked)
	}
	if r := (Chain{h("a", true)}).Admit(Attributes{}); !r.Admit {
		t.Fatalf("chain of admitting handlers refused: %+v", r)
	}
}
