package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodePressure(t *testing.T) {
	besteffort := pod("be", "", "")
	burstable := pod("bu", "100m", "")
	critical := pod("crit", "", "")
	critical.Annotations = map[string]string{"critical": "yes"}
	tolerant := pod("tol", "", "")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	wrongTaint := pod("wrong", "", "")
	wrongTaint.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists}}
	isCritical := func(p *corev1.Pod) bool { return p.Annotations["critical"] == "yes" }
	mem := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	disk := []corev1.NodeConditionType{corev1.NodeDiskPressure}
	both := []corev1.NodeConditionType{corev1.NodeDiskPressure, corev1.NodeMemoryPressure}
	for _, tc := range []struct {
		name  string
		conds []corev1.NodeConditionType
		pod   *corev1.Pod
		msg   string // "" admitted
	}{
		{"no pressure", nil, besteffort, ""},
		{"memory, BestEffort", mem, besteffort, "The node had condition: [MemoryPressure]. "},
		{"memory, Burstable", mem, burstable, ""},
		{"memory, BestEffort tolerating memory-pressure", mem, tolerant, ""},
		{"memory, BestEffort tolerating another taint", mem, wrongTaint, "The node had condition: [MemoryPressure]. "},
		{"memory, critical BestEffort", mem, critical, ""},
		{"disk, Burstable", disk, burstable, "The node had condition: [DiskPressure]. "},
		{"disk, critical", disk, critical, ""},
		{"disk and memory, Burstable", both, burstable, "The node had condition: [DiskPressure MemoryPressure]. "},
		{"PID, Burstable", []corev1.NodeConditionType{corev1.NodePIDPressure}, burstable, "The node had condition: [PIDPressure]. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NodePressure(func() []corev1.NodeConditionType { return tc.conds }, isCritical)
			r := h.Admit(Attributes{Pod: tc.pod})
			if tc.msg == "" {
				if !r.Admit {
					t.Errorf("refused: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "Evicted" || r.Message != tc.msg {
				t.Errorf("result %+v, want Evicted %q", r, tc.msg)
			}
		})
	}
}
