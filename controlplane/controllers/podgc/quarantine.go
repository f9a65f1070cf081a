package podgc

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// quarantine holds the nodes that pods are bound to but the informer does
// not know, each with the time it may be checked, as upstream's delaying
// queue of node names: a node is only taken for gone if it is still
// missing from the informer after the quarantine and a GET then says
// NotFound.
type quarantine map[string]time.Time

// observe updates q for one pass at now and returns the nodes due for the
// GET, sorted. A due node leaves the quarantine; if pods still point at
// it, it enters again with a fresh deadline, as upstream re-adds it. Nodes
// the informer knows, or no pod points at, are dropped.
func (q quarantine) observe(pods []*corev1.Pod, nodes map[string]*corev1.Node, now time.Time, wait time.Duration) []string {
	missing := map[string]bool{}
	for _, p := range pods {
		if n := p.Spec.NodeName; n != "" && nodes[n] == nil {
			missing[n] = true
		}
	}
	var due []string
	for n, at := range q {
		switch {
		case !missing[n]:
			delete(q, n)
		case !now.Before(at):
			delete(q, n)
			due = append(due, n)
		}
	}
	for n := range missing {
		if _, ok := q[n]; !ok {
			q[n] = now.Add(wait)
		}
	}
	slices.Sort(due)
	return due
}
