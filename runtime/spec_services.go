package runtime

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodServices are the Services whose variables a pod's containers get, as
// upstream's kubelet picks them: the Services of the pod's namespace with
// a cluster IP (unless enableServiceLinks is false), and default/kubernetes
// always (a Service of the pod's namespace of the same name wins).
func PodServices(all []*corev1.Service, pod *corev1.Pod) []*corev1.Service {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*corev1.Service{}
	for _, svc := range all {
		if !hasClusterIP(svc) {
			continue
		}
		switch {
		case svc.Namespace == pod.Namespace && links:
			byName[svc.Name] = svc
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes":
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		}
	}
	out := make([]*corev1.Service, 0, len(byName))
	for _, svc := range byName {
		out = append(out, svc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone && len(svc.Spec.Ports) > 0
}

// ServiceEnv is the environment upstream gives a container for services:
// NAME_SERVICE_HOST, NAME_SERVICE_PORT (the first port),
// NAME_SERVICE_PORT_<PORTNAME> for named ports, and docker-links style
// NAME_PORT, NAME_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR].
func ServiceEnv(services []*corev1.Service) map[string]string {
	env := map[string]string{}
	for _, svc := range services {
		if !hasClusterIP(svc) {
			continue
		}
		prefix := serviceEnvName(svc.Name)
		ip := svc.Spec.ClusterIP
		env[prefix+"_SERVICE_HOST"] = ip
		env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
		for i, sp := range svc.Spec.Ports {
			port := strconv.Itoa(int(sp.Port))
			if sp.Name != "" {
				env[prefix+"_SERVICE_PORT_"+serviceEnvName(sp.Name)] = port
			}
			proto := string(sp.Protocol)
			if proto == "" {
				proto = string(corev1.ProtocolTCP)
			}
			addr := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, port))
			if i == 0 {
				env[prefix+"_PORT"] = addr
			}
			pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(proto))
			env[pp] = addr
			env[pp+"_PROTO"] = strings.ToLower(proto)
			env[pp+"_PORT"] = port
			env[pp+"_ADDR"] = ip
		}
	}
	return env
}

func serviceEnvName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
