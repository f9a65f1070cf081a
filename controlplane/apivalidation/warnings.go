package apivalidation

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1api "k8s.io/api/admissionregistration/v1"
	appsv1api "k8s.io/api/apps/v1"
	batchv1api "k8s.io/api/batch/v1"
	corev1api "k8s.io/api/core/v1"
	nodev1api "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobutil "k8s.io/kubernetes/pkg/api/job"
	pvcutil "k8s.io/kubernetes/pkg/api/persistentvolumeclaim"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	serviceutil "k8s.io/kubernetes/pkg/api/service"
	"k8s.io/kubernetes/pkg/apis/apps"
	"k8s.io/kubernetes/pkg/apis/batch"
	"k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
)

// The warnings below are those of upstream's strategies
// (pkg/registry/<group>/<kind>/strategy.go WarningsOnCreate and
// WarningsOnUpdate): deprecated or surprising fields, sent back to the
// client as Warning headers (kubectl prints "Warning: ..."). Kinds whose
// strategies warn through unexported helpers (nodes, secrets) have none
// here.

var (
	templatePath    = field.NewPath("spec", "template")
	jobTemplatePath = field.NewPath("spec", "jobTemplate", "spec")
)

// Warns reports whether upstream's strategy for obj's kind has warnings.
// Kinds without any get no warning hooks, so their creates and updates
// (Leases, Events, EndpointSlices: the busiest writes) are not converted
// to the internal types a second time for nothing.
func Warns(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1api.Pod, *corev1api.PodTemplate, *corev1api.ReplicationController, *corev1api.Service,
		*corev1api.PersistentVolumeClaim, *corev1api.ResourceQuota, *appsv1api.Deployment, *appsv1api.ReplicaSet, *appsv1api.DaemonSet,
		*appsv1api.StatefulSet, *batchv1api.Job, *batchv1api.CronJob,
		*admissionregistrationv1api.MutatingWebhookConfiguration, *admissionregistrationv1api.ValidatingWebhookConfiguration,
		*nodev1api.RuntimeClass:
		return true
	}
	return false
}

// WarningsOnCreate returns upstream's warnings for creating obj, a valid
// object after defaulting.
func (v *Validator) WarningsOnCreate(obj runtime.Object) []string {
	in, err := v.toInternal(obj)
	if err != nil {
		return nil
	}
	ctx := context.Background()
	if warnings, ok := webhookWarnings(ctx, in, nil); ok {
		return warnings
	}
	if warnings, ok := nodeGroupWarnings(in); ok {
		return warnings
	}
	switch o := in.(type) {
	case *core.Pod:
		return append(dnsLabelWarning(o.Name, "the Pod's hostname"), podutil.GetWarningsForPod(ctx, o, nil)...)
	case *core.PodTemplate:
		return podutil.GetWarningsForPodTemplate(ctx, field.NewPath("template"), &o.Template, nil)
	case *core.ReplicationController:
		return append(dnsLabelWarning(o.Name, podNames), podutil.GetWarningsForPodTemplate(ctx, templatePath, o.Spec.Template, nil)...)
	case *core.Service:
		return serviceutil.GetWarningsForService(o, nil)
	case *core.PersistentVolumeClaim:
		return pvcutil.GetWarningsForPersistentVolumeClaim(o)
	case *core.ResourceQuota:
		// Requests above limits (requests.cpu over limits.cpu, ...); its
		// strategy does not warn on updates.
		return resourcequota.Strategy.WarningsOnCreate(ctx, o)
	case *apps.Deployment:
		return append(dnsLabelWarning(o.Name, podNames), podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, nil)...)
	case *apps.ReplicaSet:
		return append(dnsLabelWarning(o.Name, podNames), podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, nil)...)
	case *apps.DaemonSet:
		return podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, nil)
	case *apps.StatefulSet:
		return statefulSetWarnings(ctx, o, nil)
	case *batch.Job:
		return append(dnsLabelWarning(o.Name, podNames), jobutil.WarningsForJobSpec(ctx, field.NewPath("spec"), &o.Spec, nil)...)
	case *batch.CronJob:
		return append(dnsLabelWarning(o.Name, podNames), jobutil.WarningsForJobSpec(ctx, jobTemplatePath, &o.Spec.JobTemplate.Spec, nil)...)
	}
	return nil
}

