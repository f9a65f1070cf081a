package kubeletmetrics

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodStartTracker measures upstream's pod startup SLI
// (pkg/kubelet/util/pod_startup_latency_tracker.go): from the pod's
// creationTimestamp to the moment the node sees, on its watch of the
// API, a status in which every container is running, minus the time
// spent pulling images (from the first pull's start to the last pull's
// end). Only pods the node sees before it ever wrote their status (no
// status.startTime) are measured, so that a restarted agent does not
// measure the pods it already ran; each pod is measured once.
//
// kubelet_pod_start_sli_duration_seconds gets the duration without the
// pulls, kubelet_pod_start_total_duration_seconds the whole of it.
type PodStartTracker struct {
	observe func(sli, total time.Duration)
	now     func() time.Time

	mu   sync.Mutex
	pods map[types.UID]*podStartState
}

type podStartState struct {
	firstStartedPulling, lastFinishedPulling time.Time
	recorded                                 bool
}

func newPodStartTracker(observe func(sli, total time.Duration), now func() time.Time) *PodStartTracker {
	return &PodStartTracker{observe: observe, now: now, pods: map[types.UID]*podStartState{}}
}

// ObservedPodOnWatch is told of every version of the pod the node's watch
// delivers (informer adds and updates).
func (t *PodStartTracker) ObservedPodOnWatch(pod *corev1.Pod) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		delete(t.pods, pod.UID)
		return
	}
	st := t.pods[pod.UID]
	if st == nil {
		if pod.Status.StartTime == nil || pod.Status.StartTime.IsZero() {
			t.pods[pod.UID] = &podStartState{}
		}
		return
	}
	if st.recorded || !allContainersRunning(pod) {
		return
	}
	st.recorded = true
	total := now.Sub(pod.CreationTimestamp.Time)
	pulling := st.lastFinishedPulling.Sub(st.firstStartedPulling)
	if pulling < 0 { // a pull started and never finished
		pulling = 0
	}
	t.observe(total-pulling, total)
}

// allContainersRunning: every app container of the status is running
// (upstream's hasPodStartedSLO).
func allContainersRunning(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// StartedPulling is told that an image pull for the pod starts.
func (t *PodStartTracker) StartedPulling(uid types.UID) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.pods[uid]; st != nil && st.firstStartedPulling.IsZero() {
		st.firstStartedPulling = now
	}
}

// FinishedPulling is told that an image pull for the pod succeeded.
func (t *PodStartTracker) FinishedPulling(uid types.UID) {
	if t == nil {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.pods[uid]; st != nil && !st.firstStartedPulling.IsZero() {
		st.lastFinishedPulling = now
	}
}

// Forget drops a pod deleted from the API.
func (t *PodStartTracker) Forget(uid types.UID) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}
