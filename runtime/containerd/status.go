package containerd

// What the runtime knows about pods, read from containerd: containers by
// label, tasks in one list call. An exited container's task is "reaped":
// its exit code and time go into the container's labels (containerd keeps
// them only while the task exists) and the task is deleted, which also ends
// its shim. Reaping happens in PodStatuses (the PLEG's relist) and in
// StopContainer, so exit information survives restarts of the nodelet and
// of containerd.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// reap records the exit of a stopped task in the container's labels and
// deletes the task. A task already gone is success.
func (c *Runtime) reap(ctx context.Context, cont ctrdclient.Container, task ctrdclient.Task) error {
	st, err := task.Status(ctx)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("task status: %w", err)
	}
	if st.Status == ctrdclient.Stopped {
		if err := c.recordExit(ctx, cont, st.ExitStatus, st.ExitTime); err != nil {
			return err
		}
	}
	if _, err := task.Delete(ctx, ctrdclient.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete task: %w", err)
	}
	c.closeLog(cont.ID())
	return nil
}

func (c *Runtime) recordExit(ctx context.Context, cont ctrdclient.Container, code uint32, at time.Time) error {
	if at.IsZero() {
		at = time.Now()
	}
	_, err := cont.SetLabels(ctx, map[string]string{
		runtime.LabelExitCode:   strconv.FormatUint(uint64(code), 10),
		runtime.LabelFinishedAt: at.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return fmt.Errorf("record exit: %w", err)
	}
	return nil
}

// taskInfo is what one task list call tells about a container's task.
type taskInfo struct {
	status   tasktypes.Status
	exitCode uint32
	exitedAt time.Time
}

// PodStatuses lists every sandbox and container of the namespace by their
// labels and reports them per pod. Exited app/init container tasks are
// reaped on the way (see the file comment).
func (c *Runtime) PodStatuses(ctx context.Context) ([]runtime.PodStatus, error) {
	ctx = c.nsCtx(ctx)
	since := c.index.begin()
	list, err := c.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", runtime.LabelPodUID))
	if err != nil {
		return nil, fmt.Errorf("pod statuses: list containers: %w", err)
	}
	c.index.replace(list, since)
	tasks, err := c.listTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod statuses: %w", err)
	}
	return c.assemble(ctx, list, tasks), nil
}

// assemble groups containers and their tasks into pod statuses, reaping
// exited app/init container tasks on the way.
func (c *Runtime) assemble(ctx context.Context, list []containers.Container, tasks map[string]taskInfo) []runtime.PodStatus {
	pods := map[types.UID]*runtime.PodStatus{}
	for _, ct := range list {
		uid := types.UID(ct.Labels[runtime.LabelPodUID])
		p := pods[uid]
		if p == nil {
			p = &runtime.PodStatus{UID: uid, Name: ct.Labels[runtime.LabelPodName], Namespace: ct.Labels[runtime.LabelPodNamespace]}
			pods[uid] = p
		}
		t, hasTask := tasks[ct.ID]
		if ct.Labels[runtime.LabelKind] == runtime.KindSandbox {
			p.Sandboxes = append(p.Sandboxes, sandboxStatus(ct, t, hasTask))
			continue
		}
		if hasTask && t.status == tasktypes.Status_STOPPED {
			var err error
			if err = c.reapByID(ctx, ct.ID); err != nil {
				c.log.Warn("reap exited container", "id", ct.ID, "err", err)
			} else if ct.Labels, err = c.labels(ctx, ct.ID); err == nil {
				hasTask = false
			}
		}
		p.Containers = append(p.Containers, containerStatus(ct, t, hasTask))
	}
	out := make([]runtime.PodStatus, 0, len(pods))
	for _, p := range pods {
		sortStatuses(p)
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

func (c *Runtime) listTasks(ctx context.Context) (map[string]taskInfo, error) {
	resp, err := c.client.TaskService().List(ctx, &tasksapi.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", errgrpc.ToNative(err))
	}
	out := make(map[string]taskInfo, len(resp.Tasks))
	for _, t := range resp.Tasks {
		ti := taskInfo{status: t.Status, exitCode: t.ExitStatus}
		if t.ExitedAt != nil {
			ti.exitedAt = t.ExitedAt.AsTime()
		}
		out[t.ID] = ti
	}
	return out, nil
}

func (c *Runtime) reapByID(ctx context.Context, id string) error {
	cont, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return err
	}
	task, err := cont.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.reap(ctx, cont, task)
}

func (c *Runtime) labels(ctx context.Context, id string) (map[string]string, error) {
	ct, err := c.client.ContainerService().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return ct.Labels, nil
}

func attemptOf(labels map[string]string) uint32 {
	n, _ := strconv.ParseUint(labels[runtime.LabelAttempt], 10, 32)
	return uint32(n)
}

func timeLabel(labels map[string]string, key string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, labels[key])
	return t
}

