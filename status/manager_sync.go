package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// syncPod writes one pod's desired status if the API's differs (retrying
// on conflict with the latest resourceVersion), then deletes the pod for
// good if CanDelete. A pod gone from the API, or replaced by one with
// another UID, is forgotten.
func (m *Manager) syncPod(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	e, ok := m.pods[uid]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	ns, name, version, desired, finished := e.namespace, e.name, e.version, *e.status.DeepCopy(), e.finished
	m.mu.Unlock()

	pods := m.cfg.Client.CoreV1().Pods(ns)
	var pod *corev1.Pod
	gone := false
	cached := m.cachedPod(ns, name, uid)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := cached
		cached = nil // a conflict means the cache was stale: GET from now on
		if cur == nil {
			var err error
			if cur, err = pods.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if cur.UID != uid {
			gone = true
			return nil
		}
		merged := mergePodStatus(cur.Status, desired, m.couldHaveRunningContainers(uid, finished))
		if Equal(cur.Status, merged) {
			pod = cur
			return nil
		}
		cur.Status = merged
		var err error
		pod, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err) || gone:
		m.forget(uid, version)
		return nil
	case err != nil:
		return fmt.Errorf("write status of pod %s/%s: %w", ns, name, err)
	}
	if m.canDelete(pod, finished) {
		if err := m.ConfirmDelete(ctx, pod); err != nil {
			return err
		}
		m.forget(uid, version)
		return nil
	}
	m.mu.Lock()
	if e, ok := m.pods[uid]; ok && e.written < version {
		e.written = version
	}
	m.mu.Unlock()
	return nil
}

// cachedPod is a copy of the informer's pod when it is the pod of uid.
func (m *Manager) cachedPod(ns, name string, uid types.UID) *corev1.Pod {
	if m.cfg.CachedPod == nil {
		return nil
	}
	if p := m.cfg.CachedPod(ns, name); p != nil && p.UID == uid {
		return p.DeepCopy()
	}
	return nil
}

// forget drops a pod's entry unless it changed since version was read.
func (m *Manager) forget(uid types.UID, version uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pods[uid]; ok && e.version <= version {
		delete(m.pods, uid)
	}
}

func (m *Manager) couldHaveRunningContainers(uid types.UID, finished bool) bool {
	if finished || m.cfg.PodCouldHaveRunningContainers == nil {
		return false
	}
	return m.cfg.PodCouldHaveRunningContainers(uid)
}

// CanDelete reports whether the node may delete the pod for good: it is
// being deleted, its containers are stopped for good (TerminatePod, or
// PodCouldHaveRunningContainers says so) and none shows running in its
// status, and the manager's status for it was written.
func (m *Manager) CanDelete(pod *corev1.Pod) bool {
	m.mu.Lock()
	e, ok := m.pods[pod.UID]
	written := ok && e.written >= e.version
	finished := ok && e.finished
	m.mu.Unlock()
	return written && m.canDelete(pod, finished)
}

// canDelete is CanDelete for a pod as just written (pod is the API's copy).
func (m *Manager) canDelete(pod *corev1.Pod, finished bool) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	if !finished && (m.cfg.PodCouldHaveRunningContainers == nil || m.cfg.PodCouldHaveRunningContainers(pod.UID)) {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if c.State.Running != nil {
				return false
			}
		}
	}
	return true
}

// ConfirmDelete deletes the pod with grace period 0 and a UID
// precondition: the node confirms that the pod stopped, and the object
// disappears. A pod already gone (or replaced) is not an error.
func (m *Manager) ConfirmDelete(ctx context.Context, pod *corev1.Pod) error {
	zero, uid := int64(0), pod.UID
	err := m.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("confirm deletion of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.cfg.Log.Debug("pod deletion confirmed", "pod", pod.Namespace+"/"+pod.Name, "uid", uid)
	return nil
}

// mergePodStatus is upstream's: conditions owned by others come from the
// API's status, the node's own (and DisruptionTarget, if set) from the
// desired one; a pod that could still have running containers does not
// move to a terminal phase yet; a terminal phase is never left.
func mergePodStatus(api, desired corev1.PodStatus, couldHaveRunning bool) corev1.PodStatus {
	out := *desired.DeepCopy()
	hasDisruption := findCondition(desired.Conditions, corev1.DisruptionTarget) != nil
	conds := make([]corev1.PodCondition, 0, len(api.Conditions)+len(desired.Conditions))
	for _, c := range api.Conditions {
		if !ownedByNodelet(c.Type) && !(hasDisruption && c.Type == corev1.DisruptionTarget) {
			conds = append(conds, c)
		}
	}
	for _, c := range desired.Conditions {
		if ownedByNodelet(c.Type) || c.Type == corev1.DisruptionTarget {
			conds = append(conds, c)
		}
	}
	out.Conditions = conds
	toTerminal := !isTerminalPhase(api.Phase) && isTerminalPhase(out.Phase)
	leaveTerminal := isTerminalPhase(api.Phase) && !isTerminalPhase(out.Phase)
	if (toTerminal && couldHaveRunning) || leaveTerminal {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}
	return out
}
