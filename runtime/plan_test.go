package runtime

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func planPod(policy corev1.RestartPolicy, inits int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
		Spec: corev1.PodSpec{
			RestartPolicy: policy,
			Containers:    []corev1.Container{{Name: "a", Image: "img-a:1"}, {Name: "b", Image: "img-b:1"}},
		},
	}
	for i := 0; i < inits; i++ {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "init" + string(rune('0'+i)), Image: "init:1"})
	}
	return pod
}

func goodSandbox() SandboxStatus {
	return SandboxStatus{ID: "sb1", Attempt: 0, State: StateRunning, IP: "10.1.0.5", NetNSPath: "/run/netns/x"}
}

func running(name, image string) ContainerStatus {
	return ContainerStatus{ID: "id-" + name, Name: name, Image: image, State: StateRunning, SandboxID: "sb1", StartedAt: t0}
}

func exited(name, image string, code int32) ContainerStatus {
	return ContainerStatus{ID: "id-" + name + "-x", Name: name, Image: image, State: StateExited, ExitCode: code, SandboxID: "sb1", FinishedAt: t0}
}

func withState(cs ContainerStatus, s State) ContainerStatus { cs.State = s; return cs }

func status(sbs []SandboxStatus, cs ...ContainerStatus) *PodStatus {
	return &PodStatus{UID: "uid-1", Name: "web", Namespace: "prod", Sandboxes: sbs, Containers: cs}
}

func sb(s ...SandboxStatus) []SandboxStatus { return s }