func sandboxStatus(ct containers.Container, t taskInfo, hasTask bool) runtime.SandboxStatus {
	s := runtime.SandboxStatus{
		ID:        ct.ID,
		Attempt:   attemptOf(ct.Labels),
		State:     runtime.StateExited,
		CreatedAt: ct.CreatedAt,
		IP:        ct.Labels[runtime.LabelSandboxIP],
		NetNSPath: ct.Labels[runtime.LabelNetNSPath],
	}
	if hasTask {
		s.State = taskState(t.status)
	}
	return s
}

// containerStatus derives a container's state from its task when it has
// one, else from the labels recorded at start and exit.
func containerStatus(ct containers.Container, t taskInfo, hasTask bool) runtime.ContainerStatus {
	l := ct.Labels
	s := runtime.ContainerStatus{
		ID:        ct.ID,
		Name:      l[runtime.LabelContainer],
		Init:      l[runtime.LabelInit] == "true",
		Attempt:   attemptOf(l),
		SandboxID: l[runtime.LabelSandboxID],
		CreatedAt: ct.CreatedAt,
		StartedAt: timeLabel(l, runtime.LabelStartedAt),
		Image:     l[runtime.LabelImage],
		ImageRef:  l[runtime.LabelImageRef],
		LogPath:   l[runtime.LabelLogPath],
	}
	switch {
	case hasTask && t.status == tasktypes.Status_STOPPED:
		s.State, s.FinishedAt = runtime.StateExited, t.exitedAt
		setExit(&s, int32(t.exitCode))
	case hasTask:
		s.State = taskState(t.status)
	case l[runtime.LabelExitCode] != "":
		code, _ := strconv.ParseInt(l[runtime.LabelExitCode], 10, 32)
		s.State, s.FinishedAt = runtime.StateExited, timeLabel(l, runtime.LabelFinishedAt)
		setExit(&s, int32(code))
	case l[runtime.LabelStartedAt] == "":
		s.State = runtime.StateCreated // task never created or lost before start
	default:
		s.State, s.Reason = runtime.StateUnknown, "TaskLost" // started, no task, no exit record
	}
	if s.State == runtime.StateExited {
		if l[runtime.LabelOOMKilled] == "true" {
			s.Reason = "OOMKilled"
		}
		s.Message = runtime.TerminationMessage(l, s.ExitCode)
	}
	return s
}

func setExit(s *runtime.ContainerStatus, code int32) {
	s.ExitCode = code
	s.Reason = "Completed"
	if code != 0 {
		s.Reason = "Error"
	}
}

func taskState(st tasktypes.Status) runtime.State {
	switch st {
	case tasktypes.Status_CREATED:
		return runtime.StateCreated
	case tasktypes.Status_RUNNING, tasktypes.Status_PAUSED, tasktypes.Status_PAUSING:
		return runtime.StateRunning
	case tasktypes.Status_STOPPED:
		return runtime.StateExited
	}
	return runtime.StateUnknown
}

