package nodecerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
)

func TestWriteKubeconfigIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bootstrap.conf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKubeconfig(path, BootstrapKubeconfig("https://cp:6443", []byte("ca"), testToken)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v, mode %v, want 0600", err, st.Mode().Perm())
	}
	rc, err := LoadRESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://cp:6443" || string(rc.CAData) != "ca" || rc.BearerToken != testToken {
		t.Errorf("read back: host %s, CA %q, token %q", rc.Host, rc.CAData, rc.BearerToken)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// writePair writes a certificate of ca valid until notAfter, with its
// key, as one pair file, and returns its path.
func writePair(t *testing.T, ca *testCA, dir string, notAfter time.Time) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.CertificateRequest{Subject: nodeSubject("n1")}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := ca.issue(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), notAfter.Add(-time.Hour), notAfter)
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	path := filepath.Join(dir, "pair.pem")
	if err := os.WriteFile(path, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClientCertValid(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	for _, tc := range []struct {
		name  string
		setup func(dir string) string // returns the kubeconfig path
		want  bool
	}{
		{"missing", func(dir string) string { return filepath.Join(dir, "none") }, false},
		{"garbage", func(dir string) string {
			p := filepath.Join(dir, "kc")
			os.WriteFile(p, []byte("{not yaml"), 0o600)
			return p
		}, false},
		{"token only", func(dir string) string {
			p := filepath.Join(dir, "kc")
			WriteKubeconfig(p, BootstrapKubeconfig("https://cp", ca.pem, testToken))
			return p
		}, false},
		{"valid", func(dir string) string {
			p := filepath.Join(dir, "kc")
			WriteKubeconfig(p, certKubeconfig(&rest.Config{Host: "https://cp"}, writePair(t, ca, dir, now.Add(time.Hour))))
			return p
		}, true},
		{"expired", func(dir string) string {
			p := filepath.Join(dir, "kc")
			WriteKubeconfig(p, certKubeconfig(&rest.Config{Host: "https://cp"}, writePair(t, ca, dir, now.Add(-time.Minute))))
			return p
		}, false},
		{"certificate file gone", func(dir string) string {
			p := filepath.Join(dir, "kc")
			WriteKubeconfig(p, certKubeconfig(&rest.Config{Host: "https://cp"}, filepath.Join(dir, "gone.pem")))
			return p
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clientCertValid(tc.setup(t.TempDir()), now)
			if err != nil || got != tc.want {
				t.Errorf("clientCertValid = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
