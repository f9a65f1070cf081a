package status

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newPod(policy corev1.RestartPolicy, inits int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy: policy,
			Containers:    []corev1.Container{{Name: "b", Image: "img-b"}, {Name: "a", Image: "img-a"}},
		},
	}
	for i := 0; i < inits; i++ {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "init" + string(rune('0'+i)), Image: "init"})
	}
	return pod
}

func sandbox() runtime.SandboxStatus {
	return runtime.SandboxStatus{ID: "sb1", State: runtime.StateRunning, IP: "10.1.0.5", NetNSPath: "/run/netns/x", CreatedAt: t0}
}

func run(name string, attempt uint32, created time.Duration) runtime.ContainerStatus {
	return runtime.ContainerStatus{ID: name + "-" + string(rune('0'+attempt)), Name: name, Attempt: attempt, State: runtime.StateRunning,
		CreatedAt: t0.Add(created), StartedAt: t0.Add(created + time.Second), Image: "img-" + name, ImageRef: "sha256:" + name}
}

func exit(name string, attempt uint32, code int32, created time.Duration) runtime.ContainerStatus {
	cs := run(name, attempt, created)
	cs.State, cs.ExitCode, cs.FinishedAt = runtime.StateExited, code, t0.Add(created+2*time.Second)
	return cs
}

func rstatus(sbs []runtime.SandboxStatus, cs ...runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{UID: "uid-1", Name: "web", Namespace: "prod", Sandboxes: sbs, Containers: cs}
}

func sbs() []runtime.SandboxStatus { return []runtime.SandboxStatus{sandbox()} }

