package registry

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/podresources"
)

func podResource() *Resource {
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
		// through the API server, and proxy by the pod itself (connect
		// subresources); eviction is a delete that respects
		// PodDisruptionBudgets; ephemeralcontainers adds debugging
		// containers (kubectl debug).
		Subresources: []string{"status", "binding", "eviction", "ephemeralcontainers", "log", "exec", "attach", "portforward", "proxy"},

		Default:                mutate(func(p *corev1.Pod) { defaultPod(p) }),
		PrepareForCreate:       mutate(preparePodForCreate),
		PrepareForUpdate:       mutate2(func(p, old *corev1.Pod) { p.Status = *old.Status.DeepCopy() }),
		PrepareForStatusUpdate: mutate2(preparePodForStatusUpdate),
		// As upstream's podEphemeralContainersStrategy: the update keeps the
		// stored pod and takes only its ephemeral containers.
		PrepareForEphemeralContainersUpdate: mutate2(func(p, old *corev1.Pod) {
			eph, rv := p.Spec.EphemeralContainers, p.ResourceVersion
			*p = *old.DeepCopy()
			p.Spec.EphemeralContainers, p.ResourceVersion = eph, rv
		}),

		Fields: selectable(podFields),
		// Old v1 clients select on spec.host.
		FieldAliases: map[string]string{"spec.host": "spec.nodeName"},
		Columns:      podColumns(),
		Row:          row(podRow),
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
		// Upstream's conversion accepts status.podIPs but its selectable
		// fields leave it out: a selector on it sees "" on every pod.
		"status.podIPs": "",
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
