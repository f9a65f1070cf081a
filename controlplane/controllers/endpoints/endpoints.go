package endpoints

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations upstream puts on Endpoints.
const (
	// LabelHeadless marks the Endpoints and EndpointSlices of a headless
	// Service (corev1.IsHeadlessService).
	LabelHeadless = "service.kubernetes.io/headless"
	// AnnotationOverCapacity is set to "truncated" when a Service has more
	// than MaxEndpointsPerResource addresses.
	AnnotationOverCapacity = "endpoints.kubernetes.io/over-capacity"
	// MaxEndpointsPerResource is the most addresses an Endpoints object
	// holds, as upstream.
	MaxEndpointsPerResource = 1000
)

// desiredSubsets computes a Service's Endpoints subsets from the pods its
// selector matches, as upstream's endpoints controller: pods without an IP
// of the Service's family or that have finished are skipped, terminating
// pods too unless publishNotReadyAddresses; ready pods (or all, with
// publishNotReadyAddresses) are addresses, the others notReadyAddresses;
// each Service port is resolved per pod and pods where it does not resolve
// leave that port out. The result is grouped by port set and sorted.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	tolerateUnready := svc.Spec.PublishNotReadyAddresses
	var subsets []corev1.EndpointSubset
	for _, pod := range pods {
		if !shouldPodBeInEndpoints(pod, tolerateUnready) {
			continue
		}
		addr, ok := endpointAddress(pod, svc)
		if !ok {
			continue
		}
		ready := tolerateUnready || isPodReady(pod)
		add := func(ports []corev1.EndpointPort) {
			ss := corev1.EndpointSubset{Ports: ports}
			if ready {
				ss.Addresses = []corev1.EndpointAddress{addr}
			} else {
				ss.NotReadyAddresses = []corev1.EndpointAddress{addr}
			}
			subsets = append(subsets, ss)
		}
		if len(svc.Spec.Ports) == 0 {
			// Only headless Services publish port-less addresses.
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				add(nil)
			}
			continue
		}
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			port, err := findPort(pod, sp)
			if err != nil {
				continue
			}
			add([]corev1.EndpointPort{{Name: sp.Name, Port: port, Protocol: protocolOf(sp.Protocol), AppProtocol: sp.AppProtocol}})
		}
	}
	return repackSubsets(subsets)
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// endpointAddress builds pod's address for svc, using the pod IP of the
// Service's (first) IP family.
func endpointAddress(pod *corev1.Pod, svc *corev1.Service) (corev1.EndpointAddress, bool) {
	ips := podIPs(pod)
	if len(ips) == 0 {
		return corev1.EndpointAddress{}, false
	}
	var wantV6 bool
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		wantV6 = svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		wantV6 = isIPv6(svc.Spec.ClusterIP)
	default:
		wantV6 = isIPv6(ips[0])
	}
	for _, ip := range ips {
		if isIPv6(ip) != wantV6 {
			continue
		}
		addr := corev1.EndpointAddress{IP: ip, TargetRef: podRef(pod)}
		if pod.Spec.NodeName != "" {
			addr.NodeName = &pod.Spec.NodeName
		}
		if shouldSetHostname(pod, svc) {
			addr.Hostname = pod.Spec.Hostname
		}
		return addr, true
	}
	return corev1.EndpointAddress{}, false
}