// sortStatuses orders sandboxes and containers newest first (by creation,
// then attempt), containers grouped by name.
func sortStatuses(p *runtime.PodStatus) {
	sort.SliceStable(p.Sandboxes, func(i, j int) bool {
		a, b := p.Sandboxes[i], p.Sandboxes[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.Attempt > b.Attempt
	})
	sort.SliceStable(p.Containers, func(i, j int) bool {
		a, b := p.Containers[i], p.Containers[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.Attempt > b.Attempt
	})
}

// eventBuffer is how many exits Events holds for a slow reader; beyond it
// exits are dropped (the PLEG's relist finds them).
const eventBuffer = 128

// Events streams the task exits of the runtime's namespace until ctx ends
// or the subscription fails; then the channel is closed and the caller
// subscribes again (relisting in between). A reader that falls behind
// loses exits rather than blocking containerd's event stream.
func (c *Runtime) Events(ctx context.Context) <-chan runtime.TaskExit {
	out := make(chan runtime.TaskExit, eventBuffer)
	envs, errs := c.client.Subscribe(ctx,
		fmt.Sprintf(`topic=="/tasks/exit",namespace==%q`, c.cfg.Namespace),
		fmt.Sprintf(`topic=="/tasks/oom",namespace==%q`, c.cfg.Namespace))
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-errs:
				if err != nil && ctx.Err() == nil {
					c.log.Warn("containerd event stream ended", "err", err)
				}
				return
			case env := <-envs:
				if id, ok := taskOOM(env.Event); ok {
					c.recordOOM(ctx, id)
					continue
				}
				if e, ok := taskExit(env.Event); ok {
					select {
					case out <- e:
					default:
						c.log.Debug("event reader behind; exit dropped", "id", e.ContainerID)
					}
				}
			}
		}
	}()
	return out
}

// taskOOM decodes a /tasks/oom event: the kernel's OOM killer acted in
// the container's cgroup (the shim watches memory.oom_control on v1 and
// memory.events on v2).
func taskOOM(ev typeurl.Any) (string, bool) {
	if ev == nil {
		return "", false
	}
	v, err := typeurl.UnmarshalAny(ev)
	if err != nil {
		return "", false
	}
	e, ok := v.(*apievents.TaskOOM)
	if !ok || e.ContainerID == "" {
		return "", false
	}
	return e.ContainerID, true
}

// recordOOM marks the container as OOM-killed (LabelOOMKilled), so that
// its exit reads OOMKilled now and after a restart of the nodelet. An
// OOM kill that happens while no nodelet listens is not seen.
func (c *Runtime) recordOOM(ctx context.Context, id string) {
	ctx = c.nsCtx(ctx)
	cont, err := c.client.LoadContainer(ctx, id)
	if err != nil {
		return // gone already, or not ours
	}
	if _, err := cont.SetLabels(ctx, map[string]string{runtime.LabelOOMKilled: "true"}); err != nil {
		c.log.Warn("record OOM kill", "container", id, "err", err)
		return
	}
	c.log.Info("container OOM-killed", "container", id)
}

// taskExit decodes a /tasks/exit event of a container's main process
// (exits of exec'd processes are ignored).
func taskExit(ev typeurl.Any) (runtime.TaskExit, bool) {
	if ev == nil {
		return runtime.TaskExit{}, false
	}
	v, err := typeurl.UnmarshalAny(ev)
	if err != nil {
		return runtime.TaskExit{}, false
	}
	e, ok := v.(*apievents.TaskExit)
	if !ok || (e.ID != "" && e.ID != e.ContainerID) {
		return runtime.TaskExit{}, false
	}
	out := runtime.TaskExit{ContainerID: e.ContainerID, ExitCode: e.ExitStatus}
	if e.ExitedAt != nil {
		out.ExitedAt = e.ExitedAt.AsTime()
	}
	return out, true
}
