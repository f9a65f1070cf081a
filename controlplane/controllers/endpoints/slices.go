package endpoints

import (
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and limits of upstream's EndpointSlice controller.
const (
	ManagedBy               = "endpointslice-controller.k8s.io"
	MaxEndpointsPerSlice    = 100
	maxGenerateNamePrefixed = 63 - 5 // room for the random suffix
)

// sliceGroup is the desired endpoints sharing one address type and port
// set; each group gets slices of its own.
type sliceGroup struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   map[string]discoveryv1.Endpoint // by endpointKey
}

// addressTypes returns the slice address types a Service gets: its IP
// families; for a Service without them the family of its cluster IP, or
// both for a headless one (upstream's getAddressTypesForService).
func addressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = append(out, discoveryv1.AddressTypeIPv6)
		}
	}
	if len(out) > 0 {
		return out
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		if isIPv6(ip) {
			return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
		}
		return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

// desiredGroups computes every endpoint a Service's slices should hold.
// Terminating pods are kept (with ready=false, terminating=true) so that
// consumers can drain them; zoneOf maps a node name to its zone label.
func desiredGroups(svc *corev1.Service, pods []*corev1.Pod, zoneOf func(string) string) map[string]*sliceGroup {
	groups := map[string]*sliceGroup{}
	for _, at := range addressTypes(svc) {
		for _, pod := range pods {
			if !shouldPodBeInEndpoints(pod, true) {
				continue
			}
			ep, ok := podToEndpoint(pod, svc, at, zoneOf)
			if !ok {
				continue
			}
			ports := endpointPorts(svc, pod)
			k := groupKey(at, ports)
			g := groups[k]
			if g == nil {
				g = &sliceGroup{addressType: at, ports: ports, endpoints: map[string]discoveryv1.Endpoint{}}
				groups[k] = g
			}
			g.endpoints[endpointKey(ep)] = ep
		}
	}
	return groups
}

// podToEndpoint builds pod's endpoint of address type at, with upstream's
// conditions: serving is the Ready condition, terminating is a deletion
// timestamp, and ready is serving and not terminating (or always, with
// publishNotReadyAddresses).
func podToEndpoint(pod *corev1.Pod, svc *corev1.Service, at discoveryv1.AddressType, zoneOf func(string) string) (discoveryv1.Endpoint, bool) {
	var addrs []string
	for _, ip := range podIPs(pod) {
		if isIPv6(ip) == (at == discoveryv1.AddressTypeIPv6) {
			addrs = append(addrs, ip)
		}
	}
	if len(addrs) == 0 {
		return discoveryv1.Endpoint{}, false
	}
	serving := isPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  addrs,
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  podRef(pod),
	}
	if pod.Spec.NodeName != "" {
		node := pod.Spec.NodeName
		ep.NodeName = &node
		if zone := zoneOf(node); zone != "" {
			ep.Zone = &zone
		}
	}
	if shouldSetHostname(pod, svc) {
		host := pod.Spec.Hostname
		ep.Hostname = &host
	}
	return ep, true
}

// endpointPorts resolves the Service's ports on pod, leaving out the ones
// that do not resolve.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		port, err := findPort(pod, sp)
		if err != nil {
			continue
		}
		name, proto := sp.Name, protocolOf(sp.Protocol)
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	return out
}

func groupKey(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	ks := make([]string, len(ports))
	for i, p := range ports {
		ks[i] = portKey(corev1.EndpointPort{Name: deref(p.Name), Port: deref(p.Port), Protocol: deref(p.Protocol), AppProtocol: p.AppProtocol})
	}
	sort.Strings(ks)
	return string(at) + "|" + strings.Join(ks, ",")
}

// endpointKey identifies an endpoint across syncs: its addresses and pod.
func endpointKey(ep discoveryv1.Endpoint) string {
	k := strings.Join(ep.Addresses, ",")
	if ep.TargetRef != nil {
		k += "/" + ep.TargetRef.Namespace + "/" + ep.TargetRef.Name
	}
	return k
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// slicePlan is what a sync writes. Updates carry the existing slices'
// names and resource versions.
type slicePlan struct {
	create, update, delete []*discoveryv1.EndpointSlice
}

func (p slicePlan) empty() bool { return len(p.create)+len(p.update)+len(p.delete) == 0 }

// planSlices turns the existing managed slices of svc into the desired
// groups with little churn, as upstream's reconciler does: endpoints stay
// in the slice they are in, changed and removed ones are rewritten in
// place, slices left empty are deleted, new endpoints fill the slices
// already being rewritten, then a partly full untouched slice, then new
// slices of at most MaxEndpointsPerSlice. A Service with no endpoints
// keeps one empty placeholder slice. Existing slices are not modified.
func planSlices(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, groups map[string]*sliceGroup) slicePlan {
	var plan slicePlan
	byGroup := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if !ownedBy(s, svc) {
			plan.delete = append(plan.delete, s)
			continue
		}
		k := groupKey(s.AddressType, s.Ports)
		byGroup[k] = append(byGroup[k], s)
	}
	total := 0
	for _, g := range groups {
		total += len(g.endpoints)
	}
	if total == 0 {
		return planPlaceholder(svc, byGroup, plan)
	}
	for _, k := range sortedKeys(byGroup) {
		if groups[k] == nil {
			plan.delete = append(plan.delete, byGroup[k]...)
		}
	}
	for _, k := range sortedKeys(groups) {
		plan = planGroup(svc, groups[k], byGroup[k], plan)
	}
	return plan
}