func TestComputePodActions(t *testing.T) {
	deadSandbox := goodSandbox()
	deadSandbox.State = StateExited
	noIP := goodSandbox()
	noIP.IP = ""
	old := goodSandbox()
	old.ID = "sb0"
	hostSandbox := goodSandbox()
	hostSandbox.NetNSPath, hostSandbox.IP = "", ""

	tests := []struct {
		name   string
		pod    *corev1.Pod
		mutate func(*corev1.Pod)
		status *PodStatus
		want   PodActions
	}{
		{name: "new pod", pod: planPod(corev1.RestartPolicyAlways, 0), status: status(nil),
			want: PodActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}}},
		{name: "new pod, nil status", pod: planPod(corev1.RestartPolicyAlways, 0), status: nil,
			want: PodActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}}},
		{name: "new pod with init containers", pod: planPod(corev1.RestartPolicyAlways, 2), status: status(nil),
			want: PodActions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}, ContainersToStart: []int{}}},
		{name: "sandbox died", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(deadSandbox), exited("a", "img-a:1", 0), exited("b", "img-b:1", 137)),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{name: "two running sandboxes", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(goodSandbox(), old), running("a", "img-a:1"), running("b", "img-b:1")),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{name: "sandbox without IP", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(noIP), running("a", "img-a:1"), running("b", "img-b:1")),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{name: "network mode changed", pod: planPod(corev1.RestartPolicyAlways, 0), mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			status: status(sb(goodSandbox()), running("a", "img-a:1"), running("b", "img-b:1")),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{name: "host network sandbox fine without IP", pod: planPod(corev1.RestartPolicyAlways, 0), mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			status: status(sb(hostSandbox), running("a", "img-a:1"), running("b", "img-b:1")),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "sandbox died, Never, containers ran: do not recreate", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(deadSandbox), exited("a", "img-a:1", 0), exited("b", "img-b:1", 1)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{}}},
		{name: "sandbox died, Never, no container ever created: retry", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(deadSandbox)),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}}},
		{name: "sandbox died, OnFailure, all succeeded: done", pod: planPod(corev1.RestartPolicyOnFailure, 0),
			status: status(sb(deadSandbox), exited("a", "img-a:1", 0), exited("b", "img-b:1", 0)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{}}},
		{name: "sandbox died, OnFailure, one failed: restart it alone", pod: planPod(corev1.RestartPolicyOnFailure, 0),
			status: status(sb(deadSandbox), exited("a", "img-a:1", 0), exited("b", "img-b:1", 2)),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{1}}},
		{name: "sandbox died with init containers: start over", pod: planPod(corev1.RestartPolicyAlways, 1),
			status: status(sb(deadSandbox), exited("init0", "init:1", 0), exited("a", "img-a:1", 0)),
			want:   PodActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, InitContainersToStart: []int{0}, ContainersToStart: []int{}}},
		{name: "all running", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), running("b", "img-b:1")),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "missing container started", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1")),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{1}}},
		{name: "Always restarts a succeeded container", pod: planPod(corev1.RestartPolicyAlways, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), exited("b", "img-b:1", 0)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{1}}},
		{name: "OnFailure keeps a succeeded container", pod: planPod(corev1.RestartPolicyOnFailure, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), exited("b", "img-b:1", 0)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "OnFailure restarts a failed container", pod: planPod(corev1.RestartPolicyOnFailure, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), exited("b", "img-b:1", 1)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{1}}},
		{name: "Never keeps a failed container down", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), exited("b", "img-b:1", 1)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "Never, all exited: kill the pod", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(goodSandbox()), exited("a", "img-a:1", 0), exited("b", "img-b:1", 1)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "unknown state: kill then start", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), withState(running("b", "img-b:1"), StateUnknown)),
			want: PodActions{SandboxID: "sb1", ContainersToStart: []int{1}, ContainersToKill: map[string]KillInfo{
				"id-b": {Name: "b", Reason: KillReasonUnknown, Message: `Container is in "unknown" state, try killing it before restart`}}}},
		{name: "created, never started: start", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:1"), withState(running("b", "img-b:1"), StateCreated)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{1}}},
		{name: "image changed: kill and restart even under Never", pod: planPod(corev1.RestartPolicyNever, 0),
			status: status(sb(goodSandbox()), running("a", "img-a:0"), running("b", "img-b:1")),
			want: PodActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: map[string]KillInfo{
				"id-a": {Name: "a", Reason: KillReasonSpecChanged, Message: "Container a definition changed, will be restarted"}}}},
		{name: "init running: wait", pod: planPod(corev1.RestartPolicyAlways, 2),
			status: status(sb(goodSandbox()), running("init0", "init:1")),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "init done: next init", pod: planPod(corev1.RestartPolicyAlways, 2),
			status: status(sb(goodSandbox()), exited("init0", "init:1", 0)),
			want:   PodActions{SandboxID: "sb1", InitContainersToStart: []int{1}, ContainersToStart: []int{}}},
		{name: "created sandbox, init never started", pod: planPod(corev1.RestartPolicyAlways, 2),
			status: status(sb(goodSandbox())),
			want:   PodActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToStart: []int{}}},
		{name: "all inits done: start app containers", pod: planPod(corev1.RestartPolicyAlways, 2),
			status: status(sb(goodSandbox()), exited("init0", "init:1", 0), exited("init1", "init:1", 0)),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{0, 1}}},
		{name: "init failed, Always: retry it", pod: planPod(corev1.RestartPolicyAlways, 2),
			status: status(sb(goodSandbox()), exited("init0", "init:1", 0), exited("init1", "init:1", 3)),
			want:   PodActions{SandboxID: "sb1", InitContainersToStart: []int{1}, ContainersToStart: []int{}}},
		{name: "init failed, OnFailure: retry it", pod: planPod(corev1.RestartPolicyOnFailure, 1),
			status: status(sb(goodSandbox()), exited("init0", "init:1", 3)),
			want:   PodActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToStart: []int{}}},
		{name: "init failed, Never: the pod fails", pod: planPod(corev1.RestartPolicyNever, 2),
			status: status(sb(goodSandbox()), exited("init0", "init:1", 3)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "init unknown: kill and retry", pod: planPod(corev1.RestartPolicyAlways, 1),
			status: status(sb(goodSandbox()), withState(running("init0", "init:1"), StateUnknown)),
			want: PodActions{SandboxID: "sb1", InitContainersToStart: []int{0}, ContainersToStart: []int{}, ContainersToKill: map[string]KillInfo{
				"id-init0": {Name: "init0", Reason: KillReasonUnknown, Message: `Init container is in "unknown" state, try killing it before restart`}}}},
		{name: "app running, init records gone: initialized", pod: planPod(corev1.RestartPolicyAlways, 1),
			status: status(sb(goodSandbox()), running("a", "img-a:1")),
			want:   PodActions{SandboxID: "sb1", ContainersToStart: []int{1}}},
		{name: "being deleted: no restart, kill", pod: planPod(corev1.RestartPolicyAlways, 0),
			mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} },
			status: status(sb(goodSandbox()), exited("a", "img-a:1", 0), exited("b", "img-b:1", 0)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", ContainersToStart: []int{}}},
		{name: "being deleted: no new sandbox", pod: planPod(corev1.RestartPolicyAlways, 0),
			mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} },
			status: status(sb(deadSandbox)),
			want:   PodActions{KillPod: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{}}},
	}
	for _, tt := range tests {
		if tt.mutate != nil {
			tt.mutate(tt.pod)
		}
		got := ComputePodActions(tt.pod, PlanInputs{Status: tt.status, Now: t0, Backoff: nil})
		want := normalizeWant(tt.pod, tt.want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, want)
		}
	}
}

