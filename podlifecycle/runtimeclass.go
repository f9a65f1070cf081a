package podlifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// RuntimeHandlerFunc returns the handler of the pod's RuntimeClass ("" for
// a pod without one: the runtime's default). An error (the class is
// missing) fails the sandbox's creation, as kubelet's does: nothing is
// created, and the pod waits in ContainerCreating with a
// FailedCreatePodSandBox event until a later sync finds the class.
type RuntimeHandlerFunc func(ctx context.Context, pod *corev1.Pod) (string, error)

// runtimeHandler is the handler the pod's sandbox is created with. The
// handler is resolved at each sandbox creation only: a running pod keeps
// the runtime it started with (a class's handler is immutable, but a
// class may be deleted and made again).
func (s *Syncer) runtimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	if s.cfg.RuntimeHandler == nil {
		return "", nil
	}
	return s.cfg.RuntimeHandler(ctx, pod)
}
