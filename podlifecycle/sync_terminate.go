package podlifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// EvictedStatus gives the final status of an evicted pod (Failed/Evicted,
// whatever its containers reported), made from current, its desired status;
// ok is false for a pod not evicted.
type EvictedStatus interface {
	FinalStatus(pod *corev1.Pod, current corev1.PodStatus) (st corev1.PodStatus, ok bool)
}

// SyncTerminatingPod stops every container with the grace period (SIGTERM,
// then SIGKILL), then the sandboxes, and reports the terminated status.
// Once every container is stopped, an evicted pod gets its final status
// (cfg.Evicted) and the status sink learns the pod is terminated
// (TerminatePod), so that a finished pod's terminal phase is written and a
// deleted pod's deletion confirmed at once.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *corev1.Pod, grace int64) error {
	grace = max(grace, 0)
	rs, err := s.podStatus(ctx, pod)
	if err != nil {
		return err
	}
	killErr := s.killPod(ctx, pod, rs, grace)
	if killErr != nil {
		killErr = fmt.Errorf("terminate pod %s: %w", podRef(pod), killErr)
	}
	if _, err := s.reportStatus(ctx, pod, nil, killErr == nil); err != nil {
		return errors.Join(killErr, err)
	}
	if killErr != nil {
		return killErr
	}
	if s.cfg.Evicted != nil {
		current, ok := s.cfg.Status.GetPodStatus(pod.UID)
		if !ok {
			current = pod.Status
		}
		if st, ok := s.cfg.Evicted.FinalStatus(pod, current); ok {
			s.cfg.Status.SetPodStatus(pod, st)
		}
	}
	s.cfg.Status.TerminatePod(pod)
	return nil
}

// SyncTerminatedPod releases what the stopped pod holds: networks,
// sandboxes and containers, cgroup, volumes, generated files and logs.
// Every step is idempotent; all are tried and their errors joined.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *corev1.Pod) error {
	rs, err := s.podStatus(ctx, pod)
	if err != nil {
		return err
	}
	var errs []error
	add := func(op string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s of pod %s: %w", op, podRef(pod), err))
		}
	}
	for _, sb := range rs.Sandboxes {
		if sb.NetNSPath != "" {
			add("tear down network", s.cfg.Network.TeardownPod(ctx, podNetwork(pod, filepath.Base(sb.NetNSPath))))
		}
		add("remove sandbox "+sb.ID, s.cfg.Runtime.RemoveSandbox(ctx, sb.ID))
	}
	for _, cs := range rs.Containers { // containers whose sandbox is gone
		add("remove container "+cs.ID, s.cfg.Runtime.RemoveContainer(ctx, cs.ID))
	}
	if s.cfg.Probes != nil {
		s.cfg.Probes.RemovePod(pod.UID)
	}
	add("remove cgroup", s.cfg.Cgroups.RemovePod(ctx, pod.UID))
	add("tear down volumes", s.cfg.Volumes.TeardownPod(ctx, pod.UID))
	if s.cfg.PodFilesDir != "" {
		add("remove files", os.RemoveAll(filepath.Join(s.cfg.PodFilesDir, string(pod.UID))))
	}
	if s.cfg.PodContentRemovable == nil || s.cfg.PodContentRemovable(pod.UID) {
		add("remove logs", os.RemoveAll(s.podLogDir(pod)))
	}
	s.pullBackoff.Forget(pod.UID)
	if s.cfg.Backoff != nil {
		s.cfg.Backoff.Forget(pod.UID)
	}
	return errors.Join(errs...)
}