// normalizeWant fills the fields every plan has.
func normalizeWant(pod *corev1.Pod, w PodActions) PodActions {
	if w.ContainersToKill == nil {
		w.ContainersToKill = map[string]KillInfo{}
	}
	if w.Waiting == nil {
		w.Waiting = map[string]corev1.ContainerStateWaiting{}
	}
	if len(w.InitContainersToStart) == 1 {
		w.NextInitContainerToStart = &pod.Spec.InitContainers[w.InitContainersToStart[0]]
	}
	return w
}

func TestComputePodActionsBackoff(t *testing.T) {
	inBackoff := func(names ...string) BackoffFunc {
		return func(uid types.UID, name string, finished time.Time) (time.Duration, bool) {
			if uid != "uid-1" || !finished.Equal(t0) {
				return 0, false
			}
			for _, n := range names {
				if n == name {
					return 20 * time.Second, true
				}
			}
			return 0, false
		}
	}
	now := t0.Add(5 * time.Second)

	// An app container in back-off is held with CrashLoopBackOff; the pod is
	// not killed for it.
	pod := planPod(corev1.RestartPolicyAlways, 0)
	st := status(sb(goodSandbox()), exited("a", "img-a:1", 1), exited("b", "img-b:1", 1))
	got := ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: inBackoff("a")})
	wantWaiting := map[string]corev1.ContainerStateWaiting{"a": {Reason: ReasonCrashLoopBackOff,
		Message: "back-off 20s restarting failed container=a pod=web_prod(uid-1)"}}
	if got.KillPod || !reflect.DeepEqual(got.ContainersToStart, []int{1}) || !reflect.DeepEqual(got.Waiting, wantWaiting) || got.RetryAfter != 15*time.Second {
		t.Errorf("app back-off: %+v", got)
	}

	// All held: still no KillPod.
	got = ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: inBackoff("a", "b")})
	if got.KillPod || len(got.ContainersToStart) != 0 || len(got.Waiting) != 2 {
		t.Errorf("all in back-off: %+v", got)
	}

	// A never-run container has no back-off.
	st = status(sb(goodSandbox()), running("a", "img-a:1"))
	if got = ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: inBackoff("a", "b")}); !reflect.DeepEqual(got.ContainersToStart, []int{1}) || len(got.Waiting) != 0 {
		t.Errorf("never run: %+v", got)
	}

	// Init containers back off too.
	pod = planPod(corev1.RestartPolicyAlways, 1)
	st = status(sb(goodSandbox()), exited("init0", "init:1", 1))
	got = ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: inBackoff("init0")})
	if got.NextInitContainerToStart != nil || got.InitContainersToStart != nil || got.Waiting["init0"].Reason != ReasonCrashLoopBackOff {
		t.Errorf("init back-off: %+v", got)
	}
}

func TestUnhealthyContainersAreKilled(t *testing.T) {
	grace := int64(3)
	st := status(sb(goodSandbox()), running("a", "img-a:1"), running("b", "img-b:1"))
	idA := st.LatestContainer("a").ID
	in := PlanInputs{Status: st, Now: t0, Unhealthy: map[string]Unhealthy{idA: {Message: "Container a failed liveness probe, will be restarted", GracePeriod: &grace}}}

	got := ComputePodActions(planPod(corev1.RestartPolicyAlways, 0), in)
	kill, ok := got.ContainersToKill[idA]
	if got.KillPod || !ok || kill.Reason != KillReasonUnhealthy || *kill.GracePeriod != 3 || !reflect.DeepEqual(got.ContainersToStart, []int{0}) {
		t.Errorf("restartPolicy Always: %+v", got)
	}
	got = ComputePodActions(planPod(corev1.RestartPolicyNever, 0), in)
	if _, ok := got.ContainersToKill[idA]; !ok || len(got.ContainersToStart) != 0 || got.KillPod {
		t.Errorf("restartPolicy Never: %+v", got)
	}
	// A result for another instance (an old container ID) kills nothing.
	in.Unhealthy = map[string]Unhealthy{"old-id": {Message: "x"}}
	if got = ComputePodActions(planPod(corev1.RestartPolicyAlways, 0), in); len(got.ContainersToKill) != 0 {
		t.Errorf("stale result: %+v", got)
	}
}

