package registry

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// The labels upstream's job strategy puts on a job's pod template besides
// batchv1.JobNameLabel and batchv1.ControllerUidLabel (k8s.io/api does not
// define the legacy ones).
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

func jobResource() *Resource {
	return &Resource{
		GroupVersion:    batchv1.SchemeGroupVersion,
		Name:            "jobs",
		Kind:            "Job",
		ListKind:        "JobList",
		Namespaced:      true,
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &batchv1.Job{} },
		NewList:         func() runtime.Object { return &batchv1.JobList{} },
		Subresources:    []string{"status"},
		TrackGeneration: true,

		PrepareForCreate: mutate(prepareJobForCreate),
		PrepareForUpdate: mutate2(func(j, old *batchv1.Job) { j.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(j, old *batchv1.Job) {
			j.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&j.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(j, old *batchv1.Job) bool { return !apiequality.Semantic.DeepEqual(j.Spec, old.Spec) }),
		Fields: selectable(func(j *batchv1.Job) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
		}),
		Columns: jobColumns(),
		Row:     row(jobRow),
	}
}

// prepareJobForCreate resets the status and, unless spec.manualSelector is
// set, labels the pod template with the job's name and uid and selects the
// uid label, as upstream's job strategy does (the uid is set before this
// hook runs). Labels the user set are kept; validation rejects conflicts.
func prepareJobForCreate(j *batchv1.Job) {
	j.Status = batchv1.JobStatus{}
	if ptr.Deref(j.Spec.ManualSelector, false) {
		return
	}
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	setIfMissing := func(m map[string]string, key, value string) {
		if _, ok := m[key]; !ok {
			m[key] = value
		}
	}
	labels := j.Spec.Template.Labels
	setIfMissing(labels, legacyJobNameLabel, j.Name)
	setIfMissing(labels, batchv1.JobNameLabel, j.Name)
	setIfMissing(labels, legacyControllerUIDLabel, string(j.UID))
	setIfMissing(labels, batchv1.ControllerUidLabel, string(j.UID))
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	setIfMissing(j.Spec.Selector.MatchLabels, batchv1.ControllerUidLabel, string(j.UID))
}

func cronJobResource() *Resource {
	return &Resource{
		GroupVersion:    batchv1.SchemeGroupVersion,
		Name:            "cronjobs",
		Kind:            "CronJob",
		ListKind:        "CronJobList",
		Namespaced:      true,
		ShortNames:      []string{"cj"},
		Categories:      []string{"all"},
		Verbs:           allVerbs(),
		New:             func() runtime.Object { return &batchv1.CronJob{} },
		NewList:         func() runtime.Object { return &batchv1.CronJobList{} },
		Subresources:    []string{"status"},
		TrackGeneration: true,

		PrepareForCreate: mutate(func(cj *batchv1.CronJob) { cj.Status = batchv1.CronJobStatus{} }),
		PrepareForUpdate: mutate2(func(cj, old *batchv1.CronJob) { cj.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(func(cj, old *batchv1.CronJob) {
			cj.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&cj.ObjectMeta, &old.ObjectMeta)
		}),

		SpecChanged: changed(func(cj, old *batchv1.CronJob) bool { return !apiequality.Semantic.DeepEqual(cj.Spec, old.Spec) }),
		Columns:     cronJobColumns(),
		Row:         row(cronJobRow),
	}
}
