package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The reasons of pods refused for security settings the node does not
// enforce: upstream's AppArmor validator's reason, and two of the
// nodelet's own (upstream leaves procMount and user namespaces to the
// runtime, which fails the sandbox or the container instead).
const (
	ReasonAppArmor               = "AppArmor"
	ReasonProcMount              = "UnsupportedProcMount"
	ReasonUserNamespaces         = "UserNamespacesNotSupported"
	appArmorAnnotationPrefix     = "container.apparmor.security.beta.kubernetes.io/"
	appArmorAnnotationUnconfined = "unconfined"
)

// Security refuses a pod asking for what the nodelet does not enforce, so
// that it never runs with less confinement than it asked for: an AppArmor
// profile other than Unconfined (field or beta annotation; upstream's
// kubelet refuses these the same way on a host without AppArmor),
// procMount Unmasked, and hostUsers: false (user namespaces).
func Security() Handler {
	return HandlerFunc(func(a Attributes) Result {
		p := a.Pod
		if what := appArmorRequired(p); what != "" {
			return Result{Reason: ReasonAppArmor,
				Message: fmt.Sprintf("Cannot enforce AppArmor: %s asks for a profile and this node does not apply AppArmor profiles", what)}
		}
		if p.Spec.HostUsers != nil && !*p.Spec.HostUsers {
			return Result{Reason: ReasonUserNamespaces,
				Message: "Pod was rejected: hostUsers: false (user namespaces) is not supported by this node"}
		}
		if name := unmaskedProc(p); name != "" {
			return Result{Reason: ReasonProcMount,
				Message: fmt.Sprintf("Pod was rejected: container %q asks for procMount Unmasked, which this node does not support", name)}
		}
		return Admitted
	})
}

// appArmorRequired names the first part of p that asks for an AppArmor
// profile other than Unconfined, "" if none does.
func appArmorRequired(p *corev1.Pod) string {
	if sc := p.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return "the pod"
	}
	var found string
	eachContainer(p, func(c *corev1.Container) bool {
		if sc := c.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
			found = fmt.Sprintf("container %q", c.Name)
			return false
		}
		return true
	})
	if found != "" {
		return found
	}
	for k, v := range p.Annotations {
		if name, ok := strings.CutPrefix(k, appArmorAnnotationPrefix); ok && v != appArmorAnnotationUnconfined {
			return fmt.Sprintf("container %q (annotation %s)", name, k)
		}
	}
	return ""
}

func confined(p *corev1.AppArmorProfile) bool {
	return p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined
}

// unmaskedProc names the first container with procMount Unmasked.
func unmaskedProc(p *corev1.Pod) string {
	var found string
	eachContainer(p, func(c *corev1.Container) bool {
		if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			found = c.Name
			return false
		}
		return true
	})
	return found
}

// eachContainer calls f on the init, app and ephemeral containers of p
// until f returns false.
func eachContainer(p *corev1.Pod, f func(*corev1.Container) bool) {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if !f(&list[i]) {
				return
			}
		}
	}
	for i := range p.Spec.EphemeralContainers {
		c := corev1.Container(p.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if !f(&c) {
			return
		}
	}
}
