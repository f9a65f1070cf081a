package containerd

import (
	"context"
	"fmt"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// PodStatus reads one pod's sandboxes and containers: a container list
// filtered by the pod's UID label and one task lookup per container, so
// its cost does not grow with the pods on the node (PodStatuses asks every
// shim for its state). A pod the runtime does not know has an empty
// status. Exited container tasks are reaped as in PodStatuses.
func (c *Runtime) PodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error) {
	ctx = c.nsCtx(ctx)
	list, err := c.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q==%s", runtime.LabelPodUID, uid))
	if err != nil {
		return nil, fmt.Errorf("status of pod %s: list containers: %w", uid, err)
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
