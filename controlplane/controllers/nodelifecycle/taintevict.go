package nodelifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Upstream's DisruptionTarget condition for taint evictions.
const (
	reasonDeletionByTaintManager = "DeletionByTaintManager"
	msgDeletionByTaintManager    = "Taint manager: deleting due to NoExecute taint"
)

// reconcilePod decides a bound pod's fate under its node's NoExecute
// taints: evict now, schedule a recheck on the controller's clock for its
// deadline, or cancel a pending eviction.
func (c *Controller) reconcilePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.cancelEviction(key, false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		c.cancelEviction(key, false)
		return nil
	}
	node, err := c.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		// Pods of deleted nodes are the pod garbage collector's business.
		c.cancelEviction(key, false)
		return nil
	}
	at, evict := evictionTime(pod.Spec.Tolerations, noExecuteTaints(node), c.taintAdded(node.Name))
	if !evict {
		c.cancelEviction(key, true)
		return nil
	}
	if d := at.Sub(c.clock.Now()); d > 0 {
		c.scheduleEviction(key, at, d)
		return nil
	}
	c.cancelEviction(key, false)
	return c.evictPod(ctx, pod)
}

// scheduleEviction (re)arms the pod's timer for at; the timer only
// requeues the pod, which is checked afresh then.
func (c *Controller) scheduleEviction(key string, at time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.timers[key]; ok {
		if s.at.Equal(at) {
			return
		}
		s.timer.Stop()
	}
	t := c.clock.AfterFunc(d, func() { c.podQueue.Add(key) })
	c.timers[key] = scheduled{at: at, timer: t}
}

// cancelEviction drops a pending eviction; withEvent records upstream's
// cancellation event when one was pending (the taint went away or the pod
// now tolerates it).
func (c *Controller) cancelEviction(key string, withEvent bool) {
	c.mu.Lock()
	s, ok := c.timers[key]
	if ok {
		s.timer.Stop()
		delete(c.timers, key)
	}
	c.mu.Unlock()
	if !ok || !withEvent {
		return
	}
	if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name}
		if pod, err := c.pods.Pods(ns).Get(name); err == nil {
			ref.UID = pod.UID
		}
		c.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonTaintManagerEviction, "Cancelling deletion of Pod %s", key)
	}
}

func (c *Controller) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.timers {
		s.timer.Stop()
		delete(c.timers, k)
	}
}

// evictPod marks the pod with the DisruptionTarget condition (best effort:
// it only explains the deletion) and deletes it gracefully.
func (c *Controller) evictPod(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	c.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonTaintManagerEviction, "Marking for deletion Pod %s", key)
	c.log.Info("evicting pod from tainted node", "pod", key, "node", pod.Spec.NodeName)
	marked := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reasonDeletionByTaintManager, Message: msgDeletionByTaintManager, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	if i := podConditionIndex(marked.Status.Conditions, corev1.DisruptionTarget); i >= 0 {
		marked.Status.Conditions[i] = cond
	} else {
		marked.Status.Conditions = append(marked.Status.Conditions, cond)
	}
	if _, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, marked, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.log.Warn("set DisruptionTarget", "pod", key, "err", err)
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("evict pod %s: %w", key, err)
	}
	return nil
}
