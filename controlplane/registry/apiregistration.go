package registry

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
)

// apiServiceResource serves apiregistration.k8s.io/v1 APIServices:
// cluster-scoped, one per group-version, either Local (served by this
// API server) or naming the Service of an extension API server the
// aggregation layer proxies to. Upstream's strategy (kube-aggregator's
// pkg/registry/apiservice): status is reset on create, where a local
// APIService is Available at once; the main resource keeps the status,
// the status subresource keeps spec, labels, annotations, finalizers and
// owner references.
func apiServiceResource() *Resource {
	return &Resource{
		GroupVersion: apiregistrationv1.SchemeGroupVersion,
		Name:         "apiservices",
		Kind:         "APIService",
		ListKind:     "APIServiceList",
		Categories:   []string{"api-extensions"},
		Verbs:        allVerbs(),
		Subresources: []string{"status"},
		New:          func() runtime.Object { return &apiregistrationv1.APIService{} },
		NewList:      func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
		PrepareForCreate: func(obj runtime.Object) {
			svc := obj.(*apiregistrationv1.APIService)
			svc.Status = apiregistrationv1.APIServiceStatus{}
			if svc.Spec.Service == nil {
				helper.SetAPIServiceCondition(svc, helper.NewLocalAvailableAPIServiceCondition())
			}
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			obj.(*apiregistrationv1.APIService).Status = old.(*apiregistrationv1.APIService).Status
		},
		PrepareForStatusUpdate: func(obj, old runtime.Object) {
			svc, prev := obj.(*apiregistrationv1.APIService), old.(*apiregistrationv1.APIService)
			svc.Spec = prev.Spec
			svc.Labels, svc.Annotations = prev.Labels, prev.Annotations
			svc.Finalizers, svc.OwnerReferences = prev.Finalizers, prev.OwnerReferences
		},
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
			{Name: "Available", Type: "string", Description: "Whether this service is available."},
			ageColumn(),
		},
		Row: row(func(svc *apiregistrationv1.APIService, now time.Time) []interface{} {
			return []interface{}{svc.Name, apiServiceTarget(svc), apiServiceAvailable(svc), age(svc.CreationTimestamp, now)}
		}),
	}
}

// apiServiceTarget is upstream's SERVICE column: Local or namespace/name.
func apiServiceTarget(svc *apiregistrationv1.APIService) string {
	if svc.Spec.Service == nil {
		return "Local"
	}
	return svc.Spec.Service.Namespace + "/" + svc.Spec.Service.Name
}

// apiServiceAvailable is upstream's AVAILABLE column: True, or the
// status with its reason ("False (MissingEndpoints)"), or Unknown.
func apiServiceAvailable(svc *apiregistrationv1.APIService) string {
	c := helper.GetAPIServiceConditionByType(svc, apiregistrationv1.Available)
	switch {
	case c == nil:
		return string(apiregistrationv1.ConditionUnknown)
	case c.Status == apiregistrationv1.ConditionTrue || c.Reason == "":
		return string(c.Status)
	default:
		return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
	}
}
