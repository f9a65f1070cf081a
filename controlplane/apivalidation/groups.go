package apivalidation

import (
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	"k8s.io/kubernetes/pkg/apis/coordination"
	coordinationvalidation "k8s.io/kubernetes/pkg/apis/coordination/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/discovery"
	discoveryvalidation "k8s.io/kubernetes/pkg/apis/discovery/validation"
	"k8s.io/kubernetes/pkg/apis/policy"
	policyvalidation "k8s.io/kubernetes/pkg/apis/policy/validation"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	schedulingvalidation "k8s.io/kubernetes/pkg/apis/scheduling/validation"
	"k8s.io/kubernetes/pkg/apis/storage"
	storagevalidation "k8s.io/kubernetes/pkg/apis/storage/validation"
	"k8s.io/kubernetes/pkg/features"
)

// policyV1 is the version PodDisruptionBudget status is validated for.
func policyV1() schema.GroupVersion {
	return schema.GroupVersion{Group: policy.GroupName, Version: "v1"}
}

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
	case *apps.StatefulSet:
		setOpts := appsvalidation.StatefulSetValidationOptions{
			AllowStatefulSetRecreateStrategy: utilfeature.DefaultFeatureGate.Enabled(features.StatefulSetRecreateStrategy),
		}
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, nil)
		return appsvalidation.ValidateStatefulSet(o, setOpts, opts), true
	case *apps.DaemonSet:
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, nil)
		return appsvalidation.ValidateDaemonSet(o, opts), true
	case *apps.ControllerRevision:
		return appsvalidation.ValidateControllerRevisionCreate(o), true
	case *batch.Job:
		return batchvalidation.ValidateJobCreate(o, jobOptions(o, nil)), true
	case *batch.CronJob:
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.JobTemplate.Spec.Template, nil)
		return batchvalidation.ValidateCronJobCreate(o, opts), true
	case *policy.PodDisruptionBudget:
		return policyvalidation.ValidatePodDisruptionBudget(o, policyvalidation.PodDisruptionBudgetValidationOptions{}), true
	case *scheduling.PriorityClass:
		return schedulingvalidation.ValidatePriorityClass(o), true
	case *coordination.Lease:
		return coordinationvalidation.ValidateLease(o), true
	case *discovery.EndpointSlice:
		return discoveryvalidation.ValidateEndpointSliceCreate(o), true
	case *storage.VolumeAttachment:
		return storagevalidation.ValidateVolumeAttachment(o), true
	case *storage.CSIDriver:
		return storagevalidation.ValidateCSIDriver(o), true
	case *storage.StorageClass:
		return storagevalidation.ValidateStorageClass(o), true
	case *storage.CSINode:
		return storagevalidation.ValidateCSINode(o), true
	case *storage.CSIStorageCapacity:
		return storagevalidation.ValidateCSIStorageCapacity(o, storagevalidation.CSIStorageCapacityValidateOptions{}), true
	}
	return nil, false
}

