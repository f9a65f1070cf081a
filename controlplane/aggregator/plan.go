package aggregator

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// automanagedLabel marks the APIServices this component made, as
// kube-apiserver's autoregister controller marks its own ("true": kept in
// sync with what the API server serves).
const automanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// Priorities of local APIServices. Upstream keeps a table per group; its
// only use is the order of discovery, which this server computes itself,
// so one value serves: the core group first, every other after it.
const (
	corePriority    = 18000
	groupPriority   = 17000
	versionPriority = 15
)

// apiServiceName is upstream's name for a group-version's APIService:
// VERSION.GROUP, and "v1." for the core group.
func apiServiceName(gv schema.GroupVersion) string {
	return gv.Version + "." + gv.Group
}

// localAPIService is the APIService of a group-version served here.
func localAPIService(gv schema.GroupVersion) *apiregistrationv1.APIService {
	priority := int32(groupPriority)
	if gv.Group == "" {
		priority = corePriority
	}
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName(gv), Labels: map[string]string{automanagedLabel: "true"}},
		Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: priority, VersionPriority: versionPriority},
	}
}

// localPlan is what to do to make the APIServices match the
// group-versions served here.
type localPlan struct {
	create []*apiregistrationv1.APIService
	update []*apiregistrationv1.APIService
	remove []string
}

// planLocal compares the group-versions served here with the existing
// APIServices: a missing one is created; a local one of ours whose spec
// drifted is put back; one of ours no longer served (a CRD version gone)
// is removed. An APIService that names a Service is the user's: an
// extension server has taken the group-version over (metrics-server for
// metrics.k8s.io), and it is left alone; when it is deleted, the local
// one is created again and the built-in API serves once more.
func planLocal(served []schema.GroupVersion, existing []*apiregistrationv1.APIService) localPlan {
	var p localPlan
	byName := make(map[string]*apiregistrationv1.APIService, len(existing))
	for _, svc := range existing {
		byName[svc.Name] = svc
	}
	want := make(map[string]bool, len(served))
	for _, gv := range served {
		desired := localAPIService(gv)
		want[desired.Name] = true
		cur, ok := byName[desired.Name]
		switch {
		case !ok:
			p.create = append(p.create, desired)
		case cur.Spec.Service != nil || cur.Labels[automanagedLabel] != "true":
			// The user's.
		case !equality.Semantic.DeepEqual(cur.Spec, desired.Spec):
			next := cur.DeepCopy()
			next.Spec = desired.Spec
			p.update = append(p.update, next)
		}
	}
	for _, svc := range existing {
		if !want[svc.Name] && svc.Spec.Service == nil && svc.Labels[automanagedLabel] == "true" {
			p.remove = append(p.remove, svc.Name)
		}
	}
	return p
}
