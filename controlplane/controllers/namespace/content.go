package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// maxRecheck bounds how long a pass waits for content with a deadline (a
// pod in its grace period): node agents usually confirm well before the
// grace period ends, and nothing else wakes the namespace up.
const maxRecheck = 10 * time.Second

// contentRemainingError: content deletion is under way but not done.
type contentRemainingError struct {
	estimate time.Duration // when a recheck is worth it; 0: back off
	msg      string
}

func (e *contentRemainingError) Error() string { return e.msg }

// RetryAfter makes the worker recheck the namespace after the estimate
// (keyqueue.Retrier): remaining content is expected, not a failure.
func (e *contentRemainingError) RetryAfter() time.Duration { return e.estimate }

// deletable is a namespaced resource to empty, with the verbs it serves.
type deletable struct {
	gvr   schema.GroupVersionResource
	verbs metav1.Verbs
}

// deletableResources picks, from discovery, the top-level namespaced
// resources the controller can delete and list. gvErrs are group versions
// that could not be parsed.
func deletableResources(lists []*metav1.APIResourceList) (out []deletable, gvErrs []error) {
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			gvErrs = append(gvErrs, fmt.Errorf("parse group version %q: %w", l.GroupVersion, err))
			continue
		}
		for _, r := range l.APIResources {
			if !r.Namespaced || strings.Contains(r.Name, "/") {
				continue
			}
			if !slices.Contains(r.Verbs, "delete") && !slices.Contains(r.Verbs, "deletecollection") {
				continue
			}
			if !slices.Contains(r.Verbs, "list") {
				continue // cannot tell when it is empty
			}
			out = append(out, deletable{gvr: gv.WithResource(r.Name), verbs: r.Verbs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.String() < out[j].gvr.String() })
	return out, gvErrs
}

// contentResult is the outcome of one deletion pass over a namespace.
type contentResult struct {
	discoveryErr error
	gvErrs       []error
	deleteErrs   []error
	remaining    map[schema.GroupResource]int
	finalizers   map[string]int
	estimate     time.Duration
}

// deleteContent deletes everything in namespace ns and counts what is
// left. Discovery failures are not fatal: whatever was discovered is
// deleted, but the namespace is not finalized.
func (c *Controller) deleteContent(ctx context.Context, ns string) contentResult {
	r := contentResult{remaining: map[schema.GroupResource]int{}, finalizers: map[string]int{}}
	lists, err := c.cfg.Discovery.ServerPreferredNamespacedResources()
	if err != nil {
		r.discoveryErr = err
		var gerr *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gerr) {
			return r
		}
	}
	resources, gvErrs := deletableResources(lists)
	r.gvErrs = gvErrs
	now := time.Now()
	for _, d := range resources {
		items, err := c.deleteResource(ctx, ns, d)
		if err != nil {
			r.deleteErrs = append(r.deleteErrs, err)
			continue
		}
		for _, it := range items {
			r.remaining[d.gvr.GroupResource()]++
			for _, f := range it.Finalizers {
				r.finalizers[f]++
			}
			if dt := it.DeletionTimestamp; dt != nil && dt.Time.After(now) {
				r.estimate = max(r.estimate, min(dt.Time.Sub(now), maxRecheck))
			}
		}
	}
	return r
}

// deleteResource deletes all objects of one resource in ns, with one
// deletecollection where the resource serves it, else one by one, and
// returns those still there afterwards.
func (c *Controller) deleteResource(ctx context.Context, ns string, d deletable) ([]metav1.PartialObjectMetadata, error) {
	res := c.cfg.Metadata.Resource(d.gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	collected := false
	if slices.Contains(d.verbs, "deletecollection") {
		err := res.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case err == nil:
			collected = true
		case !apierrors.IsMethodNotSupported(err) && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("delete collection %s: %w", d.gvr.GroupResource(), err)
		}
	}
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.gvr.GroupResource(), err)
	}
	if collected || !slices.Contains(d.verbs, "delete") {
		return list.Items, nil
	}
	deleted := 0
	for _, it := range list.Items {
		if it.DeletionTimestamp != nil {
			continue
		}
		uid := it.UID
		o := opts
		o.Preconditions = &metav1.Preconditions{UID: &uid}
		err := res.Delete(ctx, it.Name, o)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete %s %s: %w", d.gvr.GroupResource(), it.Name, err)
		}
		deleted++
	}
	if deleted == 0 {
		return list.Items, nil
	}
	list, err = res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.gvr.GroupResource(), err)
	}
	return list.Items, nil
}

// err reports whether the namespace may be finalized (nil) or why not.
func (r contentResult) err() error {
	errs := append(append([]error{}, r.gvErrs...), r.deleteErrs...)
	if r.discoveryErr != nil {
		errs = append(errs, r.discoveryErr)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(r.remaining) > 0 {
		return &contentRemainingError{estimate: r.estimate, msg: remainingMessage(r.remaining)}
	}
	return nil
}

func remainingMessage(remaining map[schema.GroupResource]int) string {
	var parts []string
	for gr, n := range remaining {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gr.Resource, gr.Group, n))
		}
	}
	sort.Strings(parts)
	return "Some resources are remaining: " + strings.Join(parts, ", ")
}

// conditions are the failure conditions of the pass, with upstream's
// types, reasons and messages; mergeConditions fills in the rest.
func (r contentResult) conditions() []corev1.NamespaceCondition {
	var out []corev1.NamespaceCondition
	add := func(t corev1.NamespaceConditionType, reason, msg string) {
		out = append(out, corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg})
	}
	if r.discoveryErr != nil {
		msg := r.discoveryErr.Error()
		var gerr *discovery.ErrGroupDiscoveryFailed
		if errors.As(r.discoveryErr, &gerr) {
			msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gerr.Groups), r.discoveryErr)
		}
		add(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
	}
	if len(r.gvErrs) > 0 {
		add(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", errors.Join(r.gvErrs...).Error())
	}
	if len(r.deleteErrs) > 0 {
		msgs := make([]string, 0, len(r.deleteErrs))
		for _, e := range r.deleteErrs {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		add(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	if len(r.remaining) > 0 {
		add(corev1.NamespaceContentRemaining, "SomeResourcesRemain", remainingMessage(r.remaining))
	}
	if len(r.finalizers) > 0 {
		var parts []string
		for f, n := range r.finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		add(corev1.NamespaceFinalizersRemaining, "SomeFinalizerRemain", "Some finalizers are remaining: "+strings.Join(parts, ", "))
	}
	return out
}

// conditionTypes are the conditions this controller owns, with the reason
// and message each has when nothing is wrong (upstream's wording).
var conditionTypes = []struct {
	t         corev1.NamespaceConditionType
	okReason  string
	okMessage string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentRemoved", "All content successfully removed"},
}

// mergeConditions sets each owned condition on status to the failure in
// failures, or to its "ok" form, and reports whether status changed. The
// transition time moves only when the status does.
func mergeConditions(status *corev1.NamespaceStatus, failures []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, ct := range conditionTypes {
		want := corev1.NamespaceCondition{Type: ct.t, Status: corev1.ConditionFalse, Reason: ct.okReason, Message: ct.okMessage}
		for _, f := range failures {
			if f.Type == ct.t {
				want = f
			}
		}
		want.LastTransitionTime = now
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == ct.t })
		if i < 0 {
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		cur := &status.Conditions[i]
		if cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
			continue
		}
		if cur.Status == want.Status {
			want.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = want
		changed = true
	}
	return changed
}
