package podlifecycle

// Lifecycle hooks, as upstream's kubelet runs them: postStart right after
// a container started (a failure kills it: FailedPostStartHook), preStop
// before the stop signal, within the grace period (FailedPreStopHook).
// Handlers: exec in the container, httpGet to the pod's IP, sleep.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/prober"
	"github.com/nodelet/nodelet/runtime"
)

// minStopGrace is what the stop signal keeps of the grace period after a
// preStop hook, as upstream's minimumGracePeriodInSeconds.
const minStopGrace = 2 * time.Second

// hookTarget is the container a hook runs for.
type hookTarget struct {
	pod   *corev1.Pod
	c     *corev1.Container
	id    string // the container instance
	podIP string
}

// runHook runs one handler; the error says what failed, as the event's
// message.
func (s *Syncer) runHook(ctx context.Context, t hookTarget, h *corev1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		out, code, err := s.cfg.Runtime.ExecSync(ctx, t.id, h.Exec.Command)
		if err == nil && code != 0 {
			err = fmt.Errorf("command terminated with exit code %d", code)
		}
		if err != nil {
			return fmt.Errorf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, t.c.Name, podRef(t.pod), err, strings.TrimSpace(string(out)))
		}
		return nil
	case h.HTTPGet != nil:
		if err := prober.HTTPGet(ctx, h.HTTPGet, t.c, t.podIP); err != nil {
			return fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, t.c.Name, podRef(t.pod), err)
		}
		return nil
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return nil
	}
	return errors.New("lifecycle hook has no handler")
}

// postStart runs the container's postStart hook; a failure kills the
// container (it restarts as the restart policy says).
func (s *Syncer) postStart(ctx context.Context, t hookTarget) error {
	if t.c.Lifecycle == nil || t.c.Lifecycle.PostStart == nil {
		return nil
	}
	err := s.runHook(ctx, t, t.c.Lifecycle.PostStart)
	if err == nil {
		return nil
	}
	s.containerEvent(t.pod, t.c.Name, corev1.EventTypeWarning, "FailedPostStartHook", "%v", err)
	s.containerEvent(t.pod, t.c.Name, corev1.EventTypeNormal, eventKilling, "FailedPostStartHook")
	if kerr := s.cfg.Runtime.StopContainer(ctx, t.id, gracePeriod(t.pod, -1)); kerr != nil {
		return errors.Join(err, kerr)
	}
	return err
}

// stopContainer runs the container's preStop hook within grace, then
// stops it with what is left of grace (at least minStopGrace).
func (s *Syncer) stopContainer(ctx context.Context, t hookTarget, grace time.Duration) error {
	if t.c != nil && t.c.Lifecycle != nil && t.c.Lifecycle.PreStop != nil && grace > 0 {
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, grace)
		if err := s.runHook(hctx, t, t.c.Lifecycle.PreStop); err != nil {
			s.containerEvent(t.pod, t.c.Name, corev1.EventTypeWarning, "FailedPreStopHook", "%v", err)
		}
		cancel()
		// Whole seconds, as upstream counts the hook's time.
		grace = max(grace-time.Since(start).Truncate(time.Second), minStopGrace)
	}
	return s.cfg.Runtime.StopContainer(ctx, t.id, grace)
}

// specOf returns the pod's (app or init) container of that name.
func specOf(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// podIP is the address hooks reach the pod at: a sandbox's IP known to
// the caller, else the newest sandbox's, or the node's for host-network
// pods.
func (s *Syncer) podIP(pod *corev1.Pod, rs *runtime.PodStatus, known ...string) string {
	if pod.Spec.HostNetwork {
		return s.cfg.NodeIP
	}
	for _, ip := range known {
		if ip != "" {
			return ip
		}
	}
	if sb := rs.LatestSandbox(); sb != nil {
		return sb.IP
	}
	return ""
}
