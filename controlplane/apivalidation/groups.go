package apivalidation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/coordination"
	coordinationvalidation "k8s.io/kubernetes/pkg/apis/coordination/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/discovery"
	discoveryvalidation "k8s.io/kubernetes/pkg/apis/discovery/validation"
)

// validateGroupsCreate runs the create validation of upstream's strategies
// for the served kinds outside the core group.
func validateGroupsCreate(obj runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *apps.Deployment:
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, nil)
		return appsvalidation.ValidateDeployment(o, opts), true
	case *apps.ReplicaSet:
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, nil)
		return appsvalidation.ValidateReplicaSet(o, opts), true
	case *coordination.Lease:
		return coordinationvalidation.ValidateLease(o), true
	case *discovery.EndpointSlice:
		return discoveryvalidation.ValidateEndpointSliceCreate(o), true
	}
	return nil, false
}

// validateGroupsUpdate runs the update validation of upstream's strategies
// for the served kinds outside the core group.
func validateGroupsUpdate(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *apps.Deployment:
		oldD := old.(*apps.Deployment)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldD.Spec.Template)
		return appsvalidation.ValidateDeploymentUpdate(o, oldD, opts), true
	case *apps.ReplicaSet:
		oldRS := old.(*apps.ReplicaSet)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldRS.Spec.Template)
		return appsvalidation.ValidateReplicaSetUpdate(o, oldRS, opts), true
	case *coordination.Lease:
		return coordinationvalidation.ValidateLeaseUpdate(o, old.(*coordination.Lease)), true
	case *discovery.EndpointSlice:
		return discoveryvalidation.ValidateEndpointSliceUpdate(o, old.(*discovery.EndpointSlice)), true
	}
	return nil, false
}

// validateStatusUpdate runs the status strategies' validation of every
// served kind that has a status subresource.
func validateStatusUpdate(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *core.Pod:
		oldPod := old.(*core.Pod)
		return corevalidation.ValidatePodStatusUpdate(o, oldPod, podOptions(o, oldPod)), true
	case *core.Service:
		return corevalidation.ValidateServiceStatusUpdate(o, old.(*core.Service)), true
	case *core.Node:
		// Upstream's node status strategy validates with ValidateNodeUpdate.
		return corevalidation.ValidateNodeUpdate(o, old.(*core.Node)), true
	case *core.Namespace:
		return corevalidation.ValidateNamespaceStatusUpdate(o, old.(*core.Namespace)), true
	case *apps.Deployment:
		return appsvalidation.ValidateDeploymentStatusUpdate(o, old.(*apps.Deployment)), true
	case *apps.ReplicaSet:
		return appsvalidation.ValidateReplicaSetStatusUpdate(o, old.(*apps.ReplicaSet)), true
	}
	return nil, false
}
