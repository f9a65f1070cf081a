package registry

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventsV1Resource serves events.k8s.io/v1 Events: the same objects as
// stored's core/v1 Events, as upstream serves both (regarding is
// involvedObject, note is message, the deprecated* fields are the core
// ones).
func eventsV1Resource(stored *Resource, convert func(in, out runtime.Object) error) *Resource {
	return &Resource{
		GroupVersion: eventsv1.SchemeGroupVersion,
		Name:         "events",
		Kind:         "Event",
		ListKind:     "EventList",
		Namespaced:   true,
		ShortNames:   []string{"ev"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &eventsv1.Event{} },
		NewList:      func() runtime.Object { return &eventsv1.EventList{} },
		Stored:       stored,
		Convert:      convert,

		Fields:  selectable(eventsV1Fields),
		Columns: eventColumns(),
		Row: func(obj runtime.Object, now time.Time) []interface{} {
			core := &corev1.Event{}
			if err := convert(obj, core); err != nil {
				return failedRow(len(eventColumns()), err)
			}
			return eventRow(core, now)
		},
	}
}

// eventsV1Fields are the field selectors of events.k8s.io/v1, upstream's
// names for the same fields core/v1 selects on.
func eventsV1Fields(e *eventsv1.Event) fields.Set {
	return fields.Set{
		"regarding.kind":            e.Regarding.Kind,
		"regarding.namespace":       e.Regarding.Namespace,
		"regarding.name":            e.Regarding.Name,
		"regarding.uid":             string(e.Regarding.UID),
		"regarding.apiVersion":      e.Regarding.APIVersion,
		"regarding.resourceVersion": e.Regarding.ResourceVersion,
		"regarding.fieldPath":       e.Regarding.FieldPath,
		"reason":                    e.Reason,
		"reportingController":       e.ReportingController,
		"type":                      e.Type,
	}
}
