package registry

import (
	"fmt"
	"net/netip"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Limits of upstream's event and endpoint slice validation.
const (
	eventFieldLengthLimit    = 128
	eventMessageLengthLimit  = 1024
	maxEndpointsPerSlice     = 1000
	maxAddressesPerEndpoint  = 100
	maxPortsPerEndpointSlice = 20000
)

func endpointsResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "endpoints",
		Kind:         "Endpoints",
		ListKind:     "EndpointsList",
		Namespaced:   true,
		ShortNames:   []string{"ep"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Endpoints{} },
		NewList:      func() runtime.Object { return &corev1.EndpointsList{} },

		Default: mutate(func(ep *corev1.Endpoints) {
			for i := range ep.Subsets {
				for j := range ep.Subsets[i].Ports {
					if ep.Subsets[i].Ports[j].Protocol == "" {
						ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
					}
				}
			}
		}),
		Validate: validate(func(ep *corev1.Endpoints) field.ErrorList {
			return append(validateMeta(ep, true, apivalidation.NameIsDNSSubdomain), validateEndpointSubsets(ep.Subsets)...)
		}),
		ValidateUpdate: validate2(func(ep, old *corev1.Endpoints) field.ErrorList {
			return append(validateMetaUpdate(ep, old), validateEndpointSubsets(ep.Subsets)...)
		}),
		Columns: endpointsColumns(),
		Row:     row(endpointsRow),
	}
}

func validateEndpointSubsets(subsets []corev1.EndpointSubset) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("subsets")
	for i, ss := range subsets {
		p := path.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j, port := range ss.Ports {
			pp := p.Child("ports").Index(j)
			if len(ss.Ports) > 1 && port.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if port.Name != "" {
				errs = append(errs, dns1123Label(port.Name, pp.Child("name"))...)
			}
			for _, msg := range validation.IsValidPortNum(int(port.Port)) {
				errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
			}
			errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
			if port.AppProtocol != nil {
				errs = append(errs, qualifiedName(*port.AppProtocol, pp.Child("appProtocol"))...)
			}
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, path *field.Path) field.ErrorList {
	errs := validateNonSpecialIP(a.IP, path.Child("ip"))
	if a.Hostname != "" {
		errs = append(errs, dns1123Label(a.Hostname, path.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, dns1123Subdomain(*a.NodeName, path.Child("nodeName"))...)
	}
	return errs
}

func eventResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "events",
		Kind:         "Event",
		ListKind:     "EventList",
		Namespaced:   true,
		ShortNames:   []string{"ev"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Event{} },
		NewList:      func() runtime.Object { return &corev1.EventList{} },

		Validate: validate(func(e *corev1.Event) field.ErrorList {
			return append(validateMeta(e, true, apivalidation.NameIsDNSSubdomain), validateEvent(e)...)
		}),
		ValidateUpdate: validate2(func(e, old *corev1.Event) field.ErrorList {
			return append(validateMetaUpdate(e, old), validateEvent(e)...)
		}),
		Fields:  selectable(eventFields),
		Columns: eventColumns(),
		Row:     row(eventRow),
	}
}

// validateEvent is upstream's legacy event validation, all core/v1 gets:
// old-style events (no eventTime) need only a matching namespace; new-style
// ones need the reporting fields, action and reason too.
func validateEvent(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(nsPath, e.InvolvedObject.Namespace, "does not match event.namespace")
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" && e.Namespace != "" && e.Namespace != metav1.NamespaceDefault ||
			e.InvolvedObject.Namespace != "" && e.Namespace != e.InvolvedObject.Namespace {
			errs = append(errs, mismatch)
		}
		return errs
	}
	if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	if e.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath("reportingComponent"), ""))
	}
	errs = append(errs, qualifiedName(e.ReportingController, field.NewPath("reportingComponent"))...)
	for _, f := range []struct {
		value, name string
		limit       int
		required    bool
	}{
		{e.ReportingInstance, "reportingInstance", eventFieldLengthLimit, true},
		{e.Action, "action", eventFieldLengthLimit, true},
		{e.Reason, "reason", eventFieldLengthLimit, true},
		{e.Message, "message", eventMessageLengthLimit, false},
	} {
		if f.required && f.value == "" {
			errs = append(errs, field.Required(field.NewPath(f.name), ""))
		}
		if len(f.value) > f.limit {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", fmt.Sprintf("can have at most %v characters", f.limit)))
		}
	}
	return errs
}

func eventFields(e *corev1.Event) fields.Set {
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}
}

func leaseResource() *Resource {
	return &Resource{
		GroupVersion: coordinationv1.SchemeGroupVersion,
		Name:         "leases",
		Kind:         "Lease",
		ListKind:     "LeaseList",
		Namespaced:   true,
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:      func() runtime.Object { return &coordinationv1.LeaseList{} },

		Validate: validate(func(l *coordinationv1.Lease) field.ErrorList {
			return append(validateMeta(l, true, apivalidation.NameIsDNSSubdomain), validateLeaseSpec(&l.Spec)...)
		}),
		ValidateUpdate: validate2(func(l, old *coordinationv1.Lease) field.ErrorList {
			return append(validateMetaUpdate(l, old), validateLeaseSpec(&l.Spec)...)
		}),
		Columns: leaseColumns(),
		Row:     row(leaseRow),
	}
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if s := spec.Strategy; s != nil && *s != coordinationv1.OldestEmulationVersion {
		errs = append(errs, field.NotSupported(path.Child("strategy"), *s, []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}))
	}
	if h := spec.PreferredHolder; h != nil && *h != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

