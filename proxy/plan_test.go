package proxy

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var testOpts = Options{NodeName: "n1", NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
	PodCIDR: netip.MustParsePrefix("10.244.1.0/24")}

func svc(name, ip string, mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	for _, m := range mut {
		m(s)
	}
	return s
}

type ep struct {
	ip, node                    string
	ready, serving, terminating bool
}

func slice(svcName string, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svcName + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)}})
	}
	return s
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func ip(s string) netip.Addr     { return netip.MustParseAddr(s) }

func TestComputeClusterIP(t *testing.T) {
	p := Compute([]*corev1.Service{svc("web", "10.96.0.10")},
		[]*discoveryv1.EndpointSlice{slice("web", 8080,
			ep{ip: "10.244.1.5", node: "n1", ready: true, serving: true},
			ep{ip: "10.244.2.5", node: "n2", ready: true, serving: true},
			ep{ip: "10.244.2.6", node: "n2", ready: false, serving: false})}, testOpts)
	target := targetName("svc", "ns/web:http", TCP)
	want := Plan{PodCIDR: testOpts.PodCIDR,
		Rules: []Rule{{Service: "ns/web:http", Kind: KindClusterIP, Dst: ip("10.96.0.10"), Protocol: TCP, Port: 80,
			Action: DNAT, Target: target, Masquerade: true, MasqueradeUnlessFromPods: true}},
		Targets:  []Target{{Name: target, Service: "ns/web:http", Protocol: TCP, Endpoints: []netip.AddrPort{ap("10.244.1.5:8080"), ap("10.244.2.5:8080")}}},
		RouteIPs: []netip.Addr{ip("10.96.0.10")},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("plan:\n got %+v\nwant %+v", p, want)
	}
}

func TestComputeEndpointsFallbackAndReject(t *testing.T) {
	for _, tc := range []struct {
		name   string
		eps    []ep
		action Action
		want   []netip.AddrPort
	}{
		{"no slice", nil, Reject, nil},
		{"none ready, none serving", []ep{{ip: "10.244.1.5", node: "n1"}}, Reject, nil},
		{"terminating but serving used when none ready",
			[]ep{{ip: "10.244.1.5", node: "n1", serving: true, terminating: true}}, DNAT, []netip.AddrPort{ap("10.244.1.5:80")}},
		{"ready preferred over terminating",
			[]ep{{ip: "10.244.1.5", node: "n1", serving: true, terminating: true}, {ip: "10.244.1.6", node: "n1", ready: true, serving: true}},
			DNAT, []netip.AddrPort{ap("10.244.1.6:80")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []*discoveryv1.EndpointSlice
			if tc.eps != nil {
				ss = append(ss, slice("web", 80, tc.eps...))
			}
			p := Compute([]*corev1.Service{svc("web", "10.96.0.10")}, ss, testOpts)
			if len(p.Rules) != 1 || p.Rules[0].Action != tc.action {
				t.Fatalf("rules %+v, want one %v", p.Rules, tc.action)
			}
			var got []netip.AddrPort
			if len(p.Targets) == 1 {
				got = p.Targets[0].Endpoints
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("endpoints %v, want %v", got, tc.want)
			}
			if tc.action == Reject && (p.Rules[0].Masquerade || p.Rules[0].Target != "") {
				t.Fatalf("reject rule with NAT fields: %+v", p.Rules[0])
			}
		})
	}
}

func TestComputeNodePortExternalIPAndAffinity(t *testing.T) {
	s := svc("web", "10.96.0.10", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalIPs = []string{"192.0.2.7"}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	})
	p := Compute([]*corev1.Service{s}, []*discoveryv1.EndpointSlice{slice("web", 80, ep{ip: "10.244.2.5", node: "n2", ready: true})}, testOpts)
	target := targetName("svc", "ns/web:http", TCP)
	want := []Rule{
		{Service: "ns/web:http", Kind: KindClusterIP, Dst: ip("10.96.0.10"), Protocol: TCP, Port: 80, Action: DNAT, Target: target, Masquerade: true, MasqueradeUnlessFromPods: true},
		{Service: "ns/web:http", Kind: KindExternalIP, Dst: ip("192.0.2.7"), Protocol: TCP, Port: 80, Action: DNAT, Target: target, Masquerade: true},
		{Service: "ns/web:http", Kind: KindNodePort, Dst: ip("10.0.0.1"), Protocol: TCP, Port: 30080, Action: DNAT, Target: target, Masquerade: true},
	}
	if !reflect.DeepEqual(p.Rules, want) {
		t.Fatalf("rules:\n got %+v\nwant %+v", p.Rules, want)
	}
	if len(p.Targets) != 1 || p.Targets[0].Affinity != time.Minute {
		t.Fatalf("targets %+v, want one with 60s affinity", p.Targets)
	}
	if !reflect.DeepEqual(p.RouteIPs, []netip.Addr{ip("10.96.0.10")}) {
		t.Fatalf("routes %v: only the ClusterIP", p.RouteIPs)
	}
}

