package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// LimitRanger, ResourceQuota admission and the quota controller
// together, on upstream's code: limits default into pods, a pod over the
// range's max is refused, the quota's usage is counted, a create beyond
// it is refused with upstream's message, and a delete frees it again.
func TestResourceQuotaAndLimitRange(t *testing.T) {
	cs := startWith(t, controlplanetest.Options{Admission: controlplanetest.UpstreamAdmission}, Config{})
	ctx := t.Context()
	ns := "quota"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "default service account", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	q := resource.MustParse
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type:           corev1.LimitTypeContainer,
		Max:            corev1.ResourceList{corev1.ResourceCPU: q("1")},
		Default:        corev1.ResourceList{corev1.ResourceCPU: q("200m"), corev1.ResourceMemory: q("64Mi")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("32Mi")},
	}}}}
	if _, err := cs.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: q("2"), corev1.ResourceRequestsCPU: q("1"), "count/deployments.apps": q("1"),
	}}}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	usedPods := func(want int64) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "small", metav1.GetOptions{})
			if err != nil || got.Status.Used == nil {
				return false, err
			}
			used := got.Status.Used[corev1.ResourcePods]
			return used.Value() == want, nil
		}
	}
	testkit.Eventually(t, 30*time.Second, "quota usage counted", usedPods(0))

	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	// LimitRanger is read through an informer: wait for it to see the range.
	var p *corev1.Pod
	testkit.Eventually(t, 10*time.Second, "limit range defaults", func(ctx context.Context) (bool, error) {
		var err error
		p, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("a"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && p.Spec.Containers[0].Resources.Limits != nil, err
	})
	p, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := p.Spec.Containers[0].Resources
	if res.Limits.Cpu().String() != "200m" || res.Requests.Cpu().String() != "100m" || res.Requests.Memory().String() != "32Mi" {
		t.Errorf("defaulted resources %+v, want the range's", res)
	}
	if !strings.Contains(p.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: cpu, memory request for container c") {
		t.Errorf("annotations %v: want LimitRanger's", p.Annotations)
	}
	big := newPod("big")
	big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: q("2")}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Container is 1, but limit is 2") {
		t.Errorf("pod over the range's max: %v, want 403", err)
	}

	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller's recount races the admission's charge as upstream's
	// does (a recount from a pod informer that has not seen b yet writes
	// pods=1 over the charged 2), so the third pod waits for the count.
	testkit.Eventually(t, 30*time.Second, "quota usage of two pods", usedPods(2))
	_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("c"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: small, requested: pods=1, used: pods=2, limited: pods=2") {
		t.Fatalf("third pod: %v, want 403 exceeded quota", err)
	}

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}}, Template: podTemplate("d")}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d2 := d.DeepCopy()
	d2.Name = "d2"
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, d2, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: small, requested: count/deployments.apps=1") {
		t.Errorf("second deployment: %v, want 403 exceeded quota", err)
	}

	// A deleted pod frees its share once the controller recounts.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "quota usage after a delete", usedPods(1))
	// The admission plugin reads the quota from its own informer, which
	// may trail the status just seen by a moment.
	testkit.Eventually(t, 10*time.Second, "a pod admitted once the delete freed the quota", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("c"), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
			return false, err
		}
		return err == nil, err
	})
}
