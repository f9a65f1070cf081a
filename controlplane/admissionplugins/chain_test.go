package admissionplugins_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
)

// start runs a real API server whose admission chain is upstream's
// default plugins, their informers on a loopback client.
func start(t *testing.T) kubernetes.Interface {
	srv := controlplanetest.Start(t, controlplanetest.Options{Admission: controlplanetest.UpstreamAdmission})
	return srv.Clientset(t)
}

func pod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestServiceAccountAdmission(t *testing.T) {
	cs := start(t)
	ctx := context.Background()
	ns := "default"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("default account, token volume, pull secrets", func(t *testing.T) {
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod("a", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ServiceAccountName != "default" || got.Spec.DeprecatedServiceAccount != "default" { //nolint:staticcheck // kept in sync upstream
			t.Errorf("serviceAccountName %q", got.Spec.ServiceAccountName)
		}
		if len(got.Spec.ImagePullSecrets) != 1 || got.Spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("imagePullSecrets %v: want the account's", got.Spec.ImagePullSecrets)
		}
		if len(got.Spec.Volumes) != 1 || !strings.HasPrefix(got.Spec.Volumes[0].Name, "kube-api-access-") || got.Spec.Volumes[0].Projected == nil {
			t.Fatalf("volumes %+v: want one projected kube-api-access-*", got.Spec.Volumes)
		}
		src := got.Spec.Volumes[0].Projected.Sources
		if len(src) != 3 || src[0].ServiceAccountToken == nil || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
			src[1].ConfigMap == nil || src[1].ConfigMap.Name != "kube-root-ca.crt" || src[2].DownwardAPI == nil {
			t.Errorf("sources %+v: want a 3607 s token, kube-root-ca.crt and the namespace", src)
		}
		m := got.Spec.Containers[0].VolumeMounts
		if len(m) != 1 || m[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !m[0].ReadOnly || m[0].Name != got.Spec.Volumes[0].Name {
			t.Errorf("mounts %+v", m)
		}
	})

	t.Run("automount off", func(t *testing.T) {
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod("b", func(p *corev1.Pod) {
			off := false
			p.Spec.AutomountServiceAccountToken = &off
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Volumes) != 0 || len(got.Spec.Containers[0].VolumeMounts) != 0 {
			t.Errorf("automountServiceAccountToken false: volumes %v mounts %v", got.Spec.Volumes, got.Spec.Containers[0].VolumeMounts)
		}
	})

	t.Run("missing account", func(t *testing.T) {
		start := time.Now()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("c", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "nope" }), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account default/nope: serviceaccount "nope" not found`) {
			t.Fatalf("pod of a missing account: %v", err)
		}
		t.Logf("refused after %v: %v", time.Since(start), err)
	})

	t.Run("dry run mutates too", func(t *testing.T) {
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod("d", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Volumes) != 1 {
			t.Errorf("dry run: volumes %v", got.Spec.Volumes)
		}
	})

	t.Run("other kinds pass", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
