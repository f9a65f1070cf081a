package containerd

// Resource usage of the running sandboxes and containers, read from their
// cgroups by the shims: one containerd Metrics call for the whole
// namespace (as the CRI plugin's ListContainerStats does), which is what
// task.Metrics does per task. A task whose shim cannot answer (it may be
// exiting) is left out by containerd or skipped here; it never fails the
// list.

import (
	"context"
	"fmt"
	"time"

	cg1 "github.com/containerd/cgroups/v3/cgroup1/stats"
	cg2 "github.com/containerd/cgroups/v3/cgroup2/stats"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// ContainerMetrics returns the resource usage of every sandbox and
// container of the runtime's namespace whose task is running (or paused),
// in no particular order. Tasks that containerd cannot read, or whose data
// is not a cgroup v1 or v2 reading, are skipped (logged at debug level):
// the list fails only when containerd cannot be asked at all.
func (c *Runtime) ContainerMetrics(ctx context.Context) ([]runtime.ContainerMetrics, error) {
	ctx = c.nsCtx(ctx)
	list, err := c.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", runtime.LabelPodUID))
	if err != nil {
		return nil, fmt.Errorf("container metrics: list containers: %w", err)
	}
	tasks, err := c.listTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("container metrics: %w", err)
	}
	resp, err := c.client.TaskService().Metrics(ctx, &tasksapi.MetricsRequest{})
	if err != nil {
		return nil, fmt.Errorf("container metrics: read task metrics: %w", errgrpc.ToNative(err))
	}
	byID := make(map[string]*apitypes.Metric, len(resp.Metrics))
	for _, m := range resp.Metrics {
		byID[m.ID] = m
	}
	out := make([]runtime.ContainerMetrics, 0, len(list))
	for _, ct := range list {
		t, ok := tasks[ct.ID]
		if !ok || taskState(t.status) != runtime.StateRunning {
			continue
		}
		m := byID[ct.ID]
		if m == nil {
			continue // the task exited between the two calls
		}
		l := ct.Labels
		cm := runtime.ContainerMetrics{
			PodUID:       types.UID(l[runtime.LabelPodUID]),
			PodName:      l[runtime.LabelPodName],
			PodNamespace: l[runtime.LabelPodNamespace],
			Name:         l[runtime.LabelContainer],
			Sandbox:      l[runtime.LabelKind] == runtime.KindSandbox,
			ID:           ct.ID,
			StartedAt:    timeLabel(l, runtime.LabelStartedAt),
		}
		if cm.StartedAt.IsZero() {
			cm.StartedAt = ct.CreatedAt
		}
		if err := decodeMetric(m, &cm); err != nil {
			c.log.Debug("container metrics: skip task", "id", ct.ID, "err", err)
			continue
		}
		out = append(out, cm)
	}
	return out, nil
}

// decodeMetric fills cm's usage and timestamp from a task's metric, which
// the runc shim sends as io.containerd.cgroups.v1.Metrics or
// io.containerd.cgroups.v2.Metrics.
func decodeMetric(m *apitypes.Metric, cm *runtime.ContainerMetrics) error {
	if m.Data == nil {
		return fmt.Errorf("metric of task %s has no data", m.ID)
	}
	v, err := typeurl.UnmarshalAny(m.Data)
	if err != nil {
		return fmt.Errorf("decode metric of task %s (%s): %w", m.ID, m.Data.GetTypeUrl(), err)
	}
	switch s := v.(type) {
	case *cg1.Metrics:
		fillV1(s, cm)
	case *cg2.Metrics:
		fillV2(s, cm)
	default:
		return fmt.Errorf("metric of task %s: unsupported type %T", m.ID, v)
	}
	cm.Timestamp = time.Now()
	if m.Timestamp != nil {
		cm.Timestamp = m.Timestamp.AsTime()
	}
	return nil
}

// fillV1 reads a cgroup v1 reading; the hierarchical (total_*) figures
// count the container's child cgroups too.
func fillV1(s *cg1.Metrics, cm *runtime.ContainerMetrics) {
	if cpu := s.GetCPU().GetUsage(); cpu != nil {
		cm.CPUUsageNanoseconds = cpu.Total
	}
	mem := s.GetMemory()
	if mem == nil {
		return
	}
	cm.MemoryUsageBytes = mem.GetUsage().GetUsage()
	cm.WorkingSetBytes = subFloor(cm.MemoryUsageBytes, mem.TotalInactiveFile)
	cm.RSSBytes = mem.TotalRSS
	cm.PageFaults = mem.TotalPgFault
	cm.MajorPageFaults = mem.TotalPgMajFault
}

// fillV2 reads a cgroup v2 reading (already hierarchical).
func fillV2(s *cg2.Metrics, cm *runtime.ContainerMetrics) {
	if cpu := s.GetCPU(); cpu != nil {
		cm.CPUUsageNanoseconds = cpu.UsageUsec * uint64(time.Microsecond)
	}
	mem := s.GetMemory()
	if mem == nil {
		return
	}
	cm.MemoryUsageBytes = mem.Usage
	cm.WorkingSetBytes = subFloor(mem.Usage, mem.InactiveFile)
	cm.RSSBytes = mem.Anon
	cm.PageFaults = mem.Pgfault
	cm.MajorPageFaults = mem.Pgmajfault
}

// subFloor is a-b, or 0 when b exceeds a.
func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
