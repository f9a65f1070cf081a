package upstream

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/test/testkit"
)

// Every namespace gets its default ServiceAccount and the kube-root-ca.crt
// ConfigMap with the cluster CA; a deleted account comes back, and an
// edited ConfigMap is put right.
func TestServiceAccountsAndRootCA(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := startOn(t, srv, Config{})
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	for _, ns := range []string{"default", "kube-system", "team"} {
		waitDefaultAccount(t, cs, ns)
		testkit.Eventually(t, 20*time.Second, "kube-root-ca.crt in "+ns, func(ctx context.Context) (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && cm.Data["ca.crt"] == string(srv.Bundle.CAPEM()), err
		})
	}
	if err := cs.CoreV1().ServiceAccounts("team").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete default account: %v", err)
	}
	waitDefaultAccount(t, cs, "team")
	cm, err := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "tampered"
	if _, err := cs.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("edit kube-root-ca.crt: %v", err)
	}
	testkit.Eventually(t, 20*time.Second, "kube-root-ca.crt restored", func(ctx context.Context) (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps("team").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil && cm.Data["ca.crt"] == string(srv.Bundle.CAPEM()), err
	})
}

func waitDefaultAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "default ServiceAccount in "+ns, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}
