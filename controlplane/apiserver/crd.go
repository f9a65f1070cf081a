package apiserver

import (
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// markCRDForDeletion is what upstream's CustomResourceDefinition storage
// does on the first delete of a CRD: it adds the
// customresourcecleanup.apiextensions.k8s.io finalizer and the Terminating
// condition, so that the CRD stays, still serving its instances (but no
// creates), until the finalizer controller has deleted every instance.
func markCRDForDeletion(crd *apiextensionsv1.CustomResourceDefinition) {
	if crd.DeletionTimestamp != nil {
		return
	}
	if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	}
	apiextensionshelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
}
