package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

func TestClusterDNSServiceIP(t *testing.T) {
	for cidr, want := range map[string]string{"10.96.0.0/12": "10.96.0.10", "10.0.0.0/24": "10.0.0.10", "fd00:96::/108": "fd00:96::a", "10.0.0.0/29": ""} {
		ip, err := ClusterDNSServiceIP(cidr)
		if (err != nil) != (want == "") || err == nil && ip.String() != want {
			t.Errorf("ClusterDNSServiceIP(%s) = %v, %v; want %q", cidr, ip, err, want)
		}
	}
}

// The control plane's start-up creates kube-system/kube-dns with the
// cluster DNS IP, which then no other Service gets; a second start leaves
// it alone.
func TestEnsureKubeDNSService(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	withDNS := func() *Server {
		s, err := New(Config{Store: env.store, Resources: registry.All(),
			Authn: testAuthn(), Authz: AllowAuthenticated, ClusterDNSIP: "10.96.0.10"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := withDNS().EnsureDefaults(ctx); err != nil {
		t.Fatalf("EnsureDefaults: %v", err)
	}
	cs := env.clientset(t)
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get kube-dns: %v", err)
	}
	if svc.Spec.ClusterIP != "10.96.0.10" || svc.Labels["k8s-app"] != "kube-dns" || len(svc.Spec.Selector) != 0 ||
		len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Protocol != corev1.ProtocolUDP || svc.Spec.Ports[1].Name != "dns-tcp" {
		t.Fatalf("kube-dns = %+v", svc.Spec)
	}
	// Nobody else gets the address.
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, taken, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("a Service asking for 10.96.0.10: %v, want Invalid", err)
	}
	// A second start: no error, the Service unchanged.
	if err := withDNS().EnsureDefaults(ctx); err != nil {
		t.Fatalf("EnsureDefaults again: %v", err)
	}
	again, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || again.ResourceVersion != svc.ResourceVersion {
		t.Fatalf("kube-dns after a restart: %v, %v", again, err)
	}
}

// A cluster whose user took the address before: the start goes on.
func TestEnsureKubeDNSServiceAddressTaken(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := context.Background()
	cs := env.clientset(t)
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: env.store, Resources: registry.All(),
		Authn: testAuthn(), Authz: AllowAuthenticated, ClusterDNSIP: "10.96.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureDefaults(ctx); err != nil {
		t.Fatalf("EnsureDefaults: %v", err)
	}
	if _, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("kube-dns: %v, want NotFound", err)
	}
}