// repackSubsets merges subsets with the same port set, drops duplicate
// addresses (an address both ready and not ready stays ready), and sorts
// everything so equal inputs give equal outputs.
func repackSubsets(in []corev1.EndpointSubset) []corev1.EndpointSubset {
	type group struct {
		ports    []corev1.EndpointPort
		ready    map[string]corev1.EndpointAddress
		notReady map[string]corev1.EndpointAddress
	}
	groups := map[string]*group{}
	for _, ss := range in {
		ports := append([]corev1.EndpointPort(nil), ss.Ports...)
		sort.Slice(ports, func(i, j int) bool { return portKey(ports[i]) < portKey(ports[j]) })
		k := portsKey(ports)
		g := groups[k]
		if g == nil {
			g = &group{ports: ports, ready: map[string]corev1.EndpointAddress{}, notReady: map[string]corev1.EndpointAddress{}}
			groups[k] = g
		}
		for _, a := range ss.Addresses {
			g.ready[addrKey(a)] = a
			delete(g.notReady, addrKey(a))
		}
		for _, a := range ss.NotReadyAddresses {
			if _, ok := g.ready[addrKey(a)]; !ok {
				g.notReady[addrKey(a)] = a
			}
		}
	}
	keys := sortedKeys(groups)
	out := make([]corev1.EndpointSubset, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		out = append(out, corev1.EndpointSubset{
			Addresses: sortedAddrs(g.ready), NotReadyAddresses: sortedAddrs(g.notReady), Ports: g.ports,
		})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func addrKey(a corev1.EndpointAddress) string {
	if a.TargetRef != nil {
		return a.IP + "/" + string(a.TargetRef.UID)
	}
	return a.IP
}

func portKey(p corev1.EndpointPort) string {
	app := ""
	if p.AppProtocol != nil {
		app = *p.AppProtocol
	}
	return fmt.Sprintf("%s/%d/%s/%s", p.Name, p.Port, p.Protocol, app)
}

func portsKey(ports []corev1.EndpointPort) string {
	ks := make([]string, len(ports))
	for i, p := range ports {
		ks[i] = portKey(p)
	}
	return strings.Join(ks, ",")
}

func sortedAddrs(m map[string]corev1.EndpointAddress) []corev1.EndpointAddress {
	if len(m) == 0 {
		return nil
	}
	out := make([]corev1.EndpointAddress, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// truncateSubsets keeps at most max addresses, ready ones first, as
// upstream does for Services with more than 1000 endpoints. It reports
// whether anything was dropped.
func truncateSubsets(subsets []corev1.EndpointSubset, max int) ([]corev1.EndpointSubset, bool) {
	total := 0
	for _, ss := range subsets {
		total += len(ss.Addresses) + len(ss.NotReadyAddresses)
	}
	if total <= max {
		return subsets, false
	}
	out := make([]corev1.EndpointSubset, len(subsets))
	copy(out, subsets)
	left := max
	for i := range out {
		n := min(left, len(out[i].Addresses))
		out[i].Addresses, left = out[i].Addresses[:n], left-n
	}
	for i := range out {
		n := min(left, len(out[i].NotReadyAddresses))
		out[i].NotReadyAddresses, left = out[i].NotReadyAddresses[:n], left-n
	}
	kept := out[:0]
	for _, ss := range out {
		if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 {
			kept = append(kept, ss)
		}
	}
	return kept, true
}

// desiredEndpoints returns the Endpoints object for svc with the given
// subsets: the Service's labels plus the headless label, and the
// over-capacity annotation when truncated. It keeps cur's other metadata.
func desiredEndpoints(svc *corev1.Service, cur *corev1.Endpoints, pods []*corev1.Pod) *corev1.Endpoints {
	subsets, truncated := truncateSubsets(desiredSubsets(svc, pods), MaxEndpointsPerResource)
	ep := &corev1.Endpoints{}
	if cur != nil {
		ep = cur.DeepCopy()
	}
	ep.Name, ep.Namespace = svc.Name, svc.Namespace
	ep.Subsets = subsets
	ep.Labels = maps.Clone(svc.Labels)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		if ep.Labels == nil {
			ep.Labels = map[string]string{}
		}
		ep.Labels[LabelHeadless] = ""
	}
	if truncated {
		if ep.Annotations == nil {
			ep.Annotations = map[string]string{}
		}
		ep.Annotations[AnnotationOverCapacity] = "truncated"
	} else {
		delete(ep.Annotations, AnnotationOverCapacity)
	}
	return ep
}
