package podlifecycle

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/prober"
	"github.com/nodelet/nodelet/runtime"
)

// probe hands the pod's running containers to the prober and returns the
// ones a liveness or startup probe failed, for the plan to restart.
func (s *Syncer) probe(pod *corev1.Pod, rs *runtime.PodStatus) map[string]runtime.Unhealthy {
	if s.cfg.Probes == nil {
		return nil
	}
	podIP := ""
	if sb := rs.LatestSandbox(); sb != nil {
		podIP = sb.IP
	}
	if pod.Spec.HostNetwork {
		podIP = s.cfg.NodeIP
	}
	states := make([]prober.ContainerState, 0, len(rs.Containers))
	for _, cs := range rs.Containers {
		states = append(states, prober.ContainerState{Name: cs.Name, ID: cs.ID, Running: cs.State == runtime.StateRunning, StartedAt: cs.StartedAt})
	}
	s.cfg.Probes.UpdatePod(pod, podIP, states)
	var out map[string]runtime.Unhealthy
	for _, r := range s.cfg.Probes.Results(pod.UID) {
		if r.Failed == nil {
			continue
		}
		if out == nil {
			out = map[string]runtime.Unhealthy{}
		}
		out[r.ContainerID] = runtime.Unhealthy{
			Message:     r.Failed.Message + ", will be restarted",
			GracePeriod: r.Failed.TerminationGracePeriodSeconds,
		}
	}
	return out
}