// validateGroupsUpdate runs the update validation of upstream's strategies
// for the served kinds outside the core group.
func validateGroupsUpdate(obj, old runtime.Object) (field.ErrorList, bool) {
	if errs, ok := validateAppsUpdate(obj, old); ok {
		return errs, true
	}
	switch o := obj.(type) {
	case *batch.Job:
		oldJob := old.(*batch.Job)
		return batchvalidation.ValidateJobUpdate(o, oldJob, jobOptions(o, oldJob)), true
	case *batch.CronJob:
		oldCJ := old.(*batch.CronJob)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.JobTemplate.Spec.Template, &oldCJ.Spec.JobTemplate.Spec.Template)
		return batchvalidation.ValidateCronJobUpdate(o, oldCJ, opts), true
	case *policy.PodDisruptionBudget:
		oldPDB := old.(*policy.PodDisruptionBudget)
		opts := policyvalidation.PodDisruptionBudgetValidationOptions{
			AllowInvalidLabelValueInSelector: oldPDB.Spec.Selector != nil &&
				len(metav1validation.ValidateLabelSelector(oldPDB.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0,
		}
		return policyvalidation.ValidatePodDisruptionBudget(o, opts), true
	case *scheduling.PriorityClass:
		return schedulingvalidation.ValidatePriorityClassUpdate(o, old.(*scheduling.PriorityClass)), true
	case *coordination.Lease:
		return coordinationvalidation.ValidateLeaseUpdate(o, old.(*coordination.Lease)), true
	case *discovery.EndpointSlice:
		return discoveryvalidation.ValidateEndpointSliceUpdate(o, old.(*discovery.EndpointSlice)), true
	case *storage.VolumeAttachment:
		return storagevalidation.ValidateVolumeAttachmentUpdate(o, old.(*storage.VolumeAttachment)), true
	case *storage.CSIDriver:
		return storagevalidation.ValidateCSIDriverUpdate(o, old.(*storage.CSIDriver)), true
	case *storage.StorageClass:
		return storagevalidation.ValidateStorageClassUpdate(o, old.(*storage.StorageClass)), true
	case *storage.CSINode:
		return storagevalidation.ValidateCSINodeUpdate(o, old.(*storage.CSINode)), true
	case *storage.CSIStorageCapacity:
		return storagevalidation.ValidateCSIStorageCapacityUpdate(o, old.(*storage.CSIStorageCapacity)), true
	}
	return nil, false
}

// validateAppsUpdate runs the update validation of upstream's apps strategies.
func validateAppsUpdate(obj, old runtime.Object) (field.ErrorList, bool) {
	switch o := obj.(type) {
	case *apps.Deployment:
		oldD := old.(*apps.Deployment)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldD.Spec.Template)
		return appsvalidation.ValidateDeploymentUpdate(o, oldD, opts), true
	case *apps.ReplicaSet:
		oldRS := old.(*apps.ReplicaSet)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldRS.Spec.Template)
		return appsvalidation.ValidateReplicaSetUpdate(o, oldRS, opts), true
	case *apps.StatefulSet:
		oldSS := old.(*apps.StatefulSet)
		setOpts := appsvalidation.StatefulSetValidationOptions{
			AllowInvalidServiceName:          true,
			SkipValidateVolumeClaimTemplates: true,
			AllowStatefulSetRecreateStrategy: utilfeature.DefaultFeatureGate.Enabled(features.StatefulSetRecreateStrategy) ||
				oldSS.Spec.UpdateStrategy.Type == apps.RecreateStatefulSetStrategyType,
		}
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldSS.Spec.Template)
		return appsvalidation.ValidateStatefulSetUpdate(o, oldSS, setOpts, opts), true
	case *apps.DaemonSet:
		oldDS := old.(*apps.DaemonSet)
		opts := podutil.GetValidationOptionsFromPodTemplate(&o.Spec.Template, &oldDS.Spec.Template)
		opts.AllowInvalidLabelValueInSelector = opts.AllowInvalidLabelValueInSelector || metav1validation.LabelSelectorHasInvalidLabelValue(oldDS.Spec.Selector)
		return appsvalidation.ValidateDaemonSetUpdate(o, oldDS, opts), true
	case *apps.ControllerRevision:
		return appsvalidation.ValidateControllerRevisionUpdate(o, old.(*apps.ControllerRevision)), true
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
	case *core.PersistentVolumeClaim:
		oldPVC := old.(*core.PersistentVolumeClaim)
		opts := corevalidation.ValidationOptionsForPersistentVolumeClaim(o, oldPVC)
		return corevalidation.ValidatePersistentVolumeClaimStatusUpdate(o, oldPVC, opts), true
	case *core.PersistentVolume:
		return corevalidation.ValidatePersistentVolumeStatusUpdate(o, old.(*core.PersistentVolume)), true
	case *core.ResourceQuota:
		return corevalidation.ValidateResourceQuotaStatusUpdate(o, old.(*core.ResourceQuota)), true
	case *storage.VolumeAttachment:
		// Upstream's status strategy validates as its main strategy does.
		return storagevalidation.ValidateVolumeAttachmentUpdate(o, old.(*storage.VolumeAttachment)), true
	case *core.ReplicationController:
		return corevalidation.ValidateReplicationControllerStatusUpdate(o, old.(*core.ReplicationController)), true
	case *apps.Deployment:
		return appsvalidation.ValidateDeploymentStatusUpdate(o, old.(*apps.Deployment)), true
	case *apps.ReplicaSet:
		return appsvalidation.ValidateReplicaSetStatusUpdate(o, old.(*apps.ReplicaSet)), true
	case *apps.StatefulSet:
		return appsvalidation.ValidateStatefulSetStatusUpdate(o, old.(*apps.StatefulSet)), true
	case *apps.DaemonSet:
		return appsvalidation.ValidateDaemonSetStatusUpdate(o, old.(*apps.DaemonSet)), true
	case *batch.Job:
		oldJob := old.(*batch.Job)
		return batchvalidation.ValidateJobUpdateStatus(o, oldJob, jobStatusOptions(o, oldJob)), true
	case *batch.CronJob:
		// Upstream's cron job status strategy validates nothing.
		return nil, true
	case *policy.PodDisruptionBudget:
		return policyvalidation.ValidatePodDisruptionBudgetStatusUpdate(o.Status, old.(*policy.PodDisruptionBudget).Status,
			field.NewPath("status"), policyV1()), true
	}
	return nil, false
}
