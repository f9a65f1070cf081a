package endpoints

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type podOpt func(*corev1.Pod)

func ready(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}
func terminating(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
func noIP(p *corev1.Pod)        { p.Status.PodIP, p.Status.PodIPs = "", nil }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func testPod(name, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func testService(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "svc-uid", Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, Ports: ports},
	}
}

var httpPort = corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}

// summary renders subsets as "ports: ready | notready" for compact tables.
func summary(subsets []corev1.EndpointSubset) string {
	s := ""
	for _, ss := range subsets {
		s += "["
		for _, p := range ss.Ports {
			s += fmt.Sprintf("%s:%d/%s ", p.Name, p.Port, p.Protocol)
		}
		s += "r="
		for _, a := range ss.Addresses {
			s += a.IP + " "
		}
		s += "nr="
		for _, a := range ss.NotReadyAddresses {
			s += a.IP + " "
		}
		s += "]"
	}
	return s
}

func TestDesiredSubsets(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  func(*corev1.Service)
		pods []*corev1.Pod
		want string
	}{
		{"ready and not ready", nil,
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready), testPod("b", "10.0.0.1"), testPod("c", "10.0.0.3", ready)},
			"[http:8080/TCP r=10.0.0.2 10.0.0.3 nr=10.0.0.1 ]"},
		{"no IP skipped", nil, []*corev1.Pod{testPod("a", "10.0.0.2", ready, noIP)}, ""},
		{"finished pods skipped", nil,
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready, phase(corev1.PodSucceeded)), testPod("b", "10.0.0.3", phase(corev1.PodFailed))}, ""},
		{"terminating excluded", nil, []*corev1.Pod{testPod("a", "10.0.0.2", ready, terminating)}, ""},
		{"terminating kept with publishNotReadyAddresses", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true },
			[]*corev1.Pod{testPod("a", "10.0.0.2", terminating), testPod("b", "10.0.0.3")},
			"[http:8080/TCP r=10.0.0.2 10.0.0.3 nr=]"},
		{"numeric target port", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(9000) },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready)}, "[http:9000/TCP r=10.0.0.2 nr=]"},
		{"zero target port means the port", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.IntOrString{} },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready)}, "[http:80/TCP r=10.0.0.2 nr=]"},
		{"named port of another protocol does not resolve", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready)}, ""},
		{"pods resolving a port differently split into subsets", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")})
		}, []*corev1.Pod{testPod("a", "10.0.0.2", ready), testPod("b", "10.0.0.3", ready, func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 8081 })},
			"[dns:5353/UDP r=10.0.0.2 10.0.0.3 nr=][http:8080/TCP r=10.0.0.2 nr=][http:8081/TCP r=10.0.0.3 nr=]"},
		{"headless without ports", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.Ports, s.Spec.IPFamilies = "None", nil, nil },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready)}, "[r=10.0.0.2 nr=]"},
		{"cluster IP service without ports has none", func(s *corev1.Service) { s.Spec.Ports = nil },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready)}, ""},
		{"IP of the service's family", func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} },
			[]*corev1.Pod{testPod("a", "10.0.0.2", ready, func(p *corev1.Pod) { p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::2"}) }),
				testPod("b", "10.0.0.3", ready)},
			"[http:8080/TCP r=fd00::2 nr=]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := testService(httpPort)
			if tc.svc != nil {
				tc.svc(svc)
			}
			if got := summary(desiredSubsets(svc, tc.pods)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestEndpointAddressFields(t *testing.T) {
	svc := testService(httpPort)
	pod := testPod("a", "10.0.0.2", ready, func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "host", "web" })
	ss := desiredSubsets(svc, []*corev1.Pod{pod})
	a := ss[0].Addresses[0]
	if a.Hostname != "host" || a.NodeName == nil || *a.NodeName != "node1" ||
		a.TargetRef == nil || a.TargetRef.Kind != "Pod" || a.TargetRef.Name != "a" || a.TargetRef.UID != "uid-a" {
		t.Fatalf("address %+v", a)
	}
}

func TestSidecarNamedPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod("a", "10.0.0.2")
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always,
		Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}}}}
	p, err := findPort(pod, &corev1.ServicePort{TargetPort: intstr.FromString("proxy"), Protocol: corev1.ProtocolTCP})
	if err != nil || p != 15001 {
		t.Fatalf("got %d %v", p, err)
	}
}

