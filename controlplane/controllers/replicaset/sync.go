package replicaset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/nodelet/nodelet/controlplane/controllers/controllerref"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// statusUpdateRetries is how many times a conflicting status write is
// retried on a fresh copy before the key is requeued.
const statusUpdateRetries = 1

// Reconcile syncs the ReplicaSet named by key ("namespace/name").
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a malformed key never gets better
	}
	rs, err := c.rsLister.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get replicaset %s: %w", key, err)
	}
	// Read expectations before listing pods: an observation racing with
	// the list then errs on the side of acting later, never twice.
	needsSync := c.exp.Satisfied(key)
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil // validation rejects such selectors; nothing to do
	}
	// All pods, not only matching ones: pods we own that stopped matching
	// must be found to be released.
	all, err := c.podLister.Pods(ns).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods for %s: %w", key, err)
	}
	pods, err := c.claimPods(ctx, rs, sel, FilterActivePods(all))
	if err != nil {
		return err
	}
	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, key, pods, rs)
	}
	st := calculateStatus(rs, pods, manageErr, c.now())
	updated, err := c.updateStatus(ctx, rs.DeepCopy(), st)
	if err != nil {
		return errors.Join(manageErr, fmt.Errorf("update status of %s: %w", key, err))
	}
	// A pod becomes available minReadySeconds after it became ready, with no
	// event to tell us: look again then.
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicas(updated) && updated.Status.AvailableReplicas != replicas(updated) {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

// manageReplicas creates or deletes pods so that rs has spec.replicas
// active pods, at most c.burst per call, recording expectations first so
// the informer events of our own writes are awaited by the next sync.
func (c *Controller) manageReplicas(ctx context.Context, key string, pods []*corev1.Pod, rs *appsv1.ReplicaSet) error {
	diff := len(pods) - int(replicas(rs))
	switch {
	case diff < 0:
		n := min(-diff, c.burst)
		c.exp.ExpectCreations(key, n)
		c.log.Debug("too few replicas", "replicaset", key, "need", replicas(rs), "creating", n)
		ref := metav1.NewControllerRef(rs, controllerKind)
		ok, err := slowStartBatch(n, SlowStartInitialBatchSize, func() error {
			return c.createPod(ctx, rs, ref)
		})
		// Creations never attempted or failed will never be observed.
		for range n - ok {
			c.exp.CreationObserved(key)
		}
		return err
	case diff > 0:
		n := min(diff, c.burst)
		c.log.Debug("too many replicas", "replicaset", key, "need", replicas(rs), "deleting", n)
		victims := podsToDelete(pods, c.relatedPods(rs), n)
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = podKey(p)
		}
		c.exp.ExpectDeletions(key, keys)
		return c.deletePods(ctx, key, rs, victims)
	}
	return nil
}

func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet, ref *metav1.OwnerReference) error {
	pod := podFromTemplate(rs, ref)
	if len(pod.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // every create will fail until the namespace is gone
		}
		c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return fmt.Errorf("create pod for %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

// deletePods deletes victims in parallel; a failed deletion lowers the
// expectations because the informer will not show it.
func (c *Controller) deletePods(ctx context.Context, key string, rs *appsv1.ReplicaSet, victims []*corev1.Pod) error {
	errCh := make(chan error, len(victims))
	var wg sync.WaitGroup
	for _, p := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if err == nil {
				c.recorder.Eventf(rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
				return
			}
			c.exp.DeletionObserved(key, podKey(p))
			if apierrors.IsNotFound(err) {
				return
			}
			c.recorder.Eventf(rs, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
			errCh <- fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}()
	}
	wg.Wait()
	close(errCh)
	return <-errCh // the first error; the rest are most likely the same
}

// relatedPods returns the pods controlled by rs or by any ReplicaSet with the
// same controller (the other ReplicaSets of a Deployment), used to prefer
// deleting pods from crowded nodes.
func (c *Controller) relatedPods(rs *appsv1.ReplicaSet) []*corev1.Pod {
	owners := map[types.UID]bool{rs.UID: true}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		siblings, _ := c.rsLister.ReplicaSets(rs.Namespace).List(labels.Everything())
		for _, s := range siblings {
			if sr := metav1.GetControllerOf(s); sr != nil && sr.UID == ref.UID {
				owners[s.UID] = true
			}
		}
	}
	all, _ := c.podLister.Pods(rs.Namespace).List(labels.Everything())
	var out []*corev1.Pod
	for _, p := range all {
		if r := metav1.GetControllerOf(p); r != nil && owners[r.UID] {
			out = append(out, p)
		}
	}
	return out
}

// claimPods returns the pods rs controls after adopting matching orphans and
// releasing owned pods that no longer match. Adoption is refused once rs is
// being deleted (checked against a fresh read, since the cache may lag).
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, sel labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	claimer := &controllerref.Claimer[*corev1.Pod]{
		Owner: rs, OwnerGVK: controllerKind, Selector: sel,
		Fresh: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, p *corev1.Pod, patch []byte) error {
			_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	return claimer.Claim(ctx, pods)
}

// updateStatus writes st unless nothing changed, retrying once on a fresh
// copy. observedGeneration records the generation the counts were computed
// for.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	cur := rs.Status
	if cur.Replicas == st.Replicas && cur.FullyLabeledReplicas == st.FullyLabeledReplicas &&
		cur.ReadyReplicas == st.ReadyReplicas && cur.AvailableReplicas == st.AvailableReplicas &&
		rs.Generation == cur.ObservedGeneration && reflect.DeepEqual(cur.Conditions, st.Conditions) {
		return rs, nil
	}
	st.ObservedGeneration = rs.Generation
	client := c.client.AppsV1().ReplicaSets(rs.Namespace)
	for i := 0; ; i++ {
		rs.Status = st
		updated, err := client.UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if i >= statusUpdateRetries {
			return nil, err
		}
		if rs, err = client.Get(ctx, rs.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}
