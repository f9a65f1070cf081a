package nodemetrics

import (
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// The conversions below are pure: a Node or Pod from the API, the matching
// part of a nodelet's summary, the window to report and the current time
// in; a metrics object (or false: no usable sample yet) out.

// nodeMetrics converts a node's summary. A node without a CPU rate or a
// working set is left out rather than reported as idle.
func nodeMetrics(node *corev1.Node, stats *statsv1alpha1.NodeStats, window time.Duration, now time.Time) (metricsv1beta1.NodeMetrics, bool) {
	usage, ts, ok := usage(stats.CPU, stats.Memory)
	if !ok {
		return metricsv1beta1.NodeMetrics{}, false
	}
	if ts.IsZero() {
		ts = now
	}
	return metricsv1beta1.NodeMetrics{
		ObjectMeta: objectMeta(&node.ObjectMeta, now),
		Timestamp:  metav1.NewTime(ts),
		Window:     metav1.Duration{Duration: window},
		Usage:      usage,
	}, true
}

// podMetrics converts a pod's summary. Containers without a CPU rate or a
// working set yet (just started) are left out, and so is a pod with no
// container left, as metrics-server does: autoscalers treat a missing pod
// differently from an idle one. Only running pods are reported.
func podMetrics(pod *corev1.Pod, stats *statsv1alpha1.PodStats, window time.Duration, now time.Time) (metricsv1beta1.PodMetrics, bool) {
	if pod.Status.Phase != corev1.PodRunning {
		return metricsv1beta1.PodMetrics{}, false
	}
	if stats.PodRef.UID != "" && pod.UID != "" && stats.PodRef.UID != string(pod.UID) {
		// A pod of the same name replaced the one measured.
		return metricsv1beta1.PodMetrics{}, false
	}
	pm := metricsv1beta1.PodMetrics{
		ObjectMeta: objectMeta(&pod.ObjectMeta, now),
		Window:     metav1.Duration{Duration: window},
	}
	var earliest time.Time
	for i := range stats.Containers {
		c := &stats.Containers[i]
		u, ts, ok := usage(c.CPU, c.Memory)
		if !ok {
			continue
		}
		if earliest.IsZero() || (!ts.IsZero() && ts.Before(earliest)) {
			earliest = ts
		}
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: u})
	}
	if len(pm.Containers) == 0 {
		return metricsv1beta1.PodMetrics{}, false
	}
	sort.Slice(pm.Containers, func(i, j int) bool { return pm.Containers[i].Name < pm.Containers[j].Name })
	if earliest.IsZero() {
		earliest = now
	}
	pm.Timestamp = metav1.NewTime(earliest)
	return pm, true
}

// usage is the cpu rate and working set of one sample, and the time of its
// CPU reading (zero if the nodelet gave none).
func usage(cpu *statsv1alpha1.CPUStats, mem *statsv1alpha1.MemoryStats) (corev1.ResourceList, time.Time, bool) {
	if cpu == nil || cpu.UsageNanoCores == nil || mem == nil || mem.WorkingSetBytes == nil {
		return nil, time.Time{}, false
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    quantity(*cpu.UsageNanoCores, resource.Nano, resource.DecimalSI),
		corev1.ResourceMemory: quantity(*mem.WorkingSetBytes, 0, resource.BinarySI),
	}, cpu.Time.Time, true
}

// objectMeta is what metrics objects carry of the measured object: name,
// namespace and labels (selectors match on them). creationTimestamp is
// when the metrics object was made, as metrics-server sets it.
func objectMeta(om *metav1.ObjectMeta, now time.Time) metav1.ObjectMeta {
	var labels map[string]string
	if len(om.Labels) > 0 {
		labels = make(map[string]string, len(om.Labels))
		for k, v := range om.Labels {
			labels[k] = v
		}
	}
	return metav1.ObjectMeta{
		Name:              om.Name,
		Namespace:         om.Namespace,
		Labels:            labels,
		CreationTimestamp: metav1.NewTime(now),
	}
}

// quantity builds a Quantity from an unsigned counter, as metrics-server
// does: a value beyond int64 loses one decimal digit of precision.
func quantity(v uint64, scale resource.Scale, format resource.Format) resource.Quantity {
	var q *resource.Quantity
	if v > math.MaxInt64 {
		q = resource.NewScaledQuantity(int64(v/10), scale+1)
	} else {
		q = resource.NewScaledQuantity(int64(v), scale)
	}
	q.Format = format
	return *q
}
