// Package status computes a pod's API status from its spec and what the
// runtime reports, as upstream's kubelet generateAPIPodStatus does, and
// tells whether a status changed enough to be written. Pure: the writer
// that sends statuses to the API server lives elsewhere.
package status

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/podresources"
	"github.com/nodelet/nodelet/runtime"
)

// ProbeFunc reports a probe's result for a container ID ("containerd://…");
// known is false when the probe has no result yet.
type ProbeFunc func(containerID string) (success, known bool)

// Inputs are what the status depends on besides the spec and the runtime.
type Inputs struct {
	// Now stamps new condition transitions and the start time.
	Now time.Time
	// OldStatus is the last status computed (or written) for the pod; nil
	// means pod.Status.
	OldStatus *corev1.PodStatus
	// HostIPs are the node's IPs (host-network pods also get them as pod IPs).
	HostIPs []string
	// PodIsTerminal is set by the pod worker once the pod will not run
	// again (its containers are stopped for good).
	PodIsTerminal bool
	// Waiting gives, per container name, why a container that should run is
	// waiting (ContainerCreating, CrashLoopBackOff, ErrImagePull,
	// ImagePullBackOff, CreateContainerConfigError ...), as the last sync
	// found out; it overrides the state for containers that are to start.
	Waiting map[string]corev1.ContainerStateWaiting
	// Readiness and Startup give probe results; nil, or no result for a
	// container with no such probe, counts as success; a container with a
	// probe and no result yet is not ready (not started).
	Readiness ProbeFunc
	Startup   ProbeFunc
}

// Compute returns the pod's status. Times are truncated to seconds (as the
// API stores them) so that Equal can compare with what was written.
func Compute(pod *corev1.Pod, rs *runtime.PodStatus, in Inputs) corev1.PodStatus {
	if rs == nil {
		rs = &runtime.PodStatus{}
	}
	old := pod.Status
	if in.OldStatus != nil {
		old = *in.OldStatus
	}
	var s corev1.PodStatus
	s.QOSClass = podresources.QOSClass(pod)
	hasInit := len(pod.Spec.InitContainers) > 0
	s.ContainerStatuses = containerStatuses(pod, rs, old.ContainerStatuses, pod.Spec.Containers, hasInit, false, in)
	s.InitContainerStatuses = containerStatuses(pod, rs, old.InitContainerStatuses, pod.Spec.InitContainers, hasInit, true, in)
	// Ephemeral containers count for neither the phase nor readiness.
	if eph := runtime.EphemeralContainers(pod); len(eph) > 0 {
		s.EphemeralContainerStatuses = containerStatuses(pod, rs, old.EphemeralContainerStatuses, eph, false, false, in)
	}
	setProbeResults(pod, &s, in)

	all := append(append([]corev1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = phase(pod, all, in.PodIsTerminal)
	if s.Phase != corev1.PodFailed && s.Phase != corev1.PodSucceeded {
		switch {
		case isTerminalPhase(old.Phase):
			s.Phase = old.Phase
		case isTerminalPhase(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if isTerminalPhase(pod.Status.Phase) {
		s.Phase = pod.Status.Phase // no way out of a terminal phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}
	s.Conditions = conditions(pod, rs, &s, old, in.Now)
	setIPs(pod, rs, &s, old, in.HostIPs)
	s.StartTime = old.StartTime
	if s.StartTime == nil || s.StartTime.IsZero() {
		t := metav1.NewTime(in.Now)
		s.StartTime = &t
	}
	out := s.DeepCopy() // share nothing with the old status or the pod
	normalize(out)
	return *out
}

func isTerminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodFailed || p == corev1.PodSucceeded
}

// setIPs: pod IPs from the newest sandbox while it runs (kept from the old
// status once the pod is terminal), the node's IPs as host IPs, and as pod
// IPs for host-network pods.
func setIPs(pod *corev1.Pod, rs *runtime.PodStatus, s *corev1.PodStatus, old corev1.PodStatus, hostIPs []string) {
	var ips []string
	if sb := rs.LatestSandbox(); sb != nil && sb.State == runtime.StateRunning && sb.IP != "" {
		ips = []string{sb.IP}
	}
	if pod.Spec.HostNetwork && len(ips) == 0 {
		ips = hostIPs
	}
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(s.PodIPs) == 0 && isTerminalPhase(s.Phase) {
		s.PodIPs = append([]corev1.PodIP(nil), old.PodIPs...)
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	for i, ip := range hostIPs {
		if i == 2 {
			break
		}
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
}

// phase is upstream's getPhase.
func phase(pod *corev1.Pod, statuses []corev1.ContainerStatus, podIsTerminal bool) corev1.PodPhase {
	pendingInit, failedInit := 0, 0
	for _, c := range pod.Spec.InitContainers {
		cs, ok := find(statuses, c.Name)
		switch {
		case !ok:
			pendingInit++
		case cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			if cs.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, succeeded := 0, 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		cs, ok := find(statuses, c.Name)
		switch {
		case !ok:
			unknown++
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
		case cs.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}
	if failedInit > 0 && pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 && !anyAppContainerStarted(&pod.Spec, statuses), waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		return stoppedPhase(pod, stopped, succeeded, podIsTerminal)
	}
	return corev1.PodPending
}

// stoppedPhase is the phase of a pod whose app containers all stopped.
func stoppedPhase(pod *corev1.Pod, stopped, succeeded int, podIsTerminal bool) corev1.PodPhase {
	if podIsTerminal {
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	switch {
	case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return corev1.PodRunning // restarting
	case stopped == succeeded:
		return corev1.PodSucceeded
	case pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	}
	return corev1.PodRunning // OnFailure, restarting the failed ones
}

func anyAppContainerStarted(spec *corev1.PodSpec, statuses []corev1.ContainerStatus) bool {
	for _, c := range spec.Containers {
		if cs, ok := find(statuses, c.Name); ok && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func find(statuses []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// normalize truncates every timestamp to seconds, as the API serializes
// them.
func normalize(s *corev1.PodStatus) {
	trunc := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			*t = metav1.NewTime(t.Time.Truncate(time.Second))
		}
	}
	trunc(s.StartTime)
	for i := range s.Conditions {
		trunc(&s.Conditions[i].LastProbeTime)
		trunc(&s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]corev1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			for _, st := range []*corev1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if st.Running != nil {
					trunc(&st.Running.StartedAt)
				}
				if st.Terminated != nil {
					trunc(&st.Terminated.StartedAt)
					trunc(&st.Terminated.FinishedAt)
				}
			}
		}
	}
}
