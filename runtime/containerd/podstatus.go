package containerd

import (
	"context"
	"fmt"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// PodStatus reads one pod's sandboxes and containers: each of the pod's
// containers by ID (the index, podindex.go) and its task, so its cost does
// not grow with the pods on the node (a filtered list makes containerd
// decode every container; PodStatuses asks every shim for its state). A
// pod the runtime does not know has an empty status. Exited container
// tasks are reaped as in PodStatuses.
func (c *Runtime) PodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
	ctx = c.nsCtx(ctx)
	list, err := c.podContainers(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("status of pod %s: %w", uid, err)
	}
	tasks := make(map[string]taskInfo, len(list))
	for _, ct := range list {
		resp, err := c.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: ct.ID})
		if err != nil {
			if err = errgrpc.ToNative(err); errdefs.IsNotFound(err) {
				continue // no task: the labels tell the state
			}
			return nil, fmt.Errorf("status of pod %s: task of %s: %w", uid, ct.ID, err)
		}
		if p := resp.Process; p != nil {
			ti := taskInfo{status: p.Status, exitCode: p.ExitStatus}
			if p.ExitedAt != nil {
				ti.exitedAt = p.ExitedAt.AsTime()
			}
			tasks[ct.ID] = ti
		}
	}
	for _, p := range c.assemble(ctx, list, tasks) {
		if p.UID == uid {
			return &p, nil
		}
	}
	return &runtime.PodStatus{UID: uid}, nil
}

// podContainers reads the pod's containers by the IDs the index holds,
// priming the index with a full list first if no list has yet.
func (c *Runtime) podContainers(ctx context.Context, uid types.UID) ([]containers.Container, error) {
	ids, ok := c.index.containers(uid)
	if !ok {
		since := c.index.begin()
		all, err := c.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", runtime.LabelPodUID))
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		c.index.replace(all, since)
		ids, _ = c.index.containers(uid)
	}
	list := make([]containers.Container, 0, len(ids))
	for _, id := range ids {
		ct, err := c.client.ContainerService().Get(ctx, id)
		if errdefs.IsNotFound(err) {
			c.index.remove(id) // removed behind the nodelet's back
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get container %s: %w", id, err)
		}
		list = append(list, ct)
	}
	return list, nil
}
