package registry

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// limitRangeResource serves LimitRanges as upstream's strategy does: a
// LimitRange created without a name (nor generateName) gets a random
// UUID for one, and nothing else is reset, since a LimitRange has no
// status. The container defaults (max copied into default, default into
// defaultRequest) are upstream's v1 defaulter, which the registry's
// Default runs. Upstream's storage has no printer for the kind, so its
// table is the default convertor's Name and Created At, which is what
// the RBAC roles' columns are.
func limitRangeResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "limitranges",
		Kind:         "LimitRange",
		ListKind:     "LimitRangeList",
		Namespaced:   true,
		ShortNames:   []string{"limits"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.LimitRange{} },
		NewList:      func() runtime.Object { return &corev1.LimitRangeList{} },

		PrepareForCreate: mutate(func(lr *corev1.LimitRange) {
			if lr.Name == "" {
				lr.Name = string(uuid.NewUUID())
			}
		}),

		Columns: roleColumns(),
		Row:     row(func(lr *corev1.LimitRange, _ time.Time) []interface{} { return roleRow(lr.ObjectMeta) }),
	}
}

// resourceQuotaResource serves ResourceQuotas as upstream's strategy
// does: status reset on create and kept on updates of the quota, the spec
// kept on status updates (which the quota controller makes). Upstream
// tracks no generation for quotas.
func resourceQuotaResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "resourcequotas",
		Kind:         "ResourceQuota",
		ListKind:     "ResourceQuotaList",
		Namespaced:   true,
		ShortNames:   []string{"quota"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.ResourceQuota{} },
		NewList:      func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Subresources: []string{"status"},

		PrepareForCreate: mutate(func(q *corev1.ResourceQuota) { q.Status = corev1.ResourceQuotaStatus{} }),
		PrepareForUpdate: mutate2(func(q, old *corev1.ResourceQuota) { q.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(q, old *corev1.ResourceQuota) {
			q.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&q.ObjectMeta, &old.ObjectMeta)
			// Upstream's decode runs the v1 defaulters on a status update's
			// body too; for a quota they round its quantities up to
			// milli-units.
			roundUpToMilli(q.Status.Hard)
			roundUpToMilli(q.Status.Used)
		}),

		Columns: resourceQuotaColumns(),
		Row:     row(resourceQuotaRow),
	}
}

// roundUpToMilli is upstream's SetDefaults_ResourceList: quantities finer
// than a milli-unit are rounded up to one.
func roundUpToMilli(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

func resourceQuotaColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
		{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
		ageColumn(),
	}
}

// resourceQuotaRow is upstream's printResourceQuota: every resource of
// status.hard, sorted by name, as "name: used/hard"; those named
// "limits.*" go to the Limit column, all others to Request.
func resourceQuotaRow(q *corev1.ResourceQuota, now time.Time) []interface{} {
	names := make([]string, 0, len(q.Status.Hard))
	for name := range q.Status.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var requests, limits []string
	for _, name := range names {
		used, hard := q.Status.Used[corev1.ResourceName(name)], q.Status.Hard[corev1.ResourceName(name)]
		cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if prefix, _, found := strings.Cut(name, "."); found && prefix == "limits" {
			limits = append(limits, cell)
		} else {
			requests = append(requests, cell)
		}
	}
	return []interface{}{q.Name, strings.Join(requests, ", "), strings.Join(limits, ", "), age(q.CreationTimestamp, now)}
}
