// Package eviction is the node's eviction manager, as upstream's kubelet
// pkg/kubelet/eviction: every monitoring interval it measures the eviction
// signals (memory.available, nodefs.available, nodefs.inodesFree,
// imagefs.available, imagefs.inodesFree, pid.available) from /proc, the
// cgroups and statfs, compares them with the hard and soft thresholds,
// reports MemoryPressure, DiskPressure and PIDPressure, reclaims node-level
// resources (dead containers, unused images) for disk signals and, if that
// is not enough, evicts one pod per pass, ranked as upstream ranks them.
//
// The decisions are pure functions (Plan, Victim) over measurements; the
// Manager measures, calls them and acts through function dependencies (the
// garbage collectors, the pod killer), so that the whole policy is table
// tested without a node.
package eviction

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names a measured resource, in upstream's spelling.
type Signal string

// The signals the nodelet measures (upstream's names).
const (
	MemoryAvailable   Signal = "memory.available"
	NodeFSAvailable   Signal = "nodefs.available"
	NodeFSInodesFree  Signal = "nodefs.inodesFree"
	ImageFSAvailable  Signal = "imagefs.available"
	ImageFSInodesFree Signal = "imagefs.inodesFree"
	PIDAvailable      Signal = "pid.available"
)

// Reason is the status reason of evicted pods and of pods refused under
// pressure, as upstream's.
const Reason = "Evicted"

// Resources internal to eviction, as upstream's.
const (
	resourceInodes corev1.ResourceName = "inodes"
	resourcePIDs   corev1.ResourceName = "pids"
)

// signalResource is the resource a signal is about: the name in the
// eviction message and the key of the ranking and reclaim functions.
var signalResource = map[Signal]corev1.ResourceName{
	MemoryAvailable:   corev1.ResourceMemory,
	NodeFSAvailable:   corev1.ResourceEphemeralStorage,
	NodeFSInodesFree:  resourceInodes,
	ImageFSAvailable:  corev1.ResourceEphemeralStorage,
	ImageFSInodesFree: resourceInodes,
	PIDAvailable:      resourcePIDs,
}

// signalCondition is the node condition a met threshold reports.
var signalCondition = map[Signal]corev1.NodeConditionType{
	MemoryAvailable:   corev1.NodeMemoryPressure,
	NodeFSAvailable:   corev1.NodeDiskPressure,
	NodeFSInodesFree:  corev1.NodeDiskPressure,
	ImageFSAvailable:  corev1.NodeDiskPressure,
	ImageFSInodesFree: corev1.NodeDiskPressure,
	PIDAvailable:      corev1.NodePIDPressure,
}

// quantityFormat prints a signal's amounts as upstream does in messages:
// bytes in binary units, counts in decimal ones.
func quantityFormat(s Signal) resource.Format {
	if s == MemoryAvailable || s == NodeFSAvailable || s == ImageFSAvailable {
		return resource.BinarySI
	}
	return resource.DecimalSI
}

// Value is a threshold amount: an absolute quantity or, when Percentage is
// set, a fraction (0 < p <= 1) of the signal's capacity.
type Value struct {
	Quantity   int64
	Percentage float64
}

// amount is v against a capacity.
func (v Value) amount(capacity int64) int64 {
	if v.Percentage > 0 {
		return int64(math.Round(float64(capacity) * v.Percentage))
	}
	return v.Quantity
}

// Threshold is one "signal<value" statement. A hard threshold (GracePeriod
// 0) acts as soon as it is met; a soft one once it has been met for its
// whole GracePeriod.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	// MinReclaim, when set, keeps the threshold met until the signal is
	// that much above it (--eviction-minimum-reclaim).
	MinReclaim *Value
}

// Hard reports upstream's isHardEvictionThreshold.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// key identifies a threshold across passes: one hard and one soft
// threshold per signal at most (the parser refuses duplicates).
func (t Threshold) key() string {
	if t.Hard() {
		return string(t.Signal) + "/hard"
	}
	return string(t.Signal) + "/soft"
}

// Observation is one signal's measurement.
type Observation struct {
	Available, Capacity int64
}

// Observations are the signals measured in one pass; a signal that could
// not be measured is absent, and its thresholds are never met.
type Observations map[Signal]Observation

// met reports whether t is met by obs; withMinReclaim adds the minimum
// reclaim to the threshold (upstream's enforceMinReclaim).
func (t Threshold) met(obs Observations, withMinReclaim bool) bool {
	o, ok := obs[t.Signal]
	if !ok {
		return false
	}
	q := t.Value.amount(o.Capacity)
	if withMinReclaim && t.MinReclaim != nil {
		q += t.MinReclaim.amount(o.Capacity)
	}
	return o.Available < q
}
