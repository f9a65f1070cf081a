package apiserver

import (
	"context"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// warningsSeen collects the Warning headers client-go receives.
type warningsSeen struct {
	mu   sync.Mutex
	msgs []string
}

func (c *warningsSeen) HandleWarningHeader(code int, _ string, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, text)
}

func (c *warningsSeen) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.msgs
	c.msgs = nil
	return out
}

// Creates and updates carry upstream's strategy warnings (kubectl prints
// them as "Warning: ..."): a deprecated node selector label in a pod, a
// workload name that is not a DNS label; an update warns about its pod
// template only when the template changed.
func TestCreateAndUpdateWarnings(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	seen := &warningsSeen{}
	cfg := rest.CopyConfig(env.config)
	cfg.WarningHandler = seen
	cs := newClientset(t, cfg)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"beta.kubernetes.io/arch": "amd64"},
		Containers:   []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if got := seen.take(); len(got) != 1 || !strings.Contains(got[0], "spec.nodeSelector[beta.kubernetes.io/arch]: deprecated") {
		t.Errorf("pod create warnings: %q", got)
	}

	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web.v2"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	d, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	if got := seen.take(); len(got) != 1 || !strings.HasPrefix(got[0], "metadata.name: this is used in Pod names and hostnames") {
		t.Errorf("deployment create warnings: %q", got)
	}

	d.Labels = map[string]string{"team": "a"}
	if d, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update deployment labels: %v", err)
	}
	if got := seen.take(); len(got) != 0 {
		t.Errorf("an update leaving the template alone warned: %q", got)
	}
	d.Spec.Template.Spec.NodeSelector = map[string]string{"beta.kubernetes.io/os": "linux"}
	if _, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update deployment template: %v", err)
	}
	if got := seen.take(); len(got) != 1 || !strings.Contains(got[0], "spec.template.spec.nodeSelector[beta.kubernetes.io/os]: deprecated") {
		t.Errorf("deployment template update warnings: %q", got)
	}
}
