package namespace

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

func startController(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.AdmissionWith("NamespaceLifecycle")})
	cs := srv.Clientset(t)
	md, err := metadata.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(Config{Client: cs, Metadata: md, Discovery: cs.Discovery(), Informers: factory,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	return cs
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// populate fills namespace ns with a bit of everything: configmaps,
// secrets, a service (no deletecollection: deleted one by one), a
// deployment and unbound pods.
func populate(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "web"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}
	for _, name := range []string{"a", "b"} {
		must(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
		must(cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
		must(cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + name, Labels: labels}, Spec: spec}, metav1.CreateOptions{}))(t)
	}
	must(cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}, metav1.CreateOptions{}))(t)
	must(cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}))(t)
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	must(cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
}

func namespaceGone(cs kubernetes.Interface, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

func TestDeletedNamespaceIsEmptiedAndRemoved(t *testing.T) {
	cs := startController(t)
	ctx := t.Context()
	const ns = "doomed"
	createNamespace(t, cs, ns)
	populate(t, cs, ns)
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "namespace removed", namespaceGone(cs, ns))

	// Nothing is left behind, even if the namespace name is reused.
	createNamespace(t, cs, ns)
	if l := must(cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}))(t); len(l.Items) != 0 {
		t.Errorf("configmaps left: %d", len(l.Items))
	}
	if l := must(cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))(t); len(l.Items) != 0 {
		t.Errorf("pods left: %d", len(l.Items))
	}
	if l := must(cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}))(t); len(l.Items) != 0 {
		t.Errorf("deployments left: %d", len(l.Items))
	}
	if l := must(cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}))(t); len(l.Items) != 0 {
		t.Errorf("services left: %d", len(l.Items))
	}
}

// A finalizer on one object keeps the namespace Terminating: creations in
// it are refused, the conditions say what remains, and the namespace goes
// once the finalizer does.
func TestTerminatingNamespaceWaitsForContent(t *testing.T) {
	cs := startController(t)
	ctx := t.Context()
	const ns, hold = "slow", "example.com/hold"
	createNamespace(t, cs, ns)
	populate(t, cs, ns)
	must(cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{hold}}}, metav1.CreateOptions{}))(t)
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create in a terminating namespace: err = %v, want 403 Forbidden", err)
	}

	testkit.Eventually(t, 20*time.Second, "conditions report the held configmap", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		content := condition(n, corev1.NamespaceContentRemaining)
		fins := condition(n, corev1.NamespaceFinalizersRemaining)
		failed := condition(n, corev1.NamespaceDeletionContentFailure)
		return n.Status.Phase == corev1.NamespaceTerminating &&
			content.Status == corev1.ConditionTrue && content.Message == "Some resources are remaining: configmaps. has 1 resource instances" &&
			fins.Status == corev1.ConditionTrue && strings.Contains(fins.Message, hold+" in 1 resource instances") &&
			failed.Status == corev1.ConditionFalse && failed.Reason == "ContentDeleted", nil
	})
	if l := must(cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))(t); len(l.Items) != 0 {
		t.Errorf("pods left while waiting: %d", len(l.Items))
	}

	patch := []byte(`{"metadata":{"finalizers":null}}`)
	must(cs.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}))(t)
	testkit.Eventually(t, 20*time.Second, "namespace removed after the finalizer", namespaceGone(cs, ns))
}

func condition(n *corev1.Namespace, t corev1.NamespaceConditionType) corev1.NamespaceCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NamespaceCondition{}
}
