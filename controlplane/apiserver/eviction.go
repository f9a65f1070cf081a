package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// evictionRetries bounds the conflicts an eviction retries (upstream: 20
// steps of about half a second).
const (
	evictionRetries    = 20
	evictionRetryPause = 50 * time.Millisecond
)

// serveEviction evicts a pod (POST pods/{name}/eviction with a policy/v1
// or v1beta1 Eviction): it deletes the pod unless that would go against
// the PodDisruptionBudget covering it (planEviction decides).
func (s *Server) serveEviction(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if info.Verb != "create" {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), info.Verb+" eviction")
	}
	ev := &policyv1.Eviction{}
	if _, err := s.decodeBody(r, ev, "Ignore"); err != nil {
		return err
	}
	if ev.Name != info.Name {
		return apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	opts := &metav1.DeleteOptions{}
	if ev.DeleteOptions != nil {
		opts = ev.DeleteOptions.DeepCopy()
	}
	if opts.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *opts.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return apierrors.NewInvalid(schemaGK("policy", "Eviction"), info.Name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions", "ignoreStoreReadErrorWithClusterBreakingPotential"), true, "can not be set for pod eviction, try after removing the option")})
	}
	if isDryRun(r) {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if err := s.admitAll(r.Context(), admissionRequest{res: info.Resource, sub: "eviction", op: admission.Create,
		kind: policyv1.SchemeGroupVersion.WithKind("Eviction"), ns: info.Namespace, name: info.Name, obj: ev,
		opts: &metav1.CreateOptions{}, dryRun: isDryRun(r)}); err != nil {
		return err
	}
	if err := s.evict(r.Context(), info.Resource, info.Namespace, info.Name, opts); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	return nil
}

// evict carries out planEviction's decision for the pod, re-reading and
// re-deciding on conflicts (a budget or the pod changed meanwhile).
func (s *Server) evict(ctx context.Context, podRes *registry.Resource, ns, name string, opts *metav1.DeleteOptions) error {
	pinnedByClient := opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
	for attempt := 0; ; attempt++ {
		obj, _, err := s.getObject(ctx, podRes, ns, name)
		if err != nil {
			return err
		}
		pod := obj.(*corev1.Pod)
		pdbs, err := s.namespacePDBs(ctx, ns)
		if err != nil {
			return err
		}
		plan := planEviction(pod, pdbs)
		err = s.actOnEviction(ctx, podRes, pod, plan, opts, pinnedByClient)
		if !apierrors.IsConflict(err) || pinnedByClient || attempt >= evictionRetries {
			return err
		}
		if plan.kind == evictUnhealthy {
			// The pod changed since it was found unhealthy: let the client
			// try again, as upstream answers.
			return tooManyRequests(fmt.Sprintf("The disruption budget %s is still being processed by the server.", plan.pdb.Name), 10)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(evictionRetryPause):
		}
	}
}

// actOnEviction executes one plan: refuse, or take a disruption from the
// budget, then mark the pod as a disruption target and delete it.
func (s *Server) actOnEviction(ctx context.Context, podRes *registry.Resource, pod *corev1.Pod, plan evictionPlan,
	opts *metav1.DeleteOptions, pinnedByClient bool) error {
	if plan.err != nil {
		return plan.err
	}
	dryRun := len(opts.DryRun) > 0
	if plan.kind == evictDecrement {
		if err := s.takeDisruption(ctx, plan.pdb, pod.Name, dryRun); err != nil {
			return err
		}
	}
	if plan.pin && !pinnedByClient {
		opts = opts.DeepCopy()
		if opts.Preconditions == nil {
			opts.Preconditions = &metav1.Preconditions{}
		}
		rv := pod.ResourceVersion
		opts.Preconditions.ResourceVersion = &rv
	}
	return s.disruptAndDelete(ctx, podRes, pod.Namespace, pod.Name, opts)
}

// namespacePDBs lists the PodDisruptionBudgets of ns.
func (s *Server) namespacePDBs(ctx context.Context, ns string) ([]policyv1.PodDisruptionBudget, error) {
	res := s.Resource(policyv1.GroupName, "poddisruptionbudgets")
	if res == nil {
		return nil, nil
	}
	items, _, err := s.listMatching(ctx, requestInfo{Resource: res, Namespace: ns}, nil)
	if err != nil {
		return nil, fmt.Errorf("list pod disruption budgets of %s for eviction: %w", ns, err)
	}
	out := make([]policyv1.PodDisruptionBudget, 0, len(items))
	for _, o := range items {
		out = append(out, *o.(*policyv1.PodDisruptionBudget))
	}
	return out, nil
}

// takeDisruption stores pdb's status with one disruption taken, only if
// the budget is still the version read (else 409, and evict retries).
func (s *Server) takeDisruption(ctx context.Context, pdb *policyv1.PodDisruptionBudget, podName string, dryRun bool) error {
	next, err := decrementPDB(pdb, podName, time.Now(), dryRun)
	if err != nil {
		return err
	}
	res := s.Resource(policyv1.GroupName, "poddisruptionbudgets")
	_, err = s.update(ctx, res, pdb.Namespace, pdb.Name, "status", writeOpts{dryRun: dryRun}, func(runtime.Object) (runtime.Object, error) {
		return next, nil
	})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update status of pod disruption budget %s/%s: %w", pdb.Namespace, pdb.Name, err)
	}
	return err
}

// disruptAndDelete adds the DisruptionTarget condition to the pod (as the
// eviction API does upstream) and deletes it with opts. The preconditions
// apply to the pod as read before the condition was added.
func (s *Server) disruptAndDelete(ctx context.Context, podRes *registry.Resource, ns, name string, opts *metav1.DeleteOptions) error {
	if len(opts.DryRun) == 0 {
		out, err := s.update(ctx, podRes, ns, name, "status", writeOpts{}, func(cur runtime.Object) (runtime.Object, error) {
			if err := checkPreconditions(podRes, cur, opts.Preconditions); err != nil {
				return nil, err
			}
			pod := cur.(*corev1.Pod)
			podutil.UpdatePodCondition(&pod.Status, &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"})
			pod.ResourceVersion = ""
			return pod, nil
		})
		if err != nil {
			return err
		}
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			opts = opts.DeepCopy()
			rv := accessor(out).GetResourceVersion()
			opts.Preconditions.ResourceVersion = &rv
		}
	}
	_, err := s.delete(ctx, podRes, ns, name, opts)
	return err
}