// WarningsOnUpdate returns upstream's warnings for an update of the main
// resource from old to obj (valid, generation already bumped): template
// warnings only when the spec changed, as upstream's strategies do.
func (v *Validator) WarningsOnUpdate(obj, old runtime.Object) []string {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return nil
	}
	ctx := context.Background()
	if warnings, ok := webhookWarnings(ctx, in, oldIn); ok {
		return warnings
	}
	if warnings, ok := nodeGroupWarnings(in); ok {
		return warnings
	}
	switch o := in.(type) {
	case *core.PodTemplate:
		oldT := oldIn.(*core.PodTemplate)
		if o.Generation != oldT.Generation {
			return podutil.GetWarningsForPodTemplate(ctx, field.NewPath("template"), &o.Template, &oldT.Template)
		}
	case *core.ReplicationController:
		oldRC := oldIn.(*core.ReplicationController)
		if o.Generation != oldRC.Generation {
			return podutil.GetWarningsForPodTemplate(ctx, templatePath, o.Spec.Template, oldRC.Spec.Template)
		}
	case *core.Service:
		return serviceutil.GetWarningsForService(o, oldIn.(*core.Service))
	case *apps.Deployment:
		oldD := oldIn.(*apps.Deployment)
		if o.Generation != oldD.Generation {
			return podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, &oldD.Spec.Template)
		}
	case *apps.ReplicaSet:
		oldRS := oldIn.(*apps.ReplicaSet)
		if o.Generation != oldRS.Generation {
			return podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, &oldRS.Spec.Template)
		}
	case *apps.DaemonSet:
		oldDS := oldIn.(*apps.DaemonSet)
		if o.Spec.TemplateGeneration != oldDS.Spec.TemplateGeneration {
			return podutil.GetWarningsForPodTemplate(ctx, templatePath, &o.Spec.Template, &oldDS.Spec.Template)
		}
	case *apps.StatefulSet:
		return statefulSetWarnings(ctx, o, oldIn.(*apps.StatefulSet))
	case *batch.Job:
		oldJob := oldIn.(*batch.Job)
		if o.Generation != oldJob.Generation {
			return jobutil.WarningsForJobSpec(ctx, field.NewPath("spec"), &o.Spec, &oldJob.Spec)
		}
	case *batch.CronJob:
		return cronJobUpdateWarnings(ctx, o, oldIn.(*batch.CronJob))
	}
	return nil
}

const podNames = "Pod names and hostnames"

// dnsLabelWarning is upstream's warning for a name that is valid but not
// a DNS label, for kinds whose name ends up in hostnames.
func dnsLabelWarning(name, usedIn string) []string {
	msgs := utilvalidation.IsDNS1123Label(name)
	if len(msgs) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("metadata.name: this is used in %s, which can result in surprising behavior; a DNS label is recommended: %v", usedIn, msgs)}
}

func statefulSetWarnings(ctx context.Context, ss, old *apps.StatefulSet) []string {
	var warnings []string
	pvcPath := field.NewPath("spec", "volumeClaimTemplates")
	if old == nil {
		warnings = podutil.GetWarningsForPodTemplate(ctx, templatePath, &ss.Spec.Template, nil)
	} else if ss.Generation != old.Generation {
		warnings = podutil.GetWarningsForPodTemplate(ctx, templatePath, &ss.Spec.Template, &old.Spec.Template)
	}
	for i, pvc := range ss.Spec.VolumeClaimTemplates {
		p := pvcPath.Index(i)
		if old != nil {
			p = p.Child("Spec") // sic: upstream's update path
		}
		warnings = append(warnings, pvcutil.GetWarningsForPersistentVolumeClaimSpec(p, pvc.Spec)...)
	}
	if ss.Spec.RevisionHistoryLimit != nil && *ss.Spec.RevisionHistoryLimit < 0 {
		warnings = append(warnings, "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended")
	}
	return warnings
}

func cronJobUpdateWarnings(ctx context.Context, cj, old *batch.CronJob) []string {
	var warnings []string
	if cj.Generation != old.Generation {
		warnings = jobutil.WarningsForJobSpec(ctx, jobTemplatePath, &cj.Spec.JobTemplate.Spec, &old.Spec.JobTemplate.Spec)
	}
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		warnings = append(warnings, fmt.Sprintf("cannot use TZ or CRON_TZ in %s, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
			field.NewPath("spec", "spec", "schedule")))
	}
	return warnings
}