func planGroup(svc *corev1.Service, g *sliceGroup, existing []*discoveryv1.EndpointSlice, plan slicePlan) slicePlan {
	sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
	placed := map[string]bool{}
	var touched, untouched []*discoveryv1.EndpointSlice
	for _, s := range existing {
		eps := make([]discoveryv1.Endpoint, 0, len(s.Endpoints))
		changed := false
		for _, ep := range s.Endpoints {
			k := endpointKey(ep)
			want, ok := g.endpoints[k]
			if !ok || placed[k] {
				changed = true
				continue
			}
			placed[k] = true
			if !apiequality.Semantic.DeepEqual(want, ep) {
				changed = true
			}
			eps = append(eps, want)
		}
		ns := s.DeepCopy()
		ns.Endpoints = eps
		changed = setSliceMeta(ns, svc, g) || changed
		if changed {
			touched = append(touched, ns)
		} else {
			untouched = append(untouched, ns)
		}
	}
	var rest []discoveryv1.Endpoint
	for _, k := range sortedKeys(g.endpoints) {
		if !placed[k] {
			rest = append(rest, g.endpoints[k])
		}
	}
	for _, s := range touched {
		n := min(MaxEndpointsPerSlice-len(s.Endpoints), len(rest))
		if n > 0 {
			s.Endpoints, rest = append(s.Endpoints, rest[:n]...), rest[n:]
		}
	}
	// A remainder smaller than a slice goes into the fullest untouched
	// slice with room rather than a new one.
	if rem := len(rest) % MaxEndpointsPerSlice; rem > 0 {
		sort.SliceStable(untouched, func(i, j int) bool { return len(untouched[i].Endpoints) > len(untouched[j].Endpoints) })
		for i, s := range untouched {
			if len(s.Endpoints)+rem <= MaxEndpointsPerSlice {
				s.Endpoints = append(s.Endpoints, rest[len(rest)-rem:]...)
				rest = rest[:len(rest)-rem]
				touched = append(touched, s)
				untouched = append(untouched[:i], untouched[i+1:]...)
				break
			}
		}
	}
	for _, s := range touched {
		if len(s.Endpoints) == 0 {
			plan.delete = append(plan.delete, s)
		} else {
			plan.update = append(plan.update, s)
		}
	}
	for _, s := range untouched {
		if len(s.Endpoints) == 0 {
			plan.delete = append(plan.delete, s)
		}
	}
	for len(rest) > 0 {
		n := min(MaxEndpointsPerSlice, len(rest))
		s := newSlice(svc, g)
		s.Endpoints, rest = append([]discoveryv1.Endpoint(nil), rest[:n]...), rest[n:]
		plan.create = append(plan.create, s)
	}
	return plan
}

// planPlaceholder keeps (or creates) one empty slice with no ports for a
// Service with no endpoints and deletes the rest.
func planPlaceholder(svc *corev1.Service, byGroup map[string][]*discoveryv1.EndpointSlice, plan slicePlan) slicePlan {
	g := &sliceGroup{addressType: addressTypes(svc)[0]}
	var keep *discoveryv1.EndpointSlice
	for _, k := range sortedKeys(byGroup) {
		for _, s := range byGroup[k] {
			if keep == nil && k == groupKey(g.addressType, nil) && len(s.Endpoints) == 0 {
				keep = s
				continue
			}
			plan.delete = append(plan.delete, s)
		}
	}
	if keep == nil {
		plan.create = append(plan.create, newSlice(svc, g))
		return plan
	}
	ns := keep.DeepCopy()
	if setSliceMeta(ns, svc, g) {
		plan.update = append(plan.update, ns)
	}
	return plan
}

func newSlice(svc *corev1.Service, g *sliceGroup) *discoveryv1.EndpointSlice {
	prefix := svc.Name + "-"
	if len(prefix) > maxGenerateNamePrefixed {
		prefix = prefix[:maxGenerateNamePrefixed]
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: prefix, Namespace: svc.Namespace},
		AddressType: g.addressType,
		Ports:       g.ports,
	}
	setSliceMeta(s, svc, g)
	return s
}

// setSliceMeta sets the labels, owner and ports a slice of svc carries and
// reports whether anything changed.
func setSliceMeta(s *discoveryv1.EndpointSlice, svc *corev1.Service, g *sliceGroup) bool {
	labels := sliceLabels(svc)
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}
	changed := !maps.Equal(s.Labels, labels) || !apiequality.Semantic.DeepEqual(s.OwnerReferences, owner) ||
		!apiequality.Semantic.DeepEqual(s.Ports, g.ports)
	s.Labels, s.OwnerReferences, s.Ports = labels, owner, g.ports
	return changed
}

// sliceLabels are the Service's labels (less the two the controller owns)
// plus service-name, managed-by and, for headless Services, headless.
func sliceLabels(svc *corev1.Service) map[string]string {
	l := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy && k != LabelHeadless {
			l[k] = v
		}
	}
	l[discoveryv1.LabelServiceName] = svc.Name
	l[discoveryv1.LabelManagedBy] = ManagedBy
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		l[LabelHeadless] = ""
	}
	return l
}

// ownedBy reports whether slice's controller owner is svc (a slice left
// from a deleted Service of the same name is not).
func ownedBy(s *discoveryv1.EndpointSlice, svc *corev1.Service) bool {
	ref := metav1.GetControllerOf(s)
	return ref != nil && ref.UID == svc.UID && ref.Kind == "Service"
}
