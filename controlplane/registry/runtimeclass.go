package registry

import (
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// runtimeClassResource serves node.k8s.io/v1 RuntimeClasses: cluster-scoped,
// a handler that nodes map to an OCI runtime, the pod overhead and the
// scheduling constraints the RuntimeClass admission plugin copies into
// pods. Upstream's strategy prepares nothing and keeps no generation.
func runtimeClassResource() *Resource {
	return &Resource{
		GroupVersion: nodev1.SchemeGroupVersion,
		Name:         "runtimeclasses",
		Kind:         "RuntimeClass",
		ListKind:     "RuntimeClassList",
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:      func() runtime.Object { return &nodev1.RuntimeClassList{} },
		// Upstream's printer describes the handler with ObjectMeta's doc
		// for "handler", which is empty; the RuntimeClass's own is used.
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Handler", Type: "string", Description: nodev1.RuntimeClass{}.SwaggerDoc()["handler"]},
			ageColumn(),
		},
		Row: row(func(rc *nodev1.RuntimeClass, now time.Time) []interface{} {
			return []interface{}{rc.Name, rc.Handler, age(rc.CreationTimestamp, now)}
		}),
	}
}