func cond(s corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func cstatus(list []corev1.ContainerStatus, name string) corev1.ContainerStatus {
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// condSummary is "type=status/reason" for the node's five conditions.
func condSummary(s corev1.PodStatus) map[corev1.PodConditionType]string {
	out := map[corev1.PodConditionType]string{}
	for _, c := range s.Conditions {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

func TestComputePhasesAndConditions(t *testing.T) {
	type conds = map[corev1.PodConditionType]string
	ready := func(rts, init, ready, cready string) conds {
		return conds{corev1.PodReadyToStartContainers: rts, corev1.PodInitialized: init, corev1.PodReady: ready,
			corev1.ContainersReady: cready, corev1.PodScheduled: "True/"}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		rs       *runtime.PodStatus
		in       Inputs
		want     corev1.PodPhase
		conds    conds
		states   map[string]string // container name -> state summary
		podSt    corev1.PodPhase   // pod.Status.Phase before
		terminal bool
	}{
		{name: "nothing yet", pod: newPod(corev1.RestartPolicyAlways, 0), rs: nil, want: corev1.PodPending,
			conds:  ready("False/", "True/", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"a": "waiting/ContainerCreating", "b": "waiting/ContainerCreating"}},
		{name: "init containers pending", pod: newPod(corev1.RestartPolicyAlways, 1), rs: rstatus(sbs()), want: corev1.PodPending,
			conds:  ready("True/", "False/ContainersNotInitialized", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"init0": "waiting/PodInitializing", "a": "waiting/PodInitializing"}},
		{name: "init running", pod: newPod(corev1.RestartPolicyAlways, 1), rs: rstatus(sbs(), run("init0", 0, 0)), want: corev1.PodPending,
			conds:  ready("True/", "False/ContainersNotInitialized", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"init0": "running", "a": "waiting/PodInitializing"}},
		{name: "init done, apps creating", pod: newPod(corev1.RestartPolicyAlways, 1), rs: rstatus(sbs(), exit("init0", 0, 0, 0)), want: corev1.PodPending,
			conds:  ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"init0": "terminated/Completed", "a": "waiting/PodInitializing"}},
		{name: "running and ready", pod: newPod(corev1.RestartPolicyAlways, 1), rs: rstatus(sbs(), exit("init0", 0, 0, 0), run("a", 0, time.Second), run("b", 0, time.Second)),
			want: corev1.PodRunning, conds: ready("True/", "True/", "True/", "True/"),
			states: map[string]string{"init0": "terminated/Completed", "a": "running", "b": "running"}},
		{name: "one running, one creating", pod: newPod(corev1.RestartPolicyAlways, 0), rs: rstatus(sbs(), run("a", 0, 0)),
			in:   Inputs{Waiting: map[string]corev1.ContainerStateWaiting{"b": {Reason: "ErrImagePull", Message: "pull failed"}}},
			want: corev1.PodPending, conds: ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"a": "running", "b": "waiting/ErrImagePull"}},
		{name: "crash loop under Always is Running", pod: newPod(corev1.RestartPolicyAlways, 0), rs: rstatus(sbs(), run("a", 0, 0), exit("b", 3, 1, 0)),
			in:   Inputs{Waiting: map[string]corev1.ContainerStateWaiting{"b": {Reason: "CrashLoopBackOff", Message: "back-off 40s"}}},
			want: corev1.PodRunning, conds: ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"a": "running", "b": "waiting/CrashLoopBackOff last=terminated/Error restarts=3"}},
		{name: "Never, all succeeded", pod: newPod(corev1.RestartPolicyNever, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 0, 0)),
			want: corev1.PodSucceeded, conds: ready("True/", "True/PodCompleted", "False/PodCompleted", "False/PodCompleted"),
			states: map[string]string{"a": "terminated/Completed", "b": "terminated/Completed"}},
		{name: "Never, one failed", pod: newPod(corev1.RestartPolicyNever, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 2, 0)),
			want: corev1.PodFailed, conds: ready("True/", "True/", "False/PodFailed", "False/PodFailed"),
			states: map[string]string{"a": "terminated/Completed", "b": "terminated/Error"}},
		{name: "Never, one still running", pod: newPod(corev1.RestartPolicyNever, 0), rs: rstatus(sbs(), run("a", 0, 0), exit("b", 0, 2, 0)),
			want: corev1.PodRunning, conds: ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady")},
		{name: "OnFailure, one failed: restarting", pod: newPod(corev1.RestartPolicyOnFailure, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 2, 0)),
			want: corev1.PodRunning, conds: ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady")},
		{name: "OnFailure, all succeeded", pod: newPod(corev1.RestartPolicyOnFailure, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 0, 0)),
			want: corev1.PodSucceeded, conds: ready("True/", "True/PodCompleted", "False/PodCompleted", "False/PodCompleted")},
		{name: "Always, all exited: restarting", pod: newPod(corev1.RestartPolicyAlways, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 1, 0)),
			want: corev1.PodRunning, conds: ready("True/", "True/", "False/ContainersNotReady", "False/ContainersNotReady")},
		{name: "Always, terminal, all succeeded", pod: newPod(corev1.RestartPolicyAlways, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 0, 0)),
			terminal: true, want: corev1.PodSucceeded, conds: ready("True/", "True/PodCompleted", "False/PodCompleted", "False/PodCompleted")},
		{name: "Always, terminal, one failed", pod: newPod(corev1.RestartPolicyAlways, 0), rs: rstatus(sbs(), exit("a", 0, 0, 0), exit("b", 0, 137, 0)),
			terminal: true, want: corev1.PodFailed, conds: ready("True/", "True/", "False/PodFailed", "False/PodFailed")},
		{name: "Never, init failed", pod: newPod(corev1.RestartPolicyNever, 1), rs: rstatus(sbs(), exit("init0", 0, 1, 0)),
			want: corev1.PodFailed, conds: ready("True/", "False/ContainersNotInitialized", "False/PodFailed", "False/PodFailed"),
			states: map[string]string{"init0": "terminated/Error", "a": "waiting/PodInitializing"}},
		{name: "Always, init failed, back-off: Pending", pod: newPod(corev1.RestartPolicyAlways, 1), rs: rstatus(sbs(), exit("init0", 2, 1, 0)),
			in:   Inputs{Waiting: map[string]corev1.ContainerStateWaiting{"init0": {Reason: "CrashLoopBackOff"}}},
			want: corev1.PodPending, conds: ready("True/", "False/ContainersNotInitialized", "False/ContainersNotReady", "False/ContainersNotReady"),
			states: map[string]string{"init0": "waiting/CrashLoopBackOff last=terminated/Error restarts=2"}},
		{name: "sandbox gone after success stays Succeeded", pod: newPod(corev1.RestartPolicyNever, 0), podSt: corev1.PodSucceeded, rs: nil,
			want: corev1.PodSucceeded, conds: ready("False/", "True/PodCompleted", "False/PodCompleted", "False/PodCompleted")},
		{name: "no way out of Failed", pod: newPod(corev1.RestartPolicyAlways, 0), podSt: corev1.PodFailed, rs: rstatus(sbs(), run("a", 0, 0), run("b", 0, 0)),
			want: corev1.PodFailed, conds: ready("True/", "True/", "False/PodFailed", "False/PodFailed")},
		{name: "sandbox dead", pod: newPod(corev1.RestartPolicyAlways, 0),
			rs:   rstatus([]runtime.SandboxStatus{{ID: "sb1", State: runtime.StateExited}}, exit("a", 0, 137, 0), exit("b", 0, 137, 0)),
			want: corev1.PodRunning, conds: ready("False/", "True/", "False/ContainersNotReady", "False/ContainersNotReady")},
	}
	for _, tt := range tests {
		tt.pod.Status.Phase = tt.podSt
		in := tt.in
		in.Now, in.PodIsTerminal = t0, tt.terminal
		s := Compute(tt.pod, tt.rs, in)
		if s.Phase != tt.want {
			t.Errorf("%s: phase %s, want %s", tt.name, s.Phase, tt.want)
		}
		if got := condSummary(s); !reflect.DeepEqual(got, tt.conds) {
			t.Errorf("%s: conditions\n got %v\nwant %v", tt.name, got, tt.conds)
		}
		for name, want := range tt.states {
			all := append(append([]corev1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
			if got := stateSummary(cstatus(all, name)); got != want {
				t.Errorf("%s: container %s state %q, want %q", tt.name, name, got, want)
			}
		}
	}
}

func stateSummary(s corev1.ContainerStatus) string {
	one := func(st corev1.ContainerState) string {
		switch {
		case st.Running != nil:
			return "running"
		case st.Terminated != nil:
			return "terminated/" + st.Terminated.Reason
		case st.Waiting != nil:
			return "waiting/" + st.Waiting.Reason
		}
		return ""
	}
	out := one(s.State)
	if last := one(s.LastTerminationState); last != "" {
		out += " last=" + last
	}
	if s.RestartCount > 0 {
		out += " restarts=" + string(rune('0'+s.RestartCount))
	}
	return out
}

func TestComputeContainerStatuses(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 1)
	rs := rstatus(sbs(),
		exit("init0", 0, 0, 0),
		run("a", 2, 10*time.Second), exit("a", 1, 1, 5*time.Second), exit("a", 0, 1, 0),
		run("b", 0, time.Second))
	s := Compute(pod, rs, Inputs{Now: t0})
	if len(s.ContainerStatuses) != 2 || s.ContainerStatuses[0].Name != "a" || s.ContainerStatuses[1].Name != "b" {
		t.Fatalf("container statuses not sorted by name: %+v", s.ContainerStatuses)
	}
	a := s.ContainerStatuses[0]
	wantA := corev1.ContainerStatus{
		Name: "a", RestartCount: 2, Image: "img-a", ImageID: "sha256:a", ContainerID: "containerd://a-2",
		Ready: true, Started: ptr(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(11 * time.Second))}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", StartedAt: metav1.NewTime(t0.Add(6 * time.Second)), FinishedAt: metav1.NewTime(t0.Add(7 * time.Second)),
			ContainerID: "containerd://a-1"}},
	}
	if !reflect.DeepEqual(a, wantA) {
		t.Errorf("container a:\n got %+v\nwant %+v", a, wantA)
	}
	init0 := s.InitContainerStatuses[0]
	if !init0.Ready || *init0.Started || init0.State.Terminated == nil || init0.State.Terminated.Reason != "Completed" {
		t.Errorf("init0: %+v", init0)
	}
	if s.PodIP != "10.1.0.5" || !reflect.DeepEqual(s.PodIPs, []corev1.PodIP{{IP: "10.1.0.5"}}) {
		t.Errorf("pod IPs %q %v", s.PodIP, s.PodIPs)
	}
	if s.QOSClass != corev1.PodQOSBestEffort || s.StartTime == nil || !s.StartTime.Time.Equal(t0) {
		t.Errorf("qos %s start %v", s.QOSClass, s.StartTime)
	}
}

