package registry

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func piTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "pi", Image: "perl:5.34.0", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"}}},
	}}
}

func newJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: types.UID("0b6e1b1a-7f5c-4d0e-9d61-2f5e4f0c1a11")},
		Spec:       batchv1.JobSpec{Template: piTemplate()},
	}
}

func newCronJob() *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: piTemplate()},
		}},
	}
}

func TestBatchWorkloads(t *testing.T) {
	runWorkloadCases(t, []workloadCase{
		{
			resource: "jobs",
			valid:    func() runtime.Object { return newJob() },
			breakIt: func(o runtime.Object) {
				j := o.(*batchv1.Job)
				j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
				j.Spec.BackoffLimit = ptr.To(int32(-1))
			},
			want: []string{"FieldValueRequired spec.template.spec.restartPolicy", "FieldValueInvalid spec.backoffLimit"},
			defaulted: func(o runtime.Object) string {
				s := o.(*batchv1.Job).Spec
				if ptr.Deref(s.Completions, 0) != 1 || ptr.Deref(s.Parallelism, 0) != 1 || ptr.Deref(s.BackoffLimit, 0) != 6 ||
					!ptr.Equal(s.ManualSelector, ptr.To(false)) || !ptr.Equal(s.CompletionMode, ptr.To(batchv1.NonIndexedCompletion)) ||
					!ptr.Equal(s.Suspend, ptr.To(false)) {
					return "completions, parallelism, backoffLimit, manualSelector, completionMode or suspend"
				}
				return ""
			},
			setStatus:  func(o runtime.Object) { o.(*batchv1.Job).Status.Succeeded = 1 },
			hasStatus:  func(o runtime.Object) bool { return o.(*batchv1.Job).Status.Succeeded != 0 },
			changeSpec: func(o runtime.Object) { o.(*batchv1.Job).Spec.Suspend = ptr.To(true) },
		},
		{
			resource: "cronjobs",
			valid:    func() runtime.Object { return newCronJob() },
			breakIt:  func(o runtime.Object) { o.(*batchv1.CronJob).Spec.Schedule = "every minute" },
			want:     []string{"FieldValueInvalid spec.schedule"},
			defaulted: func(o runtime.Object) string {
				s := o.(*batchv1.CronJob).Spec
				if s.ConcurrencyPolicy != batchv1.AllowConcurrent || !ptr.Equal(s.Suspend, ptr.To(false)) ||
					ptr.Deref(s.SuccessfulJobsHistoryLimit, 0) != 3 || ptr.Deref(s.FailedJobsHistoryLimit, 0) != 1 {
					return "concurrencyPolicy, suspend or history limits"
				}
				return ""
			},
			setStatus: func(o runtime.Object) {
				o.(*batchv1.CronJob).Status.LastScheduleTime = &metav1.Time{Time: time.Unix(1, 0)}
			},
			hasStatus:  func(o runtime.Object) bool { return o.(*batchv1.CronJob).Status.LastScheduleTime != nil },
			changeSpec: func(o runtime.Object) { o.(*batchv1.CronJob).Spec.Schedule = "*/5 * * * *" },
		},
	})
}

func TestJobSelectorGenerated(t *testing.T) {
	r := resourceByName(t, "jobs")
	j := newJob()
	if errs := createErrors(r, j); len(errs) > 0 {
		t.Fatalf("create: %v", errs.ToAggregate())
	}
	uid := string(j.UID)
	want := map[string]string{"job-name": "pi", batchv1.JobNameLabel: "pi", "controller-uid": uid, batchv1.ControllerUidLabel: uid}
	if !reflect.DeepEqual(j.Spec.Template.Labels, want) {
		t.Errorf("template labels = %v", j.Spec.Template.Labels)
	}
	if sel := j.Spec.Selector.MatchLabels; !reflect.DeepEqual(sel, map[string]string{batchv1.ControllerUidLabel: uid}) {
		t.Errorf("selector = %v", sel)
	}

	// A manual selector is the user's; upstream requires it to match.
	manual := newJob()
	manual.Spec.ManualSelector = ptr.To(true)
	manual.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pi"}}
	assertErrors(t, createErrors(r, manual), []string{"FieldValueInvalid spec.template.metadata.labels"})
}

func TestBatchRows(t *testing.T) {
	now := time.Date(2025, 1, 3, 13, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-49 * time.Hour))
	j := newJob()
	j.CreationTimestamp = created
	j.Spec.Completions = ptr.To(int32(1))
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u"}}
	j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &metav1.Time{Time: now.Add(-2 * time.Minute)},
		CompletionTime: &metav1.Time{Time: now.Add(-time.Minute - 30*time.Second)},
		Conditions:     []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	want := []interface{}{"pi", "Complete", "1/1", "30s", "2d1h", "pi", "perl:5.34.0", "batch.kubernetes.io/controller-uid=u"}
	if got := jobRow(j, now); !reflect.DeepEqual(got, want) {
		t.Errorf("job row = %v\nwant %v", got, want)
	}
	j.Status = batchv1.JobStatus{StartTime: &metav1.Time{Time: now.Add(-3 * time.Minute)}}
	j.Spec.Completions, j.Spec.Parallelism = nil, ptr.To(int32(2))
	if got := jobRow(j, now)[1:4]; !reflect.DeepEqual(got, []interface{}{"Running", "0/1 of 2", "3m"}) {
		t.Errorf("running job cells = %v", got)
	}

	cj := newCronJob()
	cj.CreationTimestamp = created
	cj.Spec.Suspend = ptr.To(false)
	cj.Status.Active = []corev1.ObjectReference{{Name: "hello-1"}}
	cj.Status.LastScheduleTime = &metav1.Time{Time: now.Add(-40 * time.Second)}
	want = []interface{}{"hello", "* * * * *", "<none>", "False", int64(1), "40s", "2d1h", "pi", "perl:5.34.0", "<none>"}
	if got := cronJobRow(cj, now); !reflect.DeepEqual(got, want) {
		t.Errorf("cronjob row = %v\nwant %v", got, want)
	}
}
