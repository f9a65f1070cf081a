package containerd

import (
	"testing"
	"time"

	tasktypes "github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"

	"github.com/nodelet/nodelet/runtime"
)

func TestContainerStatusFromTaskAndLabels(t *testing.T) {
	created := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	started := created.Add(time.Second)
	finished := created.Add(time.Minute)
	base := map[string]string{runtime.LabelContainer: "app", runtime.LabelAttempt: "2", runtime.LabelSandboxID: "sb"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	startedL := started.Format(time.RFC3339Nano)
	tests := []struct {
		name    string
		labels  map[string]string
		task    *taskInfo
		state   runtime.State
		code    int32
		reason  string
		finishe time.Time
	}{
		{"running task", with(runtime.LabelStartedAt, startedL), &taskInfo{status: tasktypes.Status_RUNNING}, runtime.StateRunning, 0, "", time.Time{}},
		{"created task", base, &taskInfo{status: tasktypes.Status_CREATED}, runtime.StateCreated, 0, "", time.Time{}},
		{"stopped task", with(runtime.LabelStartedAt, startedL), &taskInfo{status: tasktypes.Status_STOPPED, exitCode: 3, exitedAt: finished}, runtime.StateExited, 3, "Error", finished},
		{"exit recorded", with(runtime.LabelStartedAt, startedL, runtime.LabelExitCode, "0", runtime.LabelFinishedAt, finished.Format(time.RFC3339Nano)), nil, runtime.StateExited, 0, "Completed", finished},
		{"never started", base, nil, runtime.StateCreated, 0, "", time.Time{}},
		{"task lost", with(runtime.LabelStartedAt, startedL), nil, runtime.StateUnknown, 0, "TaskLost", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ti taskInfo
			if tt.task != nil {
				ti = *tt.task
			}
			s := containerStatus(containers.Container{ID: "c1", Labels: tt.labels, CreatedAt: created}, ti, tt.task != nil)
			if s.State != tt.state || s.ExitCode != tt.code || s.Reason != tt.reason || !s.FinishedAt.Equal(tt.finishe) {
				t.Errorf("got %+v", s)
			}
			if s.Name != "app" || s.Attempt != 2 || s.SandboxID != "sb" || !s.CreatedAt.Equal(created) {
				t.Errorf("identity: %+v", s)
			}
			if tt.labels[runtime.LabelStartedAt] != "" && !s.StartedAt.Equal(started) {
				t.Errorf("startedAt %v", s.StartedAt)
			}
		})
	}
}

func TestSortStatusesNewestFirst(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &runtime.PodStatus{
		Sandboxes: []runtime.SandboxStatus{{ID: "old", CreatedAt: t0}, {ID: "new", CreatedAt: t0.Add(time.Second)}},
		Containers: []runtime.ContainerStatus{
			{ID: "b0", Name: "b", CreatedAt: t0}, {ID: "a0", Name: "a", CreatedAt: t0},
			{ID: "a1", Name: "a", CreatedAt: t0.Add(time.Second)},
		},
	}
	sortStatuses(p)
	if p.LatestSandbox().ID != "new" || p.LatestContainer("a").ID != "a1" || p.LatestContainer("b").ID != "b0" {
		t.Errorf("order: %+v", p)
	}
}
