package apivalidation

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"
)

// The options below are those of upstream's job strategy
// (pkg/registry/batch/job/strategy.go), which keeps them unexported.

// jobOptions are the JobValidationOptions for a create (old nil) or an
// update of the main resource.
func jobOptions(job, old *batch.Job) batchvalidation.JobValidationOptions {
	var oldTemplate *core.PodTemplateSpec
	if old != nil {
		oldTemplate = &old.Spec.Template
	}
	opts := batchvalidation.JobValidationOptions{
		PodValidationOptions:  podutil.GetValidationOptionsFromPodTemplate(&job.Spec.Template, oldTemplate),
		RequirePrefixedLabels: true,
	}
	if old == nil {
		return opts
	}
	opts.AllowInvalidLabelValueInSelector = opts.AllowInvalidLabelValueInSelector || metav1validation.LabelSelectorHasInvalidLabelValue(old.Spec.Selector)
	// Node affinity, node selector and tolerations may change only while a
	// suspended job has not started.
	opts.AllowMutableSchedulingDirectives = ptr.Deref(old.Spec.Suspend, false) && old.Status.StartTime == nil
	mutableTemplate := jobTemplateMutable(old)
	if utilfeature.DefaultFeatureGate.Enabled(features.MutablePodResourcesForSuspendedJobs) {
		opts.AllowMutablePodResources = mutableTemplate
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.MutableSchedulingDirectivesForSuspendedJobs) {
		opts.AllowMutableSchedulingDirectives = mutableTemplate
	}
	_, hadJobName := old.Spec.Template.Labels[batch.JobNameLabel]
	_, hadControllerUID := old.Spec.Template.Labels[batch.ControllerUidLabel]
	opts.RequirePrefixedLabels = hadJobName && hadControllerUID
	return opts
}

func jobTemplateMutable(job *batch.Job) bool {
	suspended := ptr.Deref(job.Spec.Suspend, false)
	notStarted := job.Status.StartTime == nil
	hasSuspended := batchvalidation.IsConditionTrue(job.Status.Conditions, batch.JobSuspended)
	return suspended && (notStarted || hasSuspended) && job.Status.Active == 0
}

// jobStatusOptions are the JobStatusValidationOptions of upstream's job
// status strategy: a rule is enforced only when the fields it checks change.
func jobStatusOptions(job, old *batch.Job) batchvalidation.JobStatusValidationOptions {
	if !utilfeature.DefaultFeatureGate.Enabled(features.JobManagedBy) {
		return batchvalidation.JobStatusValidationOptions{}
	}
	isIndexed := ptr.Deref(job.Spec.CompletionMode, batch.NonIndexedCompletion) == batch.IndexedCompletion
	conditionChanged := func(t batch.JobConditionType) bool {
		return batchvalidation.IsConditionTrue(old.Status.Conditions, t) != batchvalidation.IsConditionTrue(job.Status.Conditions, t)
	}
	finished := batchvalidation.IsJobFinished(old) != batchvalidation.IsJobFinished(job)
	complete := batchvalidation.IsJobComplete(old) != batchvalidation.IsJobComplete(job)
	failed := batchvalidation.IsJobFailed(old) != batchvalidation.IsJobFailed(job)
	failureTarget := conditionChanged(batch.JobFailureTarget)
	successCriteriaMet := conditionChanged(batch.JobSuccessCriteriaMet)
	completedIndexes := old.Status.CompletedIndexes != job.Status.CompletedIndexes
	failedIndexes := !ptr.Equal(old.Status.FailedIndexes, job.Status.FailedIndexes)
	active := old.Status.Active != job.Status.Active
	startTime := !ptr.Equal(old.Status.StartTime, job.Status.StartTime)
	completionTime := !ptr.Equal(old.Status.CompletionTime, job.Status.CompletionTime)
	uncounted := !equality.Semantic.DeepEqual(old.Status.UncountedTerminatedPods, job.Status.UncountedTerminatedPods)
	ready := !ptr.Equal(old.Status.Ready, job.Status.Ready)
	terminating := !ptr.Equal(old.Status.Terminating, job.Status.Terminating)
	suspendedWithZeroCompletions := ptr.Equal(job.Spec.Suspend, ptr.To(true)) && ptr.Equal(job.Spec.Completions, ptr.To[int32](0))
	resuming := batchvalidation.IsConditionTrue(old.Status.Conditions, batch.JobSuspended) &&
		batchvalidation.IsConditionFalse(job.Status.Conditions, batch.JobSuspended)
	return batchvalidation.JobStatusValidationOptions{
		RejectDecreasingSucceededCounter:             !isIndexed || !ptr.Equal(job.Spec.Completions, job.Spec.Parallelism),
		RejectDecreasingFailedCounter:                true,
		RejectDisablingTerminalCondition:             true,
		RejectInvalidCompletedIndexes:                completedIndexes,
		RejectInvalidFailedIndexes:                   failedIndexes,
		RejectCompletedIndexesForNonIndexedJob:       completedIndexes,
		RejectFailedIndexesForNoBackoffLimitPerIndex: failedIndexes,
		RejectFailedIndexesOverlappingCompleted:      failedIndexes || completedIndexes,
		RejectFailedJobWithoutFailureTarget:          failed || failedIndexes,
		RejectCompleteJobWithoutSuccessCriteriaMet:   complete || successCriteriaMet,
		RejectFinishedJobWithActivePods:              finished || active,
		RejectFinishedJobWithoutStartTime:            (finished || startTime) && !suspendedWithZeroCompletions,
		RejectFinishedJobWithUncountedTerminatedPods: finished || uncounted,
		RejectStartTimeUpdateForUnsuspendedJob:       startTime && !resuming,
		RejectCompletionTimeBeforeStartTime:          startTime || completionTime,
		RejectMutatingCompletionTime:                 true,
		RejectNotCompleteJobWithCompletionTime:       complete || completionTime,
		RejectCompleteJobWithoutCompletionTime:       complete || completionTime,
		RejectCompleteJobWithFailedCondition:         complete || failed,
		RejectCompleteJobWithFailureTargetCondition:  complete || failureTarget,
		RejectMoreReadyThanActivePods:                ready || active,
		RejectFinishedJobWithTerminatingPods:         finished || terminating,
	}
}