func TestContainerHash(t *testing.T) {
	a := corev1.Container{Name: "a", Image: "nginx:1", Args: []string{"x"}}
	b := a
	b.Args = []string{"y"}
	c := a
	c.Image = "nginx:2"
	if ContainerHash(&a) != ContainerHash(&b) {
		t.Error("hash depends on more than name and image")
	}
	if ContainerHash(&a) == ContainerHash(&c) {
		t.Error("image change does not change the hash")
	}
	if !containerChanged(&c, &ContainerStatus{Name: "a", Image: "nginx:1"}) || containerChanged(&a, &ContainerStatus{Name: "a", Image: "nginx:1"}) {
		t.Error("containerChanged wrong")
	}
}

func TestBackoff(t *testing.T) {
	now := t0
	b := NewBackoff(10*time.Second, 5*time.Minute, func() time.Time { return now })
	type step struct {
		advance  time.Duration // clock moves before the query
		finished time.Duration // failure time, relative to t0
		wantWait bool
		wantD    time.Duration
	}
	steps := []step{
		{0, 0, false, 0}, // 1st failure: restart at once
		{0, 0, false, 0}, // same failure asked again: same answer
		{1 * time.Second, 1 * time.Second, true, 10 * time.Second}, // 2nd failure: 10s
		{5 * time.Second, 1 * time.Second, true, 10 * time.Second},
		{5 * time.Second, 1 * time.Second, false, 0}, // 10s passed: restart
		{1 * time.Second, 12 * time.Second, true, 20 * time.Second},
		{20 * time.Second, 12 * time.Second, false, 0},
		{0, 32 * time.Second, true, 40 * time.Second},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		d, wait := b.InBackoff("uid-1", "a", t0.Add(s.finished))
		if wait != s.wantWait || d != s.wantD {
			t.Fatalf("step %d: got %v %v, want %v %v", i, d, wait, s.wantD, s.wantWait)
		}
	}
	// Other containers and pods are independent.
	if _, wait := b.InBackoff("uid-1", "b", now); wait {
		t.Fatal("container b in back-off")
	}
	// A crash loop: each failure 1s after its restart; delays double up to max.
	b2 := NewBackoff(10*time.Second, 30*time.Second, func() time.Time { return now })
	var delays []time.Duration
	for i := 0; i < 6; i++ {
		fin := now
		d, wait := b2.InBackoff("u", "c", fin)
		if wait {
			delays = append(delays, d)
			now = now.Add(d)
			if _, wait := b2.InBackoff("u", "c", fin); wait {
				t.Fatalf("loop %d: still in back-off after %v", i, d)
			}
		}
		now = now.Add(time.Second) // runs 1s, fails again
	}
	if want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}; !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	// Running for more than 2*max resets the back-off.
	now = t0
	b3 := NewBackoff(10*time.Second, 5*time.Minute, func() time.Time { return now })
	b3.InBackoff("u", "c", t0)
	now = now.Add(time.Second)
	if _, wait := b3.InBackoff("u", "c", now); !wait {
		t.Fatal("quick second failure not delayed")
	}
	now = now.Add(10 * time.Second)
	b3.InBackoff("u", "c", t0.Add(time.Second)) // restart allowed, delay now 20s
	now = now.Add(11 * time.Minute)
	if d, wait := b3.InBackoff("u", "c", now); wait || d != 0 {
		t.Fatalf("after 11 minutes running: %v %v, want immediate restart", d, wait)
	}
	now = now.Add(time.Second)
	if d, _ := b3.InBackoff("u", "c", now); d != 10*time.Second {
		t.Fatalf("delay after reset %v, want 10s", d)
	}
	// Forget and GC.
	b3.Forget("u")
	if _, wait := b3.InBackoff("u", "c", now); wait {
		t.Fatal("forgotten pod still in back-off")
	}
	now = now.Add(time.Hour)
	b3.GC()
	if len(b3.entries) != 0 {
		t.Fatalf("GC left %d entries", len(b3.entries))
	}
}

