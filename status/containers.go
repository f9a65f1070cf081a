package status

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
)

// Waiting reasons and other container-state strings of upstream's kubelet.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonStatusUnknown     = "ContainerStatusUnknown"
	// ContainerIDPrefix is the runtime scheme of container IDs.
	ContainerIDPrefix = "containerd://"
)

// containerStatuses is upstream's convertToAPIContainerStatuses for either
// the app or the init containers.
func containerStatuses(pod *corev1.Pod, rs *runtime.PodStatus, previous []corev1.ContainerStatus,
	containers []corev1.Container, hasInit, isInit bool, in Inputs) []corev1.ContainerStatus {
	oldStatuses := make(map[string]corev1.ContainerStatus, len(previous))
	for _, s := range previous {
		oldStatuses[s.Name] = s
	}
	defaultReason := ReasonContainerCreating
	if hasInit {
		defaultReason = ReasonPodInitializing
	}
	statuses := make(map[string]*corev1.ContainerStatus, len(containers))
	for _, c := range containers {
		s := &corev1.ContainerStatus{
			Name:  c.Name,
			Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: defaultReason}},
		}
		if old, ok := oldStatuses[c.Name]; ok {
			if old.State.Terminated != nil {
				s = old.DeepCopy()
			} else {
				s.RestartCount = old.RestartCount
				s.LastTerminationState = *old.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = s
	}
	inferVanished(pod, rs, containers, oldStatuses, statuses, defaultReason)
	applyRuntimeStatuses(rs, oldStatuses, statuses)
	applyWaiting(pod, rs, containers, isInit, in.Waiting, statuses)

	out := make([]corev1.ContainerStatus, 0, len(containers))
	for _, c := range containers {
		out = append(out, *statuses[c.Name])
	}
	if !isInit {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// inferVanished marks a container that was running and of which the
// runtime no longer knows anything as terminated in its last state, so
// that the pod does not fall back to Pending.
func inferVanished(pod *corev1.Pod, rs *runtime.PodStatus, containers []corev1.Container,
	oldStatuses map[string]corev1.ContainerStatus, statuses map[string]*corev1.ContainerStatus, defaultReason string) {
	for _, c := range containers {
		if rs.LatestContainer(c.Name) != nil {
			continue
		}
		old, ok := oldStatuses[c.Name]
		if !ok || old.State.Terminated != nil || old.State.Running == nil {
			continue
		}
		s := statuses[c.Name]
		if s.State.Waiting == nil || s.State.Waiting.Reason != defaultReason || s.LastTerminationState.Terminated != nil {
			continue
		}
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			Reason:   ReasonStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: 137,
		}
		if pod.DeletionTimestamp == nil {
			s.RestartCount++
		}
	}
}

// applyRuntimeStatuses sets each container's state from its newest
// instance and its last state from the one before.
func applyRuntimeStatuses(rs *runtime.PodStatus, oldStatuses map[string]corev1.ContainerStatus, statuses map[string]*corev1.ContainerStatus) {
	instances := append([]runtime.ContainerStatus(nil), rs.Containers...)
	sort.SliceStable(instances, func(i, j int) bool { return instances[i].CreatedAt.After(instances[j].CreatedAt) })
	seen := map[string]int{}
	for i := range instances {
		cs := &instances[i]
		if _, ok := statuses[cs.Name]; !ok || seen[cs.Name] >= 2 {
			continue
		}
		var oldPtr *corev1.ContainerStatus
		if old, ok := oldStatuses[cs.Name]; ok {
			oldPtr = &old
		}
		s := convert(cs, oldPtr)
		if seen[cs.Name] == 0 {
			statuses[cs.Name] = s
		} else {
			statuses[cs.Name].LastTerminationState = s.State
		}
		seen[cs.Name]++
	}
}

// convert is one runtime container instance as an API container status.
func convert(cs *runtime.ContainerStatus, old *corev1.ContainerStatus) *corev1.ContainerStatus {
	id := ContainerIDPrefix + cs.ID
	s := &corev1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.Attempt),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  id,
	}
	switch {
	case cs.State == runtime.StateRunning:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case cs.State == runtime.StateExited:
		s.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      terminatedReason(cs),
			Message:     cs.Message,
			StartedAt:   metav1.NewTime(cs.StartedAt),
			FinishedAt:  metav1.NewTime(cs.FinishedAt),
			ContainerID: id,
		}
	case cs.State == runtime.StateUnknown && old != nil && old.State.Running != nil:
		s.State.Terminated = &corev1.ContainerStateTerminated{
			Reason:   ReasonStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}
		s.RestartCount = old.RestartCount + 1
	default: // created, or unknown
		s.State.Waiting = &corev1.ContainerStateWaiting{}
	}
	return s
}

func terminatedReason(cs *runtime.ContainerStatus) string {
	switch {
	case cs.Reason != "":
		return cs.Reason
	case cs.ExitCode == 0:
		return "Completed"
	}
	return "Error"
}

// applyWaiting shows the caller's waiting reason on the containers that are
// to be (re)started; a terminated state moves to the last state.
func applyWaiting(pod *corev1.Pod, rs *runtime.PodStatus, containers []corev1.Container, isInit bool,
	waiting map[string]corev1.ContainerStateWaiting, statuses map[string]*corev1.ContainerStatus) {
	for _, c := range containers {
		latest := rs.LatestContainer(c.Name)
		if isInit && latest != nil && latest.State == runtime.StateExited && latest.ExitCode == 0 {
			continue
		}
		if !runtime.ShouldRestart(pod, latest) {
			continue
		}
		w, ok := waiting[c.Name]
		if !ok {
			continue
		}
		s := statuses[c.Name]
		if s.State.Terminated != nil {
			s.LastTerminationState = s.State
		}
		s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
	}
}

// setProbeResults sets started and ready: an app container is started
// when running and its startup probe (if any) succeeded, ready when
// started and its readiness probe (if any) succeeded; an init container is
// started while running and ready once it exited 0.
func setProbeResults(pod *corev1.Pod, s *corev1.PodStatus, in Inputs) {
	specs := map[string]*corev1.Container{}
	for i := range pod.Spec.Containers {
		specs[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		c := specs[cs.Name]
		running := cs.State.Running != nil
		started := running && probeOK(in.Startup, cs.ContainerID, c != nil && c.StartupProbe != nil)
		cs.Started = &started
		cs.Ready = started && probeOK(in.Readiness, cs.ContainerID, c != nil && c.ReadinessProbe != nil)
	}
	for i := range s.InitContainerStatuses {
		cs := &s.InitContainerStatuses[i]
		started := cs.State.Running != nil
		cs.Started = &started
		cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
	}
}

func probeOK(probe ProbeFunc, id string, hasProbe bool) bool {
	if probe != nil {
		if ok, known := probe(id); known {
			return ok
		}
	}
	return !hasProbe
}
