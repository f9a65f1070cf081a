package eviction

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// NodePressure holds the pressure conditions the eviction manager last
// found. The manager writes it; the node status and pod admission read it.
// It is made before all three, so calls go one way: manager → NodePressure
// ← readers.
type NodePressure struct {
	mu         sync.Mutex
	conditions []corev1.NodeConditionType
	changed    chan struct{}
}

// NewNodePressure returns a NodePressure with no condition.
func NewNodePressure() *NodePressure {
	return &NodePressure{changed: make(chan struct{}, 1)}
}

// Conditions returns the pressure conditions the node has now.
func (p *NodePressure) Conditions() []corev1.NodeConditionType {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.conditions)
}

// Pressure reports memory, disk and PID pressure (nodestatus.Config's
// Pressure).
func (p *NodePressure) Pressure() (mem, disk, pid bool) {
	c := p.Conditions()
	return slices.Contains(c, corev1.NodeMemoryPressure), slices.Contains(c, corev1.NodeDiskPressure),
		slices.Contains(c, corev1.NodePIDPressure)
}

// Changed receives a value after the conditions changed (changes that
// come while nobody reads collapse into one), so that the node status is
// written at once.
func (p *NodePressure) Changed() <-chan struct{} { return p.changed }

// set stores conds and reports whether they changed.
func (p *NodePressure) set(conds []corev1.NodeConditionType) bool {
	p.mu.Lock()
	changed := !slices.Equal(p.conditions, conds)
	p.conditions = conds
	p.mu.Unlock()
	if changed {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
	return changed
}