// TestCrashLoopThroughPlan drives the plan with the real Backoff through a
// crash loop: immediate first restart, then 10s, then 20s.
func TestCrashLoopThroughPlan(t *testing.T) {
	now := t0
	b := NewBackoff(DefaultBackoffInitial, DefaultBackoffMax, func() time.Time { return now })
	pod := planPod(corev1.RestartPolicyAlways, 0)
	pod.Spec.Containers = pod.Spec.Containers[:1]
	crash := func(attempt int) *PodStatus {
		cs := exited("a", "img-a:1", 1)
		cs.FinishedAt = now
		cs.Attempt = uint32(attempt)
		return status(sb(goodSandbox()), cs)
	}
	st := crash(0)
	if a := ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: b.InBackoff}); !reflect.DeepEqual(a.ContainersToStart, []int{0}) {
		t.Fatalf("first crash: %+v", a)
	}
	for i, wantDelay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		now = now.Add(time.Second) // the restarted container ran 1s
		st = crash(i + 1)
		a := ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: b.InBackoff})
		if len(a.ContainersToStart) != 0 || a.Waiting["a"].Reason != ReasonCrashLoopBackOff || a.RetryAfter != wantDelay || a.KillPod {
			t.Fatalf("crash %d: %+v", i+1, a)
		}
		now = now.Add(wantDelay - time.Millisecond)
		if a := ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: b.InBackoff}); len(a.ContainersToStart) != 0 {
			t.Fatalf("crash %d: started before the delay", i+1)
		}
		now = now.Add(time.Millisecond)
		if a := ComputePodActions(pod, PlanInputs{Status: st, Now: now, Backoff: b.InBackoff}); !reflect.DeepEqual(a.ContainersToStart, []int{0}) {
			t.Fatalf("crash %d: not started after the delay: %+v", i+1, a)
		}
	}
}

func TestStartsAnything(t *testing.T) {
	init0 := &corev1.Container{Name: "init0"}
	for _, tc := range []struct {
		name string
		a    PodActions
		want bool
	}{
		{"empty plan", PodActions{ContainersToStart: []int{}}, false},
		{"kill only", PodActions{KillPod: true, ContainersToKill: map[string]KillInfo{"id-a": {Name: "a"}}}, false},
		{"held back", PodActions{Waiting: map[string]corev1.ContainerStateWaiting{"a": {Reason: ReasonCrashLoopBackOff}}, RetryAfter: time.Second}, false},
		{"new sandbox", PodActions{KillPod: true, CreateSandbox: true}, true},
		{"init container", PodActions{NextInitContainerToStart: init0, InitContainersToStart: []int{0}}, true},
		{"app container", PodActions{ContainersToStart: []int{1}}, true},
	} {
		if got := tc.a.StartsAnything(); got != tc.want {
			t.Errorf("%s: StartsAnything = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Through the plan: a running pod starts nothing; one whose only
	// container to start is in pull back-off neither.
	pod := planPod(corev1.RestartPolicyAlways, 0)
	st := status(sb(goodSandbox()), running("a", "img-a:1"), running("b", "img-b:1"))
	if a := ComputePodActions(pod, PlanInputs{Status: st, Now: t0}); a.StartsAnything() {
		t.Errorf("running pod: %+v starts something", a)
	}
	st = status(sb(goodSandbox()), running("a", "img-a:1"))
	pullWait := func(_ types.UID, name, _ string) (time.Duration, bool) { return time.Second, name == "b" }
	if a := ComputePodActions(pod, PlanInputs{Status: st, Now: t0, PullBackoff: pullWait}); a.StartsAnything() {
		t.Errorf("pull back-off: %+v starts something", a)
	}
	if a := ComputePodActions(pod, PlanInputs{Status: st, Now: t0}); !a.StartsAnything() {
		t.Errorf("container to start: %+v starts nothing", a)
	}
}
