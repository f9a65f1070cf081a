package registry

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
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

		Columns: endpointsColumns(),
		Row:     row(endpointsRow),
	}
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

		Fields:  selectable(eventFields),
		Columns: eventColumns(),
		Row:     row(eventRow),
	}
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

		Columns: leaseColumns(),
		Row:     row(leaseRow),
	}
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
