package runtime

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var gcNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// ctr is an instance of container name, created ageMin minutes ago; its
// ID is name-attempt and its log path name/attempt.log.
func ctr(name string, attempt uint32, state State, ageMin int) ContainerStatus {
	return ContainerStatus{ID: fmt.Sprintf("%s-%d", name, attempt), Name: name, Attempt: attempt, State: state,
		SandboxID: "sb1", CreatedAt: gcNow.Add(-time.Duration(ageMin) * time.Minute),
		LogPath: fmt.Sprintf("%s/%d.log", name, attempt)}
}

func gcPod(uid string, ctrs ...ContainerStatus) PodStatus {
	return PodStatus{UID: types.UID(uid), Namespace: "ns", Name: uid, Containers: ctrs,
		Sandboxes: []SandboxStatus{{ID: "sb1", State: StateRunning, CreatedAt: gcNow.Add(-time.Hour)}}}
}

// crashLoop is a container with attempts 0..n-1, all exited except the
// last in state last; attempt i is n-i minutes old.
func crashLoop(name string, n int, last State) []ContainerStatus {
	var out []ContainerStatus
	for i := n - 1; i >= 0; i-- {
		st := StateExited
		if i == n-1 {
			st = last
		}
		out = append(out, ctr(name, uint32(i), st, n-i))
	}
	return out
}

func TestPlanContainerGC(t *testing.T) {
	def := DefaultGCPolicy
	tests := []struct {
		name   string
		policy GCPolicy
		pods   []PodStatus
		gone   []string // pods not live
		want   []string // removed IDs, sorted
	}{
		{name: "keeps the newest dead per container", policy: def,
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateExited)...)},
			want: []string{"app-0", "app-1", "app-2"}},
		{name: "running instance plus the previous dead one", policy: def,
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateRunning)...)},
			want: []string{"app-0", "app-1"}},
		{name: "max per container 2", policy: GCPolicy{MaxPerPodContainer: 2, MaxContainers: -1},
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateRunning)...)},
			want: []string{"app-0"}},
		{name: "max per container 0 still keeps the latest dead", policy: GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1},
			pods: []PodStatus{gcPod("a", crashLoop("app", 3, StateExited)...)},
			want: []string{"app-0", "app-1"}},
		{name: "max per container 0 with a running one", policy: GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1},
			pods: []PodStatus{gcPod("a", crashLoop("app", 3, StateRunning)...)},
			want: []string{"app-0"}}, // app-1 is the latest exited (back-off)
		{name: "no per-container limit", policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1},
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateExited)...)}},
		{name: "created latest keeps the latest exited", policy: def,
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateCreated)...)},
			want: []string{"app-0", "app-1"}},
		{name: "min age", policy: GCPolicy{MinAge: 150 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1},
			// app-3 (1 min), app-2 (2 min) are too young: app-1 is the newest evictable.
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateRunning)...)},
			want: []string{"app-0"}},
		{name: "several containers are separate units", policy: def,
			pods: []PodStatus{gcPod("a", append(crashLoop("app", 3, StateExited), crashLoop("side", 2, StateExited)...)...)},
			want: []string{"app-0", "app-1", "side-0"}},
		{name: "max containers spread across pods", policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: 4},
			pods: []PodStatus{gcPod("a", crashLoop("app", 4, StateRunning)...), gcPod("b", crashLoop("web", 4, StateRunning)...)},
			want: []string{"app-0", "web-0"}},
		{name: "max containers oldest first beyond one per unit", policy: GCPolicy{MaxPerPodContainer: -1, MaxContainers: 1},
			pods: []PodStatus{gcPod("a", crashLoop("app", 2, StateExited)...), gcPod("b", ctr("web", 0, StateExited, 30))},
			// One per unit leaves app-1 and web-0 (both protected, latest): over the limit but kept.
			want: []string{"app-0"}},
		{name: "deleted pod loses all its dead containers and sandboxes", policy: def, gone: []string{"a"},
			pods: []PodStatus{withSandbox(gcPod("a", crashLoop("app", 3, StateExited)...), StateExited)},
			want: []string{"app-0", "app-1", "app-2", "sb1"}},
		{name: "deleted pod: running containers and their sandbox stay", policy: def, gone: []string{"a"},
			pods: []PodStatus{gcPod("a", crashLoop("app", 3, StateRunning)...)},
			want: []string{"app-0", "app-1"}},
		{name: "running and unknown never removed", policy: GCPolicy{MaxPerPodContainer: 0, MaxContainers: 0}, gone: []string{"a"},
			pods: []PodStatus{gcPod("a", ctr("app", 0, StateRunning, 10), ctr("side", 0, StateUnknown, 10))}},
		{name: "old dead sandbox without containers removed, newest kept", policy: def,
			pods: []PodStatus{sandboxes(gcPod("a", ctr("app", 0, StateExited, 50)),
				SandboxStatus{ID: "sb0", Attempt: 0, State: StateExited, CreatedAt: gcNow.Add(-2 * time.Hour)},
				SandboxStatus{ID: "sb2", Attempt: 2, State: StateExited, CreatedAt: gcNow.Add(-time.Minute)})},
			want: []string{"sb0"}}, // sb1 still holds app-0
		{name: "old dead sandbox with a kept container stays", policy: def,
			pods: []PodStatus{sandboxes(gcPod("a", ctr("app", 0, StateExited, 50)),
				SandboxStatus{ID: "sb2", Attempt: 2, State: StateRunning, CreatedAt: gcNow.Add(-time.Minute)})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := func(uid types.UID) bool { return !slices.Contains(tt.gone, string(uid)) }
			plan := PlanContainerGC(tt.policy, tt.pods, gcNow, live)
			var got []string
			for _, r := range plan {
				got = append(got, r.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("removed %v, want %v", got, tt.want)
			}
		})
	}
}

// withSandbox sets the state of the pod's sandbox sb1.
func withSandbox(p PodStatus, st State) PodStatus {
	p.Sandboxes[0].State = st
	return p
}

// sandboxes makes sb1 dead and adds others.
func sandboxes(p PodStatus, more ...SandboxStatus) PodStatus {
	p.Sandboxes[0].State = StateExited
	p.Sandboxes = append(p.Sandboxes, more...)
	return p
}

func TestPlanContainerGCOrderAndLogs(t *testing.T) {
	shared := ctr("app", 1, StateExited, 5)
	old := ctr("app", 0, StateExited, 10)
	old.LogPath = shared.LogPath // e.g. a reused attempt number
	pod := withSandbox(gcPod("a", shared, old), StateExited)
	pod.Sandboxes = append(pod.Sandboxes, SandboxStatus{ID: "sb0", State: StateExited, CreatedAt: gcNow.Add(-3 * time.Hour)})
	plan := PlanContainerGC(DefaultGCPolicy, []PodStatus{pod}, gcNow, func(types.UID) bool { return true })
	if len(plan) != 2 || plan[0].Kind != RemoveContainerKind || plan[0].ID != "app-0" || plan[1].ID != "sb0" {
		t.Fatalf("plan %+v", plan)
	}
	if plan[0].LogPath != "" {
		t.Errorf("log %q of a kept instance would be removed", plan[0].LogPath)
	}
	if !strings.Contains(plan[0].Reason, "per container") || plan[0].Pod != "ns/a" {
		t.Errorf("removal %+v", plan[0])
	}
}
