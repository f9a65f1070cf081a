package endpoints

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func noZone(string) string { return "" }

func podsN(n int, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, testPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("10.2.%d.%d", i/200, i%200+1), opts...))
	}
	return out
}

// apply plays a plan onto the existing slices the way the API would,
// naming created slices s0, s1, ...
func apply(existing []*discoveryv1.EndpointSlice, plan slicePlan, next *int) []*discoveryv1.EndpointSlice {
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		byName[s.Name] = s
	}
	for _, s := range plan.delete {
		delete(byName, s.Name)
	}
	for _, s := range plan.update {
		byName[s.Name] = s
	}
	for _, s := range plan.create {
		c := s.DeepCopy()
		c.Name = fmt.Sprintf("s%d", *next)
		*next++
		byName[c.Name] = c
	}
	var out []*discoveryv1.EndpointSlice
	for _, k := range sortedKeys(byName) {
		out = append(out, byName[k])
	}
	return out
}

func count(slices []*discoveryv1.EndpointSlice) (n int) {
	for _, s := range slices {
		n += len(s.Endpoints)
	}
	return n
}

func TestPlanSlicesLifecycle(t *testing.T) {
	svc := testService(httpPort)
	next := 0
	plan := func(existing []*discoveryv1.EndpointSlice, pods []*corev1.Pod) ([]*discoveryv1.EndpointSlice, slicePlan) {
		p := planSlices(svc, existing, desiredGroups(svc, pods, noZone))
		return apply(existing, p, &next), p
	}

	// No pods: one placeholder, then nothing more to do.
	got, p := plan(nil, nil)
	if len(p.create) != 1 || len(got[0].Endpoints) != 0 || len(got[0].Ports) != 0 {
		t.Fatalf("placeholder plan %+v", p)
	}
	s := got[0]
	if s.GenerateName != "web-" || s.Labels[discoveryv1.LabelServiceName] != "web" ||
		s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels["tier"] != "front" ||
		len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "svc-uid" || !*s.OwnerReferences[0].Controller {
		t.Fatalf("slice meta %+v", s.ObjectMeta)
	}
	if _, p = plan(got, nil); !p.empty() {
		t.Fatalf("placeholder not stable: %+v", p)
	}

	// 250 pods: placeholder (wrong ports) goes, three slices 100/100/50.
	pods := podsN(250, ready)
	got, p = plan(got, pods)
	if len(p.create) != 3 || len(p.delete) != 1 || count(got) != 250 {
		t.Fatalf("250 pods: create %d delete %d count %d", len(p.create), len(p.delete), count(got))
	}
	for _, s := range got {
		if len(s.Endpoints) > MaxEndpointsPerSlice || *s.Ports[0].Port != 8080 {
			t.Fatalf("slice %s: %d endpoints", s.Name, len(s.Endpoints))
		}
	}
	// Same input: no writes.
	if _, p = plan(got, pods); !p.empty() {
		t.Fatalf("unchanged input planned writes: %+v", p)
	}

	// One pod becomes not ready: exactly one slice updated.
	pods[5] = testPod(pods[5].Name, pods[5].Status.PodIP)
	got, p = plan(got, pods)
	if len(p.update) != 1 || len(p.create)+len(p.delete) != 0 {
		t.Fatalf("one change: %+v", p)
	}
	// Remove the 100 pods of the first slice: it is deleted, the rest stay.
	inFirst := map[string]bool{}
	for _, ep := range got[0].Endpoints {
		inFirst[ep.TargetRef.Name] = true
	}
	var kept []*corev1.Pod
	for _, pod := range pods {
		if !inFirst[pod.Name] {
			kept = append(kept, pod)
		}
	}
	got, p = plan(got, kept)
	if len(p.delete) != 1 || len(p.update)+len(p.create) != 0 || count(got) != 150 {
		t.Fatalf("drop first slice: %+v, count %d", p, count(got))
	}
	// Ten new pods fill the half-empty slice rather than a new one.
	more := append(kept, podsN(260)[250:]...)
	got, p = plan(got, more)
	if len(p.create) != 0 || len(p.update) != 1 || count(got) != 160 {
		t.Fatalf("fill: %+v count %d", p, count(got))
	}
	// All pods gone: back to a placeholder.
	got, p = plan(got, nil)
	if len(got) != 1 || len(got[0].Endpoints) != 0 {
		t.Fatalf("back to placeholder: %d slices", len(got))
	}
}

func TestPlanSlicesForeignAndPortChange(t *testing.T) {
	svc := testService(httpPort)
	next := 0
	pods := podsN(3, ready)
	first := planSlices(svc, nil, desiredGroups(svc, pods, noZone))
	got := apply(nil, first, &next)
	// A slice owned by an older Service of the same name is deleted.
	old := got[0].DeepCopy()
	old.Name, old.OwnerReferences[0].UID = "old", "other"
	got = append(got, old)
	// Changing the target port moves every endpoint to a new group.
	svc.Spec.Ports[0].TargetPort.StrVal = "dns"
	svc.Spec.Ports[0].Protocol = corev1.ProtocolUDP
	p := planSlices(svc, got, desiredGroups(svc, pods, noZone))
	if len(p.delete) != 2 || len(p.create) != 1 || *p.create[0].Ports[0].Port != 5353 {
		t.Fatalf("plan %+v", p)
	}
	// Dual stack: one slice per address type.
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	dual := podsN(2, ready, func(p *corev1.Pod) {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::" + p.Name[1:]})
	})
	p = planSlices(svc, nil, desiredGroups(svc, dual, noZone))
	if len(p.create) != 2 || p.create[0].AddressType == p.create[1].AddressType {
		t.Fatalf("dual stack plan %+v", p)
	}
}

func TestPlanSlicesLabelChangeUpdates(t *testing.T) {
	svc := testService(httpPort)
	next := 0
	pods := podsN(2, ready)
	got := apply(nil, planSlices(svc, nil, desiredGroups(svc, pods, noZone)), &next)
	svc.Labels = map[string]string{"tier": "back"}
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	p := planSlices(svc, got, desiredGroups(svc, pods, noZone))
	if len(p.update) != 1 || p.update[0].Labels["tier"] != "back" {
		t.Fatalf("plan %+v", p)
	}
	if _, ok := p.update[0].Labels[LabelHeadless]; !ok {
		t.Fatal("headless label missing")
	}
}
