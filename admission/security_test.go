package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSecurity(t *testing.T) {
	h := Security()
	f := false
	unmasked := corev1.UnmaskedProcMount
	for _, tc := range []struct {
		name, reason, msg string
		mutate            func(*corev1.Pod)
	}{
		{name: "plain", mutate: func(*corev1.Pod) {}},
		{name: "AppArmor Unconfined", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
			p.Annotations = map[string]string{appArmorAnnotationPrefix + "c": "unconfined"}
		}},
		{name: "pod AppArmor RuntimeDefault", reason: ReasonAppArmor, msg: "Cannot enforce AppArmor: the pod", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}},
		{name: "init container AppArmor", reason: ReasonAppArmor, msg: `container "init"`, mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}}}
		}},
		{name: "AppArmor annotation", reason: ReasonAppArmor, msg: "annotation", mutate: func(p *corev1.Pod) {
			p.Annotations = map[string]string{appArmorAnnotationPrefix + "c": "runtime/default"}
		}},
		{name: "hostUsers false", reason: ReasonUserNamespaces, msg: "hostUsers: false", mutate: func(p *corev1.Pod) { p.Spec.HostUsers = &f }},
		{name: "procMount Unmasked", reason: ReasonProcMount, msg: `container "c"`, mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &unmasked}
		}},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		tc.mutate(p)
		r := h.Admit(Attributes{Pod: p})
		if tc.reason == "" {
			if !r.Admit {
				t.Errorf("%s: refused: %+v", tc.name, r)
			}
			continue
		}
		if r.Admit || r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) {
			t.Errorf("%s: %+v, want %s with %q", tc.name, r, tc.reason, tc.msg)
		}
	}
}
