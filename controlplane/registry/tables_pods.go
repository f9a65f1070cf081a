package registry

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeUnreachablePodReason is the pod status reason the node lifecycle
// controller sets when it loses a node (upstream's NodeUnreachablePodReason).
const nodeUnreachablePodReason = "NodeLost"

func podColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		ageColumn(),
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
	}
}

// podSummary is what kubectl get pods shows about a pod's containers.
type podSummary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  metav1.Time
}

// podRow renders a pod as upstream's printPod does.
func podRow(pod *corev1.Pod, now time.Time) []interface{} {
	s := summarizePod(pod)
	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, age(s.lastRestart, now))
	}
	podIP := orNone(pod.Status.PodIP)
	if len(pod.Status.PodIPs) > 0 {
		podIP = orNone(pod.Status.PodIPs[0].IP)
	}
	return []interface{}{
		pod.Name, fmt.Sprintf("%d/%d", s.ready, s.total), s.reason, restarts, age(pod.CreationTimestamp, now),
		podIP, orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), readinessGates(pod),
	}
}

// summarizePod computes the Ready, Status and Restarts columns. The status is
// the phase (or status.reason), then the first unfinished init container's
// state ("Init:1/2", "Init:CrashLoopBackOff", "Init:Error"...), else the app
// containers' waiting or terminated reasons (ContainerCreating,
// CrashLoopBackOff, Completed...), and finally Terminating or Unknown for a
// pod being deleted.
func summarizePod(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.total++
		}
	}
	sidecarRestarts, sidecarLast, initializing := summarizeInitContainers(pod, sidecars, &s)
	if !initializing || podInitialized(pod) {
		s.restarts, s.lastRestart = sidecarRestarts, sidecarLast
		summarizeAppContainers(pod, &s)
	}
	if pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason {
		s.reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		s.reason = "Terminating"
	}
	return s
}

// summarizeInitContainers walks the init containers up to the first one not
// done, setting the reason from it. It returns the restarts of sidecars (which
// keep counting once the pod is initialized) and whether the pod is still
// initializing.
func summarizeInitContainers(pod *corev1.Pod, sidecars map[string]bool, s *podSummary) (int, metav1.Time, bool) {
	sidecarRestarts, sidecarLast := 0, metav1.Time{}
	for i, c := range pod.Status.InitContainerStatuses {
		s.restarts += int(c.RestartCount)
		if t := c.LastTerminationState.Terminated; t != nil && s.lastRestart.Before(&t.FinishedAt) {
			s.lastRestart = t.FinishedAt
		}
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && sidecarLast.Before(&t.FinishedAt) {
				sidecarLast = t.FinishedAt
			}
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				s.ready++
			}
			continue
		case c.State.Terminated != nil:
			t := c.State.Terminated
			switch {
			case t.Reason != "":
				s.reason = "Init:" + t.Reason
			case t.Signal != 0:
				s.reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				s.reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + c.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return sidecarRestarts, sidecarLast, true
	}
	return sidecarRestarts, sidecarLast, false
}

// summarizeAppContainers takes the reason from the app containers, the first
// one listed winning, and counts the ready ones.
func summarizeAppContainers(pod *corev1.Pod, s *podSummary) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		s.restarts += int(c.RestartCount)
		if t := c.LastTerminationState.Terminated; t != nil && s.lastRestart.Before(&t.FinishedAt) {
			s.lastRestart = t.FinishedAt
		}
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			s.reason = c.State.Waiting.Reason
		case c.State.Terminated != nil && c.State.Terminated.Reason != "":
			s.reason = c.State.Terminated.Reason
		case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
			s.reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
		case c.State.Terminated != nil:
			s.reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			s.ready++
		}
	}
	// A completed container does not make the pod Completed while another
	// one still runs.
	if s.reason == "Completed" && hasRunning {
		s.reason = "NotReady"
		if podConditionTrue(pod, corev1.PodReady) {
			s.reason = "Running"
		}
	}
}

func podInitialized(pod *corev1.Pod) bool {
	return podConditionTrue(pod, corev1.PodInitialized)
}

func podConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	trueCount := 0
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				if c.Status == corev1.ConditionTrue {
					trueCount++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", trueCount, len(pod.Spec.ReadinessGates))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
