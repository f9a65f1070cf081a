package registry

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/controlplane/apivalidation"
)

// All returns every resource the control plane serves, each freshly built
// (callers may modify what they get). Resources of the same group version
// are adjacent and ordered as upstream's discovery lists them.
func All() []*Resource {
	return AllWith(apivalidation.New())
}

// AllWith is All on the validator v, which the caller shares (its scheme
// is the largest thing the registry holds).
func AllWith(v *apivalidation.Validator) []*Resource {
	events := eventResource()
	hpa := horizontalPodAutoscalerResource()
	resources := []*Resource{
		configMapResource(),
		endpointsResource(),
		events,
		limitRangeResource(),
		namespaceResource(),
		nodeResource(),
		persistentVolumeClaimResource(),
		persistentVolumeResource(),
		podResource(),
		podTemplateResource(),
		replicationControllerResource(),
		resourceQuotaResource(),
		secretResource(),
		serviceAccountResource(),
		serviceResource(),
		controllerRevisionResource(),
		daemonSetResource(),
		deploymentResource(),
		replicaSetResource(),
		statefulSetResource(),
		horizontalPodAutoscalerV1Resource(hpa, v.Convert),
		hpa,
		cronJobResource(),
		jobResource(),
		leaseResource(),
		endpointSliceResource(),
		eventsV1Resource(events, v.Convert),
		podDisruptionBudgetResource(),
	}
	resources = append(resources, rbacResources()...)
	resources = append(resources, csiDriverResource(), volumeAttachmentResource(),
		storageClassResource(), csiNodeResource(), csiStorageCapacityResource())
	resources = append(resources, admissionRegistrationResources()...)
	resources = append(resources, flowControlResources()...)
	resources = append(resources,
		apiServiceResource(),
		priorityClassResource(),
		runtimeClassResource(),
		selfSubjectReviewResource(),
		tokenReviewResource(),
		certificateSigningRequestResource(),
	)
	resources = append(resources, accessReviewResources()...)
	for _, r := range resources {
		if !r.Review {
			useUpstream(r, v)
		}
	}
	// CustomResourceDefinitions have upstream's hooks of their own
	// (apiextensions has a scheme apart from v's).
	resources = append(resources, customResourceDefinitionResource(apivalidation.NewCRDs()))
	return resources
}

// useUpstream makes r default and validate with upstream's code: the v1
// defaulters run first, then r's own Default (the admission-time mutations
// and conversion aliases upstream applies outside its defaulters); every
// validation hook is upstream's strategy validation for the kind.
func useUpstream(r *Resource, v *apivalidation.Validator) {
	own := r.Default
	r.Default = func(obj runtime.Object) {
		v.Default(obj)
		if own != nil {
			own(obj)
		}
	}
	r.Validate = v.Validate
	r.ValidateUpdate = v.ValidateUpdate
	if apivalidation.Warns(r.New()) {
		r.WarningsOnCreate = v.WarningsOnCreate
		r.WarningsOnUpdate = v.WarningsOnUpdate
	}
	if r.HasSubresource("status") {
		r.ValidateStatusUpdate = v.ValidateStatusUpdate
	}
	if r.HasSubresource("finalize") {
		r.ValidateFinalizeUpdate = v.ValidateFinalizeUpdate
	}
	if r.HasSubresource("ephemeralcontainers") {
		r.ValidateEphemeralContainersUpdate = v.ValidateEphemeralContainersUpdate
	}
	if r.HasSubresource("approval") {
		r.ValidateApprovalUpdate = v.ValidateApprovalUpdate
	}
}
