// Package cgroups puts pods into cgroups the way the kubelet does: a kubepods
// tree with burstable and besteffort tiers and one cgroup per pod, sized from
// the pods' requests and limits. The values are pure functions of the pod
// (values.go, qos.go); the Manager applies them through
// github.com/opencontainers/cgroups with the cgroupfs or the systemd driver,
// on cgroup v1 or v2.
//
// Tested: the values and names by table tests; v2 with the cgroupfs driver
// over a fake cgroup tree (the library's fs2 writes the files); v1 (or v2,
// on such a host) with the cgroupfs driver against the real kernel, as root,
// under a test-only root. Not tested here: the systemd driver's D-Bus calls
// (no systemd on the build machines) and v2 against a real kernel; both
// need a systemd/v2 host (lab VM).
package cgroups

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podresources"
)

// OOM score adjustments, as upstream (pkg/kubelet/qos/policy.go).
const (
	// PodInfraOOMScoreAdj is upstream's score for the pause container.
	PodInfraOOMScoreAdj = -998
	// GuaranteedOOMScoreAdj is the score of Guaranteed and node-critical
	// pods' containers.
	GuaranteedOOMScoreAdj = -997
	// BestEffortOOMScoreAdj is the score of BestEffort pods' containers.
	BestEffortOOMScoreAdj = 1000

	// burstableMinOOMScoreAdj keeps Burstable containers above a
	// Guaranteed pod using all the memory (1000 + GuaranteedOOMScoreAdj).
	burstableMinOOMScoreAdj = 1000 + GuaranteedOOMScoreAdj
	// burstableMaxOOMScoreAdj keeps Burstable containers below BestEffort.
	burstableMaxOOMScoreAdj = BestEffortOOMScoreAdj - 1

	oomScoreAdjMin = -1000
	oomScoreAdjMax = 1000

	systemCriticalPriority  = 2000000000
	systemNodeCriticalClass = "system-node-critical"
	configSourceAnnotation  = "kubernetes.io/config.source"
	configMirrorAnnotation  = "kubernetes.io/config.mirror"
	configSourceAPI         = "api"
)

// IsNodeCriticalPod reports upstream's "node critical" pods: critical
// (static, mirror, or priority >= system-critical) and of priority class
// system-node-critical. Their containers get the Guaranteed OOM score.
func IsNodeCriticalPod(pod *corev1.Pod) bool {
	if pod.Spec.PriorityClassName != systemNodeCriticalClass {
		return false
	}
	if _, mirror := pod.Annotations[configMirrorAnnotation]; mirror {
		return true
	}
	if src, ok := pod.Annotations[configSourceAnnotation]; ok && src != configSourceAPI {
		return true // static pod
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// OOMScoreAdj is the oom_score_adj upstream gives container c of pod on a
// node with memoryCapacity bytes of memory: -997 for Guaranteed (and node
// critical) pods, 1000 for BestEffort, and for Burstable
// 1000 - 1000*memoryRequest/memoryCapacity clamped to [3, 999] (a sidecar
// never scores above the pod's smallest regular container). The result may
// be negative: see ClampOOMScoreAdj.
func OOMScoreAdj(pod *corev1.Pod, c *corev1.Container, memoryCapacity int64) int {
	if IsNodeCriticalPod(pod) {
		return GuaranteedOOMScoreAdj
	}
	switch podresources.QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return burstableMaxOOMScoreAdj
	}
	adj := 1000 - (1000*c.Resources.Requests.Memory().Value())/memoryCapacity
	if isSidecar(pod, c) && len(pod.Spec.Containers) > 0 {
		if minAdj := 1000 - (1000*minRegularMemoryRequest(pod))/memoryCapacity; adj > minAdj {
			adj = minAdj
		}
	}
	switch {
	case adj < burstableMinOOMScoreAdj:
		return burstableMinOOMScoreAdj
	case adj > burstableMaxOOMScoreAdj:
		return burstableMaxOOMScoreAdj
	}
	return int(adj)
}

// ClampOOMScoreAdj raises adj to floor (and keeps it within [-1000, 1000]).
// Where the nodelet may not lower OOM scores (containerd's
// restrict_oom_score_adj), floor is the nodelet's own score: see
// OwnOOMScoreAdj.
func ClampOOMScoreAdj(adj, floor int) int {
	adj = max(adj, floor)
	return min(max(adj, oomScoreAdjMin), oomScoreAdjMax)
}

// SetOwnOOMScoreAdj writes this process's oom_score_adj, as upstream's
// kubelet applies its --oom-score-adj (default -999) at start. Lowering a
// score needs CAP_SYS_RESOURCE: without it the write fails and the caller
// keeps the score it was started with (a systemd unit's OOMScoreAdjust=).
func SetOwnOOMScoreAdj(v int) error {
	if v < oomScoreAdjMin || v > oomScoreAdjMax {
		return fmt.Errorf("oom_score_adj %d is not within [%d, %d]", v, oomScoreAdjMin, oomScoreAdjMax)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("write oom_score_adj %d: %w", v, err)
	}
	return nil
}

// OwnOOMScoreAdj reads this process's oom_score_adj, the floor to pass to
// ClampOOMScoreAdj on hosts where lowering a score is not permitted.
func OwnOOMScoreAdj() (int, error) {
	return readOOMScoreAdj("/proc/self/oom_score_adj")
}

func readOOMScoreAdj(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("read oom_score_adj: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse oom_score_adj from %s: %w", file, err)
	}
	return v, nil
}

// isSidecar reports whether c is one of pod's restartable init containers.
func isSidecar(pod *corev1.Pod, c *corev1.Container) bool {
	if !isRestartable(c) {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

func isRestartable(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// minRegularMemoryRequest is the smallest memory request among the pod's
// app containers.
func minRegularMemoryRequest(pod *corev1.Pod) int64 {
	var least int64 = -1
	for i := range pod.Spec.Containers {
		v := pod.Spec.Containers[i].Resources.Requests.Memory().Value()
		if least < 0 || v < least {
			least = v
		}
	}
	return max(least, 0)
}
