package registry

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

func jobColumns() []metav1.TableColumnDefinition {
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Status", Type: "string", Description: "Status of the job."},
		{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
		{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
		ageColumn(),
	}, templateColumns(batchv1.JobSpec{}.SwaggerDoc()["selector"])...)
}

func jobRow(j *batchv1.Job, now time.Time) []interface{} {
	var completions string
	switch {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	var took string
	switch {
	case j.Status.StartTime == nil:
	case j.Status.CompletionTime == nil:
		took = duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	default:
		took = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
	}
	names, images := containerCells(j.Spec.Template.Spec.Containers)
	return []interface{}{
		j.Name, jobStatus(j), completions, took, age(j.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(j.Spec.Selector),
	}
}

// jobStatus is upstream's STATUS cell: the first true condition in
// upstream's order of precedence, Terminating while deleted, else Running.
func jobStatus(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func cronJobColumns() []metav1.TableColumnDefinition {
	spec, status := batchv1.CronJobSpec{}.SwaggerDoc(), batchv1.CronJobStatus{}.SwaggerDoc()
	return append([]metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Schedule", Type: "string", Description: spec["schedule"]},
		{Name: "Timezone", Type: "string", Description: spec["timeZone"]},
		{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
		{Name: "Active", Type: "integer", Description: status["active"]},
		{Name: "Last Schedule", Type: "string", Description: status["lastScheduleTime"]},
		ageColumn(),
	}, templateColumns(batchv1.JobSpec{}.SwaggerDoc()["selector"])...)
}

func cronJobRow(cj *batchv1.CronJob, now time.Time) []interface{} {
	last := "<none>"
	if cj.Status.LastScheduleTime != nil {
		last = age(*cj.Status.LastScheduleTime, now)
	}
	timeZone := "<none>"
	if cj.Spec.TimeZone != nil {
		timeZone = *cj.Spec.TimeZone
	}
	suspend := "<unset>"
	if cj.Spec.Suspend != nil {
		suspend = "False"
		if *cj.Spec.Suspend {
			suspend = "True"
		}
	}
	template := cj.Spec.JobTemplate.Spec
	names, images := containerCells(template.Template.Spec.Containers)
	return []interface{}{
		cj.Name, cj.Spec.Schedule, timeZone, suspend, int64(len(cj.Status.Active)), last, age(cj.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(template.Selector),
	}
}