func ptr[T any](v T) *T { return &v }

func TestComputeProbes(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{} // b
	pod.Spec.Containers[1].StartupProbe = &corev1.Probe{}   // a
	rs := rstatus(sbs(), run("a", 0, 0), run("b", 0, 0))
	tests := []struct {
		name                     string
		readiness, startup       ProbeFunc
		aStarted, aReady, bReady bool
		ready                    corev1.ConditionStatus
	}{
		{"no results yet", nil, nil, false, false, false, corev1.ConditionFalse},
		{"all succeeded", func(string) (bool, bool) { return true, true }, func(string) (bool, bool) { return true, true }, true, true, true, corev1.ConditionTrue},
		{"readiness failed", func(id string) (bool, bool) { return false, id == "containerd://b-0" }, func(string) (bool, bool) { return true, true }, true, true, false, corev1.ConditionFalse},
		{"startup failed", func(string) (bool, bool) { return true, true }, func(id string) (bool, bool) { return false, id == "containerd://a-0" }, false, false, true, corev1.ConditionFalse},
	}
	for _, tt := range tests {
		s := Compute(pod, rs, Inputs{Now: t0, Readiness: tt.readiness, Startup: tt.startup})
		a, b := cstatus(s.ContainerStatuses, "a"), cstatus(s.ContainerStatuses, "b")
		if *a.Started != tt.aStarted || a.Ready != tt.aReady || b.Ready != tt.bReady || cond(s, corev1.PodReady).Status != tt.ready {
			t.Errorf("%s: a started %v ready %v, b ready %v, Ready %s", tt.name, *a.Started, a.Ready, b.Ready, cond(s, corev1.PodReady).Status)
		}
	}
	// Unready message lists names.
	s := Compute(pod, rs, Inputs{Now: t0})
	if c := cond(s, corev1.ContainersReady); c.Message != "containers with unready status: [b a]" {
		t.Errorf("message %q", c.Message)
	}
}

