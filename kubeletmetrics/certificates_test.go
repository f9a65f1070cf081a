package kubeletmetrics

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCertificateTTL(t *testing.T) {
	m := newMetrics(t)
	var cur atomic.Pointer[tls.Certificate]
	if err := m.CertificateTTL("server", cur.Load); err != nil {
		t.Fatal(err)
	}
	if out := scrape(t, m); !strings.Contains(out, "kubelet_certificate_manager_server_ttl_seconds +Inf") {
		t.Errorf("no certificate yet:\n%s", grepLines(out, "certificate_manager"))
	}
	cur.Store(&tls.Certificate{Leaf: &x509.Certificate{NotAfter: time.Now().Add(time.Hour + 30*time.Second)}})
	if out := scrape(t, m); !strings.Contains(out, "kubelet_certificate_manager_server_ttl_seconds 3629") &&
		!strings.Contains(out, "kubelet_certificate_manager_server_ttl_seconds 3630") {
		t.Errorf("an hour and 30 seconds left:\n%s", grepLines(out, "certificate_manager"))
	}
	if err := m.CertificateTTL("other", cur.Load); err == nil {
		t.Error("a third kind of certificate accepted")
	}
}
