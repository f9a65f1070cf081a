package registry

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/podresources"
)

func podResource(opts Options) *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "pods",
		Kind:         "Pod",
		ListKind:     "PodList",
		Namespaced:   true,
		ShortNames:   []string{"po"},
		Categories:   []string{"all"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Pod{} },
		NewList:      func() runtime.Object { return &corev1.PodList{} },
		// log, exec, attach and portforward are served by the pod's node,
		// through the API server (connect subresources).
		Subresources: []string{"status", "binding", "log", "exec", "attach", "portforward"},

		Default:                mutate(func(p *corev1.Pod) { defaultPod(p, opts) }),
		PrepareForCreate:       mutate(preparePodForCreate),
		PrepareForUpdate:       mutate2(func(p, old *corev1.Pod) { p.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(preparePodForStatusUpdate),
		Validate:               validate(validatePod),
		ValidateUpdate:         validate2(validatePodUpdate),
		ValidateStatusUpdate:   validate2(validatePodStatusUpdate),
		Fields:                 selectable(podFields),
		Columns:                podColumns(),
		Row:                    row(podRow),
	}
}

// preparePodForCreate resets the status to what a new pod has: Pending, with
// its QoS class computed once and for all, and (when scheduling gates hold
// the pod back) a PodScheduled=False condition saying so.
func preparePodForCreate(pod *corev1.Pod) {
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: podresources.QOSClass(pod),
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = []corev1.PodCondition{{
			Type:    corev1.PodScheduled,
			Status:  corev1.ConditionFalse,
			Reason:  corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}}
	}
}

// preparePodForStatusUpdate keeps spec and metadata, and backfills the QoS
// class, which older kubelets dropped when they rejected a pod.
func preparePodForStatusUpdate(pod, old *corev1.Pod) {
	pod.Spec = *old.Spec.DeepCopy()
	keepMetaForStatus(&pod.ObjectMeta, &old.ObjectMeta)
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = old.Status.QOSClass
	}
	syncPodStatusIPs(&pod.Status)
}

func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validateMeta(pod, true, apivalidation.NameIsDNSSubdomain)
	specPath := field.NewPath("spec")
	errs = append(errs, validatePodSpec(&pod.Spec, specPath)...)
	return append(errs, validateImageWhitespace(&pod.Spec, specPath)...)
}

// podUpdateForbidden is upstream's message for a pod update that touches a
// field other than the few mutable ones.
const podUpdateForbidden = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`," +
	"`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate allows only what upstream's ValidatePodUpdate allows: new
// images, a shorter (never removed) activeDeadlineSeconds, added tolerations
// (existing ones may only change tolerationSeconds) and fewer scheduling
// gates. Any other spec change is Forbidden on "spec".
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateMetaUpdate(pod, old)
	errs = append(errs, validatePodSpec(&pod.Spec, specPath)...)
	for _, l := range []struct {
		new, old []corev1.Container
		name     string
	}{{pod.Spec.Containers, old.Spec.Containers, "containers"}, {pod.Spec.InitContainers, old.Spec.InitContainers, "initContainers"}} {
		if len(l.new) != len(l.old) {
			return append(errs, field.Forbidden(specPath.Child(l.name), "pod updates may not add or remove containers"))
		}
	}
	errs = append(errs, validateImageWhitespace(&pod.Spec, specPath)...)
	errs = append(errs, validateActiveDeadlineUpdate(pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds, specPath.Child("activeDeadlineSeconds"))...)
	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)

	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.Tolerations = old.Spec.Tolerations
	munged.SchedulingGates = old.Spec.SchedulingGates
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, podUpdateForbidden+"\n"+diff.Diff(old.Spec, *munged)))
	}
	return errs
}

// validateActiveDeadlineUpdate allows setting the deadline and shortening it,
// never lengthening or removing it.
func validateActiveDeadlineUpdate(deadline, old *int64, path *field.Path) field.ErrorList {
	switch {
	case deadline == nil && old != nil:
		return field.ErrorList{field.Invalid(path, deadline, "must not update from a positive integer to nil value")}
	case deadline == nil:
		return nil
	case *deadline < 0 || *deadline > math.MaxInt32:
		return field.ErrorList{field.Invalid(path, *deadline, validation.InclusiveRangeError(0, math.MaxInt32))}
	case old != nil && *old < *deadline:
		return field.ErrorList{field.Invalid(path, *deadline, "must be less than or equal to previous value")}
	}
	return nil
}

// validateOnlyAddedTolerations requires every old toleration to survive
// unchanged except for its tolerationSeconds.
func validateOnlyAddedTolerations(tolerations, old []corev1.Toleration, path *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			o.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(o, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validatePodStatusUpdate checks what a status writer (the nodelet, the
// scheduler) may set: well-formed IPs and node names.
func validatePodStatusUpdate(pod, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(pod, old)
	path := field.NewPath("status")
	if n := pod.Status.NominatedNodeName; n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("nominatedNodeName"))...)
	}
	for i, ip := range pod.Status.PodIPs {
		errs = append(errs, validation.IsValidIP(path.Child("podIPs").Index(i).Child("ip"), ip.IP)...)
	}
	for i, ip := range pod.Status.HostIPs {
		errs = append(errs, validation.IsValidIP(path.Child("hostIPs").Index(i).Child("ip"), ip.IP)...)
	}
	if len(pod.Status.PodIPs) > 2 {
		errs = append(errs, field.TooMany(path.Child("podIPs"), len(pod.Status.PodIPs), 2))
	}
	return errs
}

// podFields are the field selectors upstream supports for pods.
func podFields(pod *corev1.Pod) fields.Set {
	podIP := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// ValidateBinding validates a pods/binding request body: it must name a node.
func ValidateBinding(b *corev1.Binding) field.ErrorList {
	var errs field.ErrorList
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node", "<empty>"}))
	}
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), ""))
	}
	return errs
}

// BindPod assigns pod to the node b names, as upstream's binding storage
// does: the pod must not be bound or being deleted already; it gets
// spec.nodeName, the binding's annotations and a PodScheduled=True condition
// at now. The caller stores the result with the pod's resourceVersion (or
// b's UID and resourceVersion preconditions, when set) and maps errors to
// 409 Conflict.
func BindPod(pod *corev1.Pod, b *corev1.Binding, now time.Time) error {
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)
	}
	if pod.Spec.NodeName != "" {
		return fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName)
	}
	pod.Spec.NodeName = b.Target.Name
	for k, v := range b.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			pod.Status.Conditions[i] = cond
			return nil
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
	return nil
}