func TestComputeReadinessGatesAndForeignConditions(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	rs := rstatus(sbs(), run("a", 0, 0), run("b", 0, 0))
	s := Compute(pod, rs, Inputs{Now: t0})
	if c := cond(s, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Reason != ReasonReadinessGatesNotReady {
		t.Errorf("gate missing: %+v", c)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}, {Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
	s = Compute(pod, rs, Inputs{Now: t0})
	if c := cond(s, corev1.PodReady); c.Status != corev1.ConditionTrue {
		t.Errorf("gate true: %+v", c)
	}
	if s.Conditions[0].Type != "example.com/lb" || s.Conditions[1].Type != corev1.DisruptionTarget || len(s.Conditions) != 7 {
		t.Errorf("foreign conditions not kept first: %+v", s.Conditions)
	}
}

func TestComputeTransitionTimesAndStartTime(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	rs := rstatus(sbs(), run("a", 0, 0))
	first := Compute(pod, rs, Inputs{Now: t0.Add(500 * time.Millisecond)})
	if c := cond(first, corev1.PodReady); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("time not truncated to seconds: %v", c.LastTransitionTime)
	}
	// Later, b starts: Ready and ContainersReady change, the rest keep their time.
	later := t0.Add(time.Minute)
	rs2 := rstatus(sbs(), run("a", 0, 0), run("b", 0, time.Second))
	second := Compute(pod, rs2, Inputs{Now: later, OldStatus: &first})
	for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		if c := cond(second, ct); c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Time.Equal(later) {
			t.Errorf("%s: %+v, want True at %v", ct, c, later)
		}
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReadyToStartContainers} {
		if c := cond(second, ct); !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("%s: transition time %v, want kept %v", ct, c.LastTransitionTime, t0)
		}
	}
	if !second.StartTime.Time.Equal(t0) {
		t.Errorf("start time %v, want kept %v", second.StartTime, t0)
	}
	// Without OldStatus, pod.Status is the previous status.
	pod.Status = second
	third := Compute(pod, rs2, Inputs{Now: later.Add(time.Hour)})
	if !Equal(second, third) || !third.StartTime.Time.Equal(t0) {
		t.Errorf("recompute changed the status:\n%+v\n%+v", second, third)
	}
	// The computed status shares nothing with the old one.
	third.Conditions[0].Status = "X"
	if pod.Status.Conditions[0].Status == "X" {
		t.Error("status aliases the pod's")
	}
}

func TestComputeIPs(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	hostIPs := []string{"192.0.2.1", "2001:db8::1", "192.0.2.2"}
	s := Compute(pod, rstatus(sbs()), Inputs{Now: t0, HostIPs: hostIPs})
	if s.HostIP != "192.0.2.1" || len(s.HostIPs) != 2 || s.PodIP != "10.1.0.5" {
		t.Errorf("ips: %s %v %s", s.HostIP, s.HostIPs, s.PodIP)
	}
	pod.Spec.HostNetwork = true
	s = Compute(pod, rstatus([]runtime.SandboxStatus{{ID: "sb1", State: runtime.StateRunning}}), Inputs{Now: t0, HostIPs: hostIPs})
	if s.PodIP != "192.0.2.1" || len(s.PodIPs) != 3 {
		t.Errorf("host network pod IPs: %s %v", s.PodIP, s.PodIPs)
	}
	// A dead sandbox has no IP, but a finished pod keeps its last one.
	pod = newPod(corev1.RestartPolicyNever, 0)
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.5"}}
	s = Compute(pod, rstatus([]runtime.SandboxStatus{{ID: "sb1", State: runtime.StateExited}}, exit("a", 0, 0, 0), exit("b", 0, 0, 0)), Inputs{Now: t0})
	if s.Phase != corev1.PodSucceeded || s.PodIP != "10.1.0.5" {
		t.Errorf("terminal pod IP: %s %s", s.Phase, s.PodIP)
	}
}

