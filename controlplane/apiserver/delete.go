package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// Finalizers the garbage collector acts on, recorded from DeleteOptions.
const (
	finalizerOrphan     = metav1.FinalizerOrphanDependents
	finalizerForeground = metav1.FinalizerDeleteDependents
)

// deleteOptions reads DeleteOptions from the body (if any) and the query.
func (s *Server) deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if r.ContentLength != 0 {
		if _, err := s.decodeBody(r, opts, "Ignore"); err != nil && !isEmptyBody(err) {
			return nil, err
		}
	}
	q := r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", v))
		}
		opts.GracePeriodSeconds = &g
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := v == "true"
		opts.OrphanDependents = &b
	}
	if isDryRun(r) {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if p := opts.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("propagationPolicy %q is not one of Orphan, Background, Foreground", *p))
		}
		if opts.OrphanDependents != nil {
			return nil, apierrors.NewBadRequest("orphanDependents and propagationPolicy cannot both be set")
		}
	}
	return opts, nil
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	opts, err := s.deleteOptions(r)
	if err != nil {
		return err
	}
	out, err := s.delete(r.Context(), info.Resource, info.Namespace, info.Name, opts)
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, info.Resource, out)
}

// delete deletes one object: at once, or by marking it with a
// deletionTimestamp when finalizers or a pod's grace period hold it.
func (s *Server) delete(ctx context.Context, res *registry.Resource, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, error) {
	dryRun := len(opts.DryRun) > 0
	if err := refuseSystemClassDelete(res, name); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, kv, err := s.getObject(ctx, res, ns, name)
		if err != nil {
			return nil, err
		}
		if err := checkPreconditions(res, cur, opts.Preconditions); err != nil {
			return nil, err
		}
		if err := s.admitAll(ctx, admissionRequest{res: res, op: admission.Delete, ns: ns, name: name,
			old: cur, opts: opts, dryRun: dryRun}); err != nil {
			return nil, err
		}
		obj := cur.DeepCopyObject()
		if !markForDeletion(res, obj, opts) {
			if dryRun {
				return obj, nil
			}
			rev, _, err := s.store.Delete(ctx, kv.Key, kv.ModRevision)
			if errors.Is(err, storage.ErrConflict) && attempt < 20 {
				continue
			}
			if err != nil {
				return nil, mapStorageErr(res, name, err)
			}
			setRV(obj, rev)
			return obj, nil
		}
		out, err := s.storeUpdate(ctx, res, obj, cur, kv, dryRun)
		if errors.Is(err, storage.ErrConflict) && attempt < 20 {
			continue
		}
		if err != nil {
			return nil, mapStorageErr(res, name, err)
		}
		return out, nil
	}
}

func mapStorageErr(res *registry.Resource, name string, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(groupResource(res), name)
	case errors.Is(err, storage.ErrConflict):
		return conflict(res, name)
	}
	return err
}

func checkPreconditions(res *registry.Resource, cur runtime.Object, pre *metav1.Preconditions) error {
	if pre == nil {
		return nil
	}
	m := accessor(cur)
	if pre.UID != nil && *pre.UID != m.GetUID() {
		return apierrors.NewConflict(groupResource(res), m.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, m.GetUID()))
	}
	if pre.ResourceVersion != nil && *pre.ResourceVersion != m.GetResourceVersion() {
		return apierrors.NewConflict(groupResource(res), m.GetName(),
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// markForDeletion updates obj for a delete request and reports whether the
// object must stay (marked with a deletionTimestamp) rather than go now.
func markForDeletion(res *registry.Resource, obj runtime.Object, opts *metav1.DeleteOptions) bool {
	m := accessor(obj)
	applyPropagation(m, opts)
	if pod, ok := obj.(*corev1.Pod); ok && isCorePods(res) {
		if graceful, keep := podGracefulDelete(pod, opts); graceful {
			return keep
		}
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		if ns.DeletionTimestamp == nil {
			t := metav1.Now()
			ns.DeletionTimestamp = &t
			zero := int64(0)
			ns.DeletionGracePeriodSeconds = &zero
		}
		ns.Status.Phase = corev1.NamespaceTerminating
		return len(ns.Spec.Finalizers) > 0 || len(ns.Finalizers) > 0
	}
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		markCRDForDeletion(crd)
	}
	if len(m.GetFinalizers()) == 0 {
		return false
	}
	if m.GetDeletionTimestamp() == nil {
		t := metav1.Now()
		m.SetDeletionTimestamp(&t)
	}
	zero := int64(0)
	m.SetDeletionGracePeriodSeconds(&zero)
	return true
}

// applyPropagation records the propagation policy as the garbage
// collector's finalizers: orphan or foregroundDeletion. Background needs
// no finalizer.
func applyPropagation(m metav1.Object, opts *metav1.DeleteOptions) {
	var policy metav1.DeletionPropagation
	switch {
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	case opts.OrphanDependents != nil && *opts.OrphanDependents:
		policy = metav1.DeletePropagationOrphan
	case opts.OrphanDependents != nil:
		policy = metav1.DeletePropagationBackground
	default:
		return // keep whatever an earlier delete recorded
	}
	var fins []string
	for _, f := range m.GetFinalizers() {
		if f != finalizerOrphan && f != finalizerForeground {
			fins = append(fins, f)
		}
	}
	switch policy {
	case metav1.DeletePropagationOrphan:
		fins = append(fins, finalizerOrphan)
	case metav1.DeletePropagationForeground:
		fins = append(fins, finalizerForeground)
	}
	m.SetFinalizers(fins)
}

func isCorePods(res *registry.Resource) bool {
	return res.GroupVersion.Group == "" && res.Name == "pods"
}

// podGracefulDelete applies upstream's pod rule: a pod bound to a node and
// not yet finished gets a grace period (from the request, else the pod's
// terminationGracePeriodSeconds); the node deletes it for good with grace 0
// once its containers are stopped. It reports whether the rule applied and
// whether the pod stays.
func podGracefulDelete(pod *corev1.Pod, opts *metav1.DeleteOptions) (graceful, keep bool) {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		grace = 0
	}
	if grace == 0 {
		if len(pod.Finalizers) > 0 {
			return false, false // the finalizer rule decides
		}
		return true, false
	}
	deadline := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds <= grace {
		return true, true // an earlier, shorter or equal grace period stands
	}
	if pod.DeletionTimestamp == nil || deadline.Before(pod.DeletionTimestamp) {
		pod.DeletionTimestamp = &deadline
	}
	pod.DeletionGracePeriodSeconds = &grace
	return true, true
}

func namespaceFinalizers(obj runtime.Object) []corev1.FinalizerName {
	if ns, ok := obj.(*corev1.Namespace); ok {
		return ns.Spec.Finalizers
	}
	return nil
}

func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	opts, err := s.deleteOptions(r)
	if err != nil {
		return err
	}
	items, rev, err := s.listMatching(r.Context(), info, r.URL.Query())
	if err != nil {
		return err
	}
	list := info.Resource.NewList()
	var deleted []runtime.Object
	for _, obj := range items {
		m := accessor(obj)
		out, err := s.delete(r.Context(), info.Resource, m.GetNamespace(), m.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		deleted = append(deleted, out)
	}
	if err := setListItems(list, deleted, rev, ""); err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, info.Resource, list)
}