func endpointSliceResource() *Resource {
	return &Resource{
		GroupVersion: discoveryv1.SchemeGroupVersion,
		Name:         "endpointslices",
		Kind:         "EndpointSlice",
		ListKind:     "EndpointSliceList",
		Namespaced:   true,
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:      func() runtime.Object { return &discoveryv1.EndpointSliceList{} },

		Default: mutate(defaultEndpointSlice),
		Validate: validate(func(s *discoveryv1.EndpointSlice) field.ErrorList {
			return append(validateMeta(s, true, apivalidation.NameIsDNSSubdomain), validateEndpointSlice(s)...)
		}),
		ValidateUpdate: validate2(func(s, old *discoveryv1.EndpointSlice) field.ErrorList {
			errs := validateMetaUpdate(s, old)
			errs = append(errs, apivalidation.ValidateImmutableField(s.AddressType, old.AddressType, field.NewPath("addressType"))...)
			return append(errs, validateEndpointSlice(s)...)
		}),
		Columns: endpointSliceColumns(),
		Row:     row(endpointSliceRow),
	}
}

// defaultEndpointSlice gives ports an empty name and TCP. Endpoint conditions
// are not defaulted: upstream leaves them nil, and readers treat a nil ready
// or serving as true and a nil terminating as false.
func defaultEndpointSlice(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		if s.Ports[i].Name == nil {
			s.Ports[i].Name = ptr.To("")
		}
		if s.Ports[i].Protocol == nil {
			s.Ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	case "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, []discoveryv1.AddressType{
			discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}))
	}
	path := field.NewPath("endpoints")
	if len(s.Endpoints) > maxEndpointsPerSlice {
		errs = append(errs, field.TooMany(path, len(s.Endpoints), maxEndpointsPerSlice))
	}
	for i := range s.Endpoints {
		errs = append(errs, validateSliceEndpoint(&s.Endpoints[i], s.AddressType, path.Index(i))...)
	}
	return append(errs, validateSlicePorts(s.Ports)...)
}

func validateSliceEndpoint(e *discoveryv1.Endpoint, addressType discoveryv1.AddressType, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	addrPath := path.Child("addresses")
	if len(e.Addresses) == 0 {
		errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
	} else if len(e.Addresses) > maxAddressesPerEndpoint {
		errs = append(errs, field.TooMany(addrPath, len(e.Addresses), maxAddressesPerEndpoint))
	}
	for i, a := range e.Addresses {
		p := addrPath.Index(i)
		switch addressType {
		case discoveryv1.AddressTypeIPv4:
			errs = append(errs, validIPOfFamily(p, a, false)...)
		case discoveryv1.AddressTypeIPv6:
			errs = append(errs, validIPOfFamily(p, a, true)...)
		case discoveryv1.AddressTypeFQDN:
			errs = append(errs, validation.IsFullyQualifiedDomainName(p, a)...)
		}
	}
	if e.NodeName != nil {
		errs = append(errs, dns1123Subdomain(*e.NodeName, path.Child("nodeName"))...)
	}
	if e.Hostname != nil {
		errs = append(errs, dns1123Label(*e.Hostname, path.Child("hostname"))...)
	}
	return errs
}

func validateSlicePorts(ports []discoveryv1.EndpointPort) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("ports")
	if len(ports) > maxPortsPerEndpointSlice {
		errs = append(errs, field.TooMany(path, len(ports), maxPortsPerEndpointSlice))
	}
	names := sets.New[string]()
	for i, port := range ports {
		p := path.Index(i)
		if port.Name != nil {
			if *port.Name != "" {
				errs = append(errs, dns1123Label(*port.Name, p.Child("name"))...)
			}
			if names.Has(*port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), *port.Name))
			}
			names.Insert(*port.Name)
		}
		if port.Protocol == nil {
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		} else {
			errs = append(errs, validateProtocol(*port.Protocol, p.Child("protocol"))...)
		}
		if port.AppProtocol != nil {
			errs = append(errs, qualifiedName(*port.AppProtocol, p.Child("appProtocol"))...)
		}
	}
	return errs
}

// validIPOfFamily checks that value is an IP address of the given family.
func validIPOfFamily(p *field.Path, value string, ipv6 bool) field.ErrorList {
	if errs := validation.IsValidIP(p, value); len(errs) > 0 {
		return errs
	}
	ip, err := netip.ParseAddr(value)
	if err != nil || ip.Is4() == ipv6 {
		family := "IPv4"
		if ipv6 {
			family = "IPv6"
		}
		return field.ErrorList{field.Invalid(p, value, "must be a valid "+family+" address")}
	}
	return nil
}