func TestComputeVanishedAndUnknown(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	old := Compute(pod, rstatus(sbs(), run("a", 0, 0), run("b", 0, 0)), Inputs{Now: t0})
	// a vanished from the runtime, b is in an unknown state.
	unknown := run("b", 0, 0)
	unknown.State = runtime.StateUnknown
	s := Compute(pod, rstatus(sbs(), unknown), Inputs{Now: t0, OldStatus: &old})
	a, b := cstatus(s.ContainerStatuses, "a"), cstatus(s.ContainerStatuses, "b")
	if a.State.Waiting == nil || a.LastTerminationState.Terminated == nil || a.LastTerminationState.Terminated.ExitCode != 137 || a.RestartCount != 1 {
		t.Errorf("vanished a: %+v", a)
	}
	if b.State.Terminated == nil || b.State.Terminated.Reason != ReasonStatusUnknown || b.RestartCount != 1 {
		t.Errorf("unknown b: %+v", b)
	}
	if s.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running", s.Phase)
	}
}

func TestComputeQOS(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	for i := range pod.Spec.Containers {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	if s := Compute(pod, nil, Inputs{Now: t0}); s.QOSClass != corev1.PodQOSGuaranteed {
		t.Errorf("qos %s", s.QOSClass)
	}
}

func TestEqual(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, 0)
	rs := rstatus(sbs(), run("a", 0, 0), run("b", 0, 0))
	base := Compute(pod, rs, Inputs{Now: t0})
	tests := []struct {
		name   string
		mutate func(*corev1.PodStatus)
		want   bool
	}{
		{"same", func(*corev1.PodStatus) {}, true},
		{"condition times only", func(s *corev1.PodStatus) {
			for i := range s.Conditions {
				s.Conditions[i].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
				s.Conditions[i].LastProbeTime = metav1.NewTime(t0.Add(time.Hour))
			}
		}, true},
		{"sub-second noise", func(s *corev1.PodStatus) {
			s.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(s.ContainerStatuses[0].State.Running.StartedAt.Add(300 * time.Millisecond))
		}, true},
		{"foreign condition", func(s *corev1.PodStatus) {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: "example.com/x", Status: corev1.ConditionTrue})
		}, true},
		{"disruption target", func(s *corev1.PodStatus) {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
		}, false},
		{"condition status", func(s *corev1.PodStatus) { s.Conditions[2].Status = corev1.ConditionFalse }, false},
		{"condition message", func(s *corev1.PodStatus) { s.Conditions[2].Message = "x" }, false},
		{"condition missing", func(s *corev1.PodStatus) { s.Conditions = s.Conditions[1:] }, false},
		{"phase", func(s *corev1.PodStatus) { s.Phase = corev1.PodFailed }, false},
		{"ready", func(s *corev1.PodStatus) { s.ContainerStatuses[0].Ready = false }, false},
		{"restart count", func(s *corev1.PodStatus) { s.ContainerStatuses[1].RestartCount = 4 }, false},
		{"start time moved a second", func(s *corev1.PodStatus) { t := metav1.NewTime(t0.Add(time.Second)); s.StartTime = &t }, false},
		{"pod IP", func(s *corev1.PodStatus) { s.PodIP = "10.1.0.6" }, false},
	}
	for _, tt := range tests {
		other := *base.DeepCopy()
		tt.mutate(&other)
		if got := Equal(base, other); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Equal does not modify its arguments.
	before := *base.DeepCopy()
	other := *base.DeepCopy()
	other.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(1500 * time.Millisecond))
	keep := other.ContainerStatuses[0].State.Running.StartedAt
	Equal(base, other)
	if !reflect.DeepEqual(before, base) || !other.ContainerStatuses[0].State.Running.StartedAt.Equal(&keep) {
		t.Error("Equal modified its arguments")
	}
}