func TestComputeLocalPolicies(t *testing.T) {
	eps := []ep{{ip: "10.244.2.5", node: "n2", ready: true}}
	local := func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	}
	// Endpoints only on another node: both kinds of traffic are dropped.
	p := Compute([]*corev1.Service{svc("web", "10.96.0.10", local)}, []*discoveryv1.EndpointSlice{slice("web", 80, eps...)}, testOpts)
	if len(p.Rules) != 2 || p.Rules[0].Action != Drop || p.Rules[1].Action != Drop || len(p.Targets) != 0 {
		t.Fatalf("remote-only endpoints with Local policies: %+v %+v", p.Rules, p.Targets)
	}
	// A local endpoint: DNAT to it only, no masquerade of external traffic.
	eps = append(eps, ep{ip: "10.244.1.5", node: "n1", ready: true})
	p = Compute([]*corev1.Service{svc("web", "10.96.0.10", local)}, []*discoveryv1.EndpointSlice{slice("web", 80, eps...)}, testOpts)
	if len(p.Targets) != 1 || !reflect.DeepEqual(p.Targets[0].Endpoints, []netip.AddrPort{ap("10.244.1.5:80")}) {
		t.Fatalf("targets %+v, want the local endpoint only", p.Targets)
	}
	if np := p.Rules[1]; np.Kind != KindNodePort || np.Action != DNAT || np.Masquerade {
		t.Fatalf("NodePort rule %+v: want DNAT keeping the client address", np)
	}
	// Cluster-wide internal traffic, local external: two groups.
	p = Compute([]*corev1.Service{svc("web", "10.96.0.10", local, func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = nil })},
		[]*discoveryv1.EndpointSlice{slice("web", 80, eps...)}, testOpts)
	if len(p.Targets) != 2 || len(p.Targets[0].Endpoints)+len(p.Targets[1].Endpoints) != 3 {
		t.Fatalf("targets %+v: want all endpoints for ClusterIP, the local one for NodePort", p.Targets)
	}
}

func TestComputeSkipsDNSAndOddServices(t *testing.T) {
	o := testOpts
	o.SkipClusterIPs = []netip.Addr{ip("10.96.0.10")}
	p := Compute([]*corev1.Service{
		svc("dns", "10.96.0.10"), // served by the nodelet itself
		svc("headless", corev1.ClusterIPNone),
		svc("ext", "", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }),
		svc("v6", "fd00::10"),
	}, []*discoveryv1.EndpointSlice{slice("dns", 53, ep{ip: "10.244.1.5", ready: true})}, o)
	if len(p.Rules) != 0 || len(p.Targets) != 0 || len(p.RouteIPs) != 0 {
		t.Fatalf("want an empty plan, got %+v", p)
	}
}

func TestComputeUDPAndPortByName(t *testing.T) {
	s := svc("dns2", "10.96.0.11", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}
	})
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "dns2-a", Labels: map[string]string{discoveryv1.LabelServiceName: "dns2"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](5354), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.9"}}}, // nil conditions: ready
	}
	p := Compute([]*corev1.Service{s}, []*discoveryv1.EndpointSlice{sl}, testOpts)
	got := map[Protocol]netip.AddrPort{}
	for _, r := range p.Rules {
		for _, tg := range p.Targets {
			if tg.Name == r.Target {
				got[r.Protocol] = tg.Endpoints[0]
			}
		}
	}
	want := map[Protocol]netip.AddrPort{UDP: ap("10.244.1.9:5353"), TCP: ap("10.244.1.9:5354")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("endpoints by protocol %v, want %v", got, want)
	}
}

// TestComputeDuplicateAddress: two services claiming one external IP and
// port get one rule (the first by name), not two map elements with one
// key, which would make the kernel refuse the whole transaction.
func TestComputeDuplicateAddress(t *testing.T) {
	ext := func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.7"} }
	p := Compute([]*corev1.Service{svc("b", "10.96.0.2", ext), svc("a", "10.96.0.1", ext)},
		[]*discoveryv1.EndpointSlice{slice("a", 80, ep{ip: "10.244.1.5", ready: true}), slice("b", 80, ep{ip: "10.244.1.6", ready: true})}, testOpts)
	var owners []string
	for _, r := range p.Rules {
		if r.Dst == ip("192.0.2.7") {
			owners = append(owners, r.Service)
		}
	}
	if !reflect.DeepEqual(owners, []string{"ns/a:http"}) {
		t.Fatalf("external IP rules of %v, want ns/a:http only", owners)
	}
	if len(p.Rules) != 3 || len(p.Targets) != 2 {
		t.Fatalf("rules %+v targets %+v", p.Rules, p.Targets)
	}
}
