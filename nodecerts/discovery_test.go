package nodecerts

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cluster-bootstrap/token/jws"
)

const (
	testID     = "abcdef"
	testSecret = "0123456789abcdef"
	testToken  = testID + "." + testSecret
)

// clusterInfoServer serves kube-public/cluster-info over TLS as the
// control plane does: a kubeconfig naming the server and its CA, signed
// with the token. mutate, when set, changes the ConfigMap at each read
// (the read's number from 1).
type clusterInfoServer struct {
	*httptest.Server
	reads  atomic.Int32
	mutate func(n int32, cm *corev1.ConfigMap)
}

func newClusterInfoServer(t *testing.T, secret string) *clusterInfoServer {
	t.Helper()
	s := &clusterInfoServer{}
	s.Server = httptest.NewUnstartedServer(nil)
	s.StartTLS()
	t.Cleanup(s.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"": {Server: s.URL, CertificateAuthorityData: caPEM}},
		Contexts:       map[string]*clientcmdapi.Context{"": {Cluster: ""}},
		CurrentContext: "",
	}
	content, err := clientcmd.Write(kc)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := jws.ComputeDetachedSignature(string(content), testID, secret)
	if err != nil {
		t.Fatal(err)
	}
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || r.Header.Get("Authorization") != "" {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
			Data:       map[string]string{"kubeconfig": string(content), "jws-kubeconfig-" + testID: sig}}
		if n := s.reads.Add(1); s.mutate != nil {
			s.mutate(n, cm)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(cm)
	})
	return s
}

var quiet = slog.New(slog.DiscardHandler)

func (s *clusterInfoServer) pin() string { return CAHash(s.Certificate()) }

func discover(s *clusterInfoServer, d Discovery) (*clientcmdapi.Config, error) {
	d.Server = strings.TrimPrefix(s.URL, "https://") // kubeadm's HOST:PORT
	d.Timeout, d.RetryInterval = time.Second, 100*time.Millisecond
	d.Log = quiet
	return d.Run(context.Background())
}

func TestDiscoveryWithPinnedCA(t *testing.T) {
	s := newClusterInfoServer(t, testSecret)
	cfg, err := discover(s, Discovery{Token: testToken, CACertHashes: []string{s.pin()}})
	if err != nil {
		t.Fatal(err)
	}
	cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if cluster.Server != s.URL || !strings.Contains(string(cluster.CertificateAuthorityData), "BEGIN CERTIFICATE") || auth.Token != testToken {
		t.Errorf("bootstrap kubeconfig: server %q, CA %d bytes, token %q", cluster.Server, len(cluster.CertificateAuthorityData), auth.Token)
	}
	if n := s.reads.Load(); n != 2 {
		t.Errorf("cluster-info read %d times, want 2 (unverified, then verified)", n)
	}
}

func TestDiscoveryRefusesAnotherCA(t *testing.T) {
	s := newClusterInfoServer(t, testSecret)
	other := "sha256:" + strings.Repeat("ab", 32)
	_, err := discover(s, Discovery{Token: testToken, CACertHashes: []string{other}})
	if err == nil {
		t.Fatal("discovery accepted a CA that is not pinned")
	}
	for _, want := range []string{s.pin(), other, "refusing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestDiscoveryRefusesAWrongSecret(t *testing.T) {
	s := newClusterInfoServer(t, "ffffffffffffffff") // the server signed with another secret
	_, err := discover(s, Discovery{Token: testToken, CACertHashes: []string{s.pin()}})
	if err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("err = %v, want a signature refusal", err)
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Errorf("the error prints the secret: %v", err)
	}
}

func TestDiscoveryUnknownTokenID(t *testing.T) {
	s := newClusterInfoServer(t, testSecret)
	_, err := discover(s, Discovery{Token: "zzzzzz." + testSecret, CACertHashes: []string{s.pin()}})
	if err == nil || !strings.Contains(err.Error(), `token id "zzzzzz" is unknown`) {
		t.Fatalf("err = %v, want the token id unknown", err)
	}
}

func TestDiscoveryNeedsAPinOrTheUnsafeSkip(t *testing.T) {
	s := newClusterInfoServer(t, testSecret)
	if _, err := discover(s, Discovery{Token: testToken}); err == nil || !strings.Contains(err.Error(), "--discovery-token-ca-cert-hash") {
		t.Fatalf("err = %v, want the hash required", err)
	}
	if _, err := discover(s, Discovery{Token: testToken, UnsafeSkipCAVerification: true}); err != nil {
		t.Fatalf("with the unsafe skip: %v", err)
	}
}

func TestDiscoveryRefusesAChangedSecondRead(t *testing.T) {
	s := newClusterInfoServer(t, testSecret)
	s.mutate = func(n int32, cm *corev1.ConfigMap) {
		if n > 1 {
			cm.Data["kubeconfig"] += "\n# changed\n"
		}
	}
	_, err := discover(s, Discovery{Token: testToken, CACertHashes: []string{s.pin()}})
	if err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("err = %v, want the second read refused", err)
	}
}

func TestDiscoveryChecksItsInputs(t *testing.T) {
	for _, d := range []Discovery{
		{Server: "h:1", Token: "not-a-token", UnsafeSkipCAVerification: true},
		{Server: "h:1", Token: testToken, CACertHashes: []string{"md5:00"}},
		{Server: "h:1", Token: testToken, CACertHashes: []string{"sha256:abcd"}},
		{Server: "http://h:1", Token: testToken, UnsafeSkipCAVerification: true},
		{Token: testToken, UnsafeSkipCAVerification: true},
	} {
		if _, err := d.Run(context.Background()); err == nil {
			t.Errorf("%+v: no error", d)
		}
	}
}
