// Package admission decides on the node whether a pod bound to it may run,
// as upstream's kubelet admit handlers do: before a new pod gets a worker,
// each handler looks at it next to the pods already admitted. A pod
// refused is set Failed with the handler's reason and never started, so a
// scheduler with a stale view, or a pod with spec.nodeName set by hand,
// cannot overcommit the node. Handlers today: resources fit, host ports
// and node pressure (no new BestEffort pods under memory pressure, no new
// pods but critical ones under disk or PID pressure; see the eviction
// package).
package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podresources"
)

// Attributes are what a handler decides on: the new pod and the pods
// already admitted to the node (running or about to).
type Attributes struct {
	Pod      *corev1.Pod
	Admitted []*corev1.Pod
}

// Result is a handler's decision; Reason and Message (upstream's wording)
// go into the refused pod's status.
type Result struct {
	Admit           bool
	Reason, Message string
}

// Admitted is the result of a handler that lets the pod in.
var Admitted = Result{Admit: true}

// Handler decides about one pod.
type Handler interface {
	Admit(Attributes) Result
}

// HandlerFunc is a Handler.
type HandlerFunc func(Attributes) Result

// Admit calls f.
func (f HandlerFunc) Admit(a Attributes) Result { return f(a) }

// Chain admits a pod when every handler does; the first refusal wins.
type Chain []Handler

// Admit asks each handler in order.
func (c Chain) Admit(a Attributes) Result {
	for _, h := range c {
		if r := h.Admit(a); !r.Admit {
			return r
		}
	}
	return Admitted
}

// ResourcesFit refuses a pod whose requests do not fit in the node's
// allocatable (from allocatable(), read at each decision) minus the
// requests of the pods admitted, and a pod beyond the node's pod count,
// as upstream's NodeResourcesFit: pods first, then cpu, memory and
// ephemeral storage.
func ResourcesFit(allocatable func() corev1.ResourceList) Handler {
	return HandlerFunc(func(a Attributes) Result {
		alloc := allocatable()
		if pods, ok := alloc[corev1.ResourcePods]; ok && int64(len(a.Admitted))+1 > pods.Value() {
			return outOf(corev1.ResourcePods)
		}
		want := podresources.Requests(a.Pod)
		used := corev1.ResourceList{}
		for _, p := range a.Admitted {
			for name, q := range podresources.Requests(p) {
				sum := used[name]
				sum.Add(q)
				used[name] = sum
			}
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			req, ok := want[name]
			if !ok || req.IsZero() {
				continue
			}
			free := alloc[name].DeepCopy()
			free.Sub(used[name])
			if req.Cmp(free) > 0 {
				return outOf(name)
			}
		}
		return Admitted
	})
}

func outOf(name corev1.ResourceName) Result {
	return Result{Reason: "OutOf" + string(name),
		Message: fmt.Sprintf("Pod was rejected: Node didn't have enough resource: %s", name)}
}

// HostPorts refuses a pod asking for a host port (protocol, address,
// port) an admitted pod holds, as upstream's NodePorts: the wildcard
// address (empty, 0.0.0.0 or ::) conflicts with every address.
func HostPorts() Handler {
	return HandlerFunc(func(a Attributes) Result {
		held := map[hostPort]bool{}
		for _, p := range a.Admitted {
			for _, hp := range hostPorts(p) {
				held[hp] = true
			}
		}
		for _, hp := range hostPorts(a.Pod) {
			if conflicts(held, hp) {
				return Result{Reason: "NodePorts",
					Message: "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}
			}
		}
		return Admitted
	})
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

const wildcard = "0.0.0.0"

func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				hp := hostPort{protocol: cp.Protocol, ip: cp.HostIP, port: cp.HostPort}
				if hp.protocol == "" {
					hp.protocol = corev1.ProtocolTCP
				}
				if hp.ip == "" || hp.ip == "::" {
					hp.ip = wildcard
				}
				out = append(out, hp)
			}
		}
	}
	return out
}

func conflicts(held map[hostPort]bool, hp hostPort) bool {
	if held[hp] {
		return true
	}
	if hp.ip == wildcard {
		for h := range held {
			if h.protocol == hp.protocol && h.port == hp.port {
				return true
			}
		}
		return false
	}
	any := hp
	any.ip = wildcard
	return held[any]
}
