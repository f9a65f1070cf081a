// Package quota is upstream's quota configuration (k8s.io/kubernetes
// pkg/quota/v1) for the kinds the control plane serves: what the
// ResourceQuota admission plugin charges and the quota controller counts.
package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	quotacore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"
)

// Configuration is upstream's quotainstall configuration, rebuilt: the
// pod, Service and claim evaluators, object counts for every other kind,
// and upstream's ignored resources. Upstream's constructors also build
// the DRA claim evaluator, whose informers would wait forever for
// resource.k8s.io, which is not served. listers is nil for admission,
// which reads live objects; the quota controller passes its informers'.
func Configuration(listers quota.ListerForResourceFunc, f informers.SharedInformerFactory) (quota.Configuration, error) {
	core := func(gvr schema.GroupVersionResource) bool { return gvr.Group == "" }
	evaluators, err := quotacore.NewEvaluators(listers, f, core)
	if err != nil {
		return nil, fmt.Errorf("quota evaluators: %w", err)
	}
	return generic.NewConfiguration(evaluators, ignored), nil
}

// ignored is upstream's quotainstall.DefaultIgnoredResources: the kinds
// that are not stored (reviews, bindings) and events. That package is
// not imported: it brings k8s.io/apiserver's storage backends (etcd3, the
// egress selector) into the binary for one resource-config type.
var ignored = map[schema.GroupResource]struct{}{
	{Resource: "bindings"}:                                                 {},
	{Resource: "componentstatuses"}:                                        {},
	{Resource: "events"}:                                                   {},
	{Group: "events.k8s.io", Resource: "events"}:                           {},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
}

// UpdateFilter is upstream's quotainstall.DefaultUpdateFilter, rebuilt
// for the same reason: an update changes usage when a pod's resources,
// its terminating scope or whether it counts at all changed, a Service's
// quota type changed, or a claim's request needs replenishing.
func UpdateFilter(resource schema.GroupVersionResource, oldObj, newObj interface{}) bool {
	switch resource.GroupResource() {
	case schema.GroupResource{Resource: "pods"}:
		oldPod, newPod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
		if resourcesChanged(oldPod.Status.ContainerStatuses, newPod.Status.ContainerStatuses) ||
			resourcesChanged(oldPod.Status.InitContainerStatuses, newPod.Status.InitContainerStatuses) {
			return true
		}
		if quotacore.IsTerminating(oldPod) != quotacore.IsTerminating(newPod) {
			return true
		}
		return quotacore.QuotaV1Pod(oldPod, clock.RealClock{}) && !quotacore.QuotaV1Pod(newPod, clock.RealClock{})
	case schema.GroupResource{Resource: "services"}:
		return quotacore.GetQuotaServiceType(oldObj.(*corev1.Service)) != quotacore.GetQuotaServiceType(newObj.(*corev1.Service))
	case schema.GroupResource{Resource: "persistentvolumeclaims"}:
		return quotacore.RequiresQuotaReplenish(newObj.(*corev1.PersistentVolumeClaim), oldObj.(*corev1.PersistentVolumeClaim))
	}
	return false
}

// resourcesChanged: a container of both lists reports other resources
// (an in-place resize took effect).
func resourcesChanged(old, cur []corev1.ContainerStatus) bool {
	for _, o := range old {
		for _, c := range cur {
			if c.Name == o.Name && !apiequality.Semantic.DeepEqual(o.Resources, c.Resources) {
				return true
			}
		}
	}
	return false
}
