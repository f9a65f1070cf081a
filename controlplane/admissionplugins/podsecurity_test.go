package admissionplugins_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

// warnings collects the Warning headers a client was sent.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, msg)
}

// take returns the warnings so far and forgets them.
func (w *warnings) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := strings.Join(w.got, "\n")
	w.got = nil
	return out
}

// Upstream's PodSecurity plugin: the namespace's labels choose the level;
// enforce refuses pods, warn and workloads' templates only warn, and
// relabelling a namespace warns about the pods it would refuse.
func TestPodSecurity(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith("NamespaceLifecycle", "PodSecurity")})
	cfg := rest.CopyConfig(srv.Config)
	warned := &warnings{}
	cfg.WarningHandler = warned
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	mkns := func(name string, labels map[string]string) {
		t.Helper()
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	privileged := func(name string) *corev1.Pod {
		return pod(name, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})
	}
	mkns("strict", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	mkns("loose", map[string]string{"pod-security.kubernetes.io/warn": "baseline"})

	// The plugin reads namespaces through its informer, or live when the
	// informer has not seen one yet: the first create already enforces.
	_, err := cs.CoreV1().Pods("strict").Create(ctx, privileged("p"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(),
		`violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)`) {
		t.Fatalf("privileged pod in a restricted namespace: %v, want 403 with upstream's message", err)
	}
	ok := pod("ok", func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	})
	if _, err := cs.CoreV1().Pods("strict").Create(ctx, ok, metav1.CreateOptions{}); err != nil {
		t.Fatalf("restricted-conforming pod: %v", err)
	}

	warned.take()
	if _, err := cs.CoreV1().Pods("loose").Create(ctx, privileged("p"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("warn-only namespace: %v", err)
	}
	if w := warned.take(); !strings.Contains(w, `would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`) {
		t.Errorf("warnings %q: want baseline's", w)
	}

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}}, Spec: privileged("x").Spec}}}
	if _, err := cs.AppsV1().Deployments("strict").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("deployment with a privileged template: %v (templates only warn)", err)
	}
	if w := warned.take(); !strings.Contains(w, `would violate PodSecurity "restricted:latest"`) {
		t.Errorf("warnings %q: want restricted's for the template", w)
	}

	ns, err := cs.CoreV1().Namespaces().Get(ctx, "loose", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if ns, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := warned.take(); !strings.Contains(w, `existing pods in namespace "loose" violate the new PodSecurity enforce level "baseline:latest"`) {
		t.Errorf("warnings %q: want the existing pods named", w)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "strictest"
	if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("unknown level: %v, want 422", err)
	}
}
