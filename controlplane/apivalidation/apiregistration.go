package apivalidation

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationvalidation "k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"
)

// validateAPIRegistration runs kube-aggregator's APIService validation
// (its strategy's Validate, ValidateUpdate and the status strategy's);
// old is nil for a create.
func validateAPIRegistration(obj, old runtime.Object, status bool) (field.ErrorList, bool) {
	svc, ok := obj.(*apiregistration.APIService)
	if !ok {
		return nil, false
	}
	ctx := context.Background()
	switch {
	case old == nil:
		return apiregistrationvalidation.ValidateAPIService(ctx, svc), true
	case status:
		return apiregistrationvalidation.ValidateAPIServiceStatusUpdate(ctx, svc, old.(*apiregistration.APIService)), true
	default:
		return apiregistrationvalidation.ValidateAPIServiceUpdate(ctx, svc, old.(*apiregistration.APIService)), true
	}
}
