package podlifecycle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records events about API objects; client-go's
// record.EventRecorder (rate-limited and aggregated by its correlator)
// is the one the agent wires.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Event reasons, upstream's (pkg/kubelet/events).
const (
	EventPulling             = "Pulling" // exported for the pod start metrics
	EventPulled              = "Pulled"
	eventFailed              = "Failed"
	eventBackOff             = "BackOff"
	eventCreated             = "Created"
	eventStarted             = "Started"
	eventKilling             = "Killing"
	eventFailedMount         = "FailedMount"
	eventFailedSandbox       = "FailedCreatePodSandBox"
	eventSandboxChanged      = "SandboxChanged"
	eventFailedPostStart     = "FailedPostStartHook"
	eventFailedPreStop       = "FailedPreStopHook"
	eventUnhealthy           = "Unhealthy"
	eventExceededGracePeriod = "ExceededGracePeriod"
)

// podEvent records an event about the pod.
func (s *Syncer) podEvent(pod *corev1.Pod, eventtype, reason, format string, args ...any) {
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Eventf(PodReference(pod, ""), eventtype, reason, format, args...)
	}
}

// containerEvent records an event about one of the pod's containers
// (involvedObject.fieldPath spec.containers{name}, as upstream).
func (s *Syncer) containerEvent(pod *corev1.Pod, name, eventtype, reason, format string, args ...any) {
	if s.cfg.Recorder != nil {
		s.cfg.Recorder.Eventf(PodReference(pod, ContainerFieldPath(pod, name)), eventtype, reason, format, args...)
	}
}

// PodReference is the pod as an event's involvedObject; fieldPath names
// one of its containers (ContainerFieldPath) or is empty.
func PodReference(pod *corev1.Pod, fieldPath string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: fieldPath}
}

// ContainerFieldPath is the fieldPath of the named container of the pod.
func ContainerFieldPath(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return fmt.Sprintf("spec.ephemeralContainers{%s}", name)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}
