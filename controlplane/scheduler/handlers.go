package scheduler

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/controlplane/scheduler/framework"
)

// Informer handlers: bound pods feed the cache, pending pods of this
// scheduler feed the queue, and changes that may let unschedulable pods fit
// (node added or changed, pod deleted or finished) move them back.

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// responsible reports whether pod is pending and ours to schedule.
func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.Spec.SchedulerName == s.cfg.SchedulerName &&
		pod.DeletionTimestamp == nil && !terminal(pod)
}

func (s *Scheduler) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case pod.Spec.NodeName != "":
		s.cache.AddPod(pod)
	case s.responsible(pod):
		s.queue.Add(framework.NewPodInfo(pod))
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	if pod.Spec.NodeName != "" {
		if old.Spec.NodeName == "" {
			s.queue.Delete(key) // bound (by us: confirms the assumed pod)
			s.forgetPreemption(key)
		}
		s.cache.AddPod(pod)
		if terminal(pod) && !terminal(old) {
			s.queue.MoveAllToActiveOrBackoff() // its resources are free
		}
		return
	}
	if s.cache.IsAssumed(key) {
		return // binding in flight; the bound version will follow
	}
	if !s.responsible(pod) {
		s.queue.Delete(key)
		return
	}
	if old.ResourceVersion == pod.ResourceVersion || !specChanged(old, pod) {
		return // resync, or a status change (our own PodScheduled=False)
	}
	s.queue.Update(framework.NewPodInfo(pod))
}

func (s *Scheduler) onPodDelete(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	s.queue.Delete(pod.Namespace + "/" + pod.Name)
	s.forgetPreemption(pod.Namespace + "/" + pod.Name)
	s.cache.RemovePod(pod)
	if pod.Spec.NodeName != "" {
		s.queue.MoveAllToActiveOrBackoff()
	}
}

func (s *Scheduler) onNodeAdd(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.cache.AddNode(node)
	s.queue.MoveAllToActiveOrBackoff()
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	node, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || !nodeChanged(old, node) {
		return // heartbeats and the like: nothing the filters read
	}
	s.cache.AddNode(node)
	s.queue.MoveAllToActiveOrBackoff()
}

func (s *Scheduler) onNodeDelete(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if node, ok = tomb.Obj.(*corev1.Node); !ok {
			return
		}
	}
	s.cache.RemoveNode(node.Name)
}

// specChanged reports a change that may make a pending pod schedulable,
// as upstream ignores status-only updates.
func specChanged(old, cur *corev1.Pod) bool {
	return !reflect.DeepEqual(old.Labels, cur.Labels) || !equality.Semantic.DeepEqual(old.Spec, cur.Spec)
}

// nodeChanged reports a change in anything filters and scores read.
func nodeChanged(old, cur *corev1.Node) bool {
	if old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!reflect.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) {
		return true
	}
	return conditionStatus(old) != conditionStatus(cur)
}

func conditionStatus(n *corev1.Node) [2]corev1.ConditionStatus {
	var out [2]corev1.ConditionStatus
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			out[0] = c.Status
		case corev1.NodeNetworkUnavailable:
			out[1] = c.Status
		}
	}
	return out
}
