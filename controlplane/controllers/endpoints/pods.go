package endpoints

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// shouldPodBeInEndpoints says whether pod can back a Service at all, as
// upstream's helper of that name: it has an IP, has not finished (Succeeded
// or Failed), and is not terminating unless terminating pods are wanted.
func shouldPodBeInEndpoints(pod *corev1.Pod, includeTerminating bool) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return includeTerminating || pod.DeletionTimestamp == nil
}

// isPodReady reports the pod's Ready condition.
func isPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIPs returns the pod's IPs, falling back to status.podIP for writers
// that set only that.
func podIPs(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) > 0 {
		ips := make([]string, len(pod.Status.PodIPs))
		for i, ip := range pod.Status.PodIPs {
			ips[i] = ip.IP
		}
		return ips
	}
	if pod.Status.PodIP != "" {
		return []string{pod.Status.PodIP}
	}
	return nil
}

func isIPv6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && !a.Unmap().Is4()
}

// findPort resolves a Service port's targetPort on pod: a number is used
// as is (0 means the service port), a name is looked up among the
// container ports of the same protocol, sidecar init containers included.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, error) {
	switch sp.TargetPort.Type {
	case intstr.String:
		name := sp.TargetPort.StrVal
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		containers := append([]corev1.Container(nil), pod.Spec.Containers...)
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				containers = append(containers, c)
			}
		}
		for _, c := range containers {
			for _, p := range c.Ports {
				pp := p.Protocol
				if pp == "" {
					pp = corev1.ProtocolTCP
				}
				if p.Name == name && pp == proto {
					return p.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("no container port named %q (%s) in pod %s/%s", name, proto, pod.Namespace, pod.Name)
	default:
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, nil
		}
		return sp.TargetPort.IntVal, nil
	}
}

// shouldSetHostname is upstream's rule for publishing a pod's hostname: the
// pod names a hostname and uses this Service as its subdomain.
func shouldSetHostname(pod *corev1.Pod, svc *corev1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace
}

func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}