func TestDesiredEndpointsMeta(t *testing.T) {
	svc := testService(httpPort)
	svc.Spec.ClusterIP = "None"
	var pods []*corev1.Pod
	for i := 0; i < MaxEndpointsPerResource+5; i++ {
		pods = append(pods, testPod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250), ready))
	}
	ep := desiredEndpoints(svc, nil, pods)
	if ep.Labels["tier"] != "front" || ep.Labels[LabelHeadless] != "" || len(ep.Labels) != 2 {
		t.Fatalf("labels %v", ep.Labels)
	}
	if ep.Annotations[AnnotationOverCapacity] != "truncated" || len(ep.Subsets[0].Addresses) != MaxEndpointsPerResource {
		t.Fatalf("not truncated: %v, %d", ep.Annotations, len(ep.Subsets[0].Addresses))
	}
	ep2 := desiredEndpoints(svc, ep, pods[:3])
	if _, ok := ep2.Annotations[AnnotationOverCapacity]; ok {
		t.Fatal("over-capacity annotation kept")
	}
}

func TestTruncateKeepsReadyFirst(t *testing.T) {
	ss := []corev1.EndpointSubset{
		{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1"}, {IP: "2"}}},
		{Addresses: []corev1.EndpointAddress{{IP: "3"}, {IP: "4"}}},
	}
	got, trunc := truncateSubsets(ss, 3)
	if !trunc || summary(got) != "[r=nr=1 ][r=3 4 nr=]" {
		t.Fatalf("got %s %v", summary(got), trunc)
	}
}

func TestPodToEndpointConditions(t *testing.T) {
	svc := testService(httpPort)
	zone := func(string) string { return "z1" }
	for _, tc := range []struct {
		name                          string
		pod                           *corev1.Pod
		publish                       bool
		ready, serving, terminatingOK bool
	}{
		{"ready", testPod("a", "10.0.0.1", ready), false, true, true, false},
		{"not ready", testPod("a", "10.0.0.1"), false, false, false, false},
		{"terminating ready", testPod("a", "10.0.0.1", ready, terminating), false, false, true, true},
		{"terminating publish", testPod("a", "10.0.0.1", terminating), true, true, false, true},
	} {
		svc.Spec.PublishNotReadyAddresses = tc.publish
		ep, ok := podToEndpoint(tc.pod, svc, discoveryv1.AddressTypeIPv4, zone)
		if !ok {
			t.Fatalf("%s: no endpoint", tc.name)
		}
		c := ep.Conditions
		if *c.Ready != tc.ready || *c.Serving != tc.serving || *c.Terminating != tc.terminatingOK {
			t.Errorf("%s: ready=%v serving=%v terminating=%v", tc.name, *c.Ready, *c.Serving, *c.Terminating)
		}
		if deref(ep.Zone) != "z1" || deref(ep.NodeName) != "node1" || ep.TargetRef.Name != "a" {
			t.Errorf("%s: endpoint %+v", tc.name, ep)
		}
	}
	if _, ok := podToEndpoint(testPod("a", "10.0.0.1"), svc, discoveryv1.AddressTypeIPv6, zone); ok {
		t.Error("IPv4 pod got an IPv6 endpoint")
	}
}

func TestAddressTypes(t *testing.T) {
	for _, tc := range []struct {
		families  []corev1.IPFamily
		clusterIP string
		want      string
	}{
		{[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, "fd00::1", "[IPv6 IPv4]"},
		{nil, "10.96.0.1", "[IPv4]"},
		{nil, "fd00::1", "[IPv6]"},
		{nil, "None", "[IPv4 IPv6]"},
	} {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{IPFamilies: tc.families, ClusterIP: tc.clusterIP}}
		if got := fmt.Sprint(addressTypes(svc)); got != tc.want {
			t.Errorf("%v %s: got %s want %s", tc.families, tc.clusterIP, got, tc.want)
		}
	}
}
