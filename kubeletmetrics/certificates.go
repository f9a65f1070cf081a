package kubeletmetrics

import (
	"crypto/tls"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CertificateTTL publishes upstream kubelet's gauge of the seconds left
// on the node's client ("client": kubelet_certificate_manager_client_ttl_seconds)
// or serving ("server": kubelet_certificate_manager_server_ttl_seconds)
// certificate, negative once expired, +Inf while there is none. current
// is read at each scrape, so a renewal shows at once.
func (m *Metrics) CertificateTTL(which string, current func() *tls.Certificate) error {
	if which != "client" && which != "server" {
		return fmt.Errorf("kubeletmetrics: certificate %q is not client or server", which)
	}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "certificate_manager_" + which + "_ttl_seconds",
		Help: "Gauge of the TTL (time-to-live) of the Kubelet's " + which + " certificate. The value is in seconds until certificate expiry (negative if already expired). " +
			"If the certificate is invalid or unused, the value will be +INF."},
		func() float64 {
			if c := current(); c != nil && c.Leaf != nil {
				return math.Trunc(time.Until(c.Leaf.NotAfter).Seconds())
			}
			return math.Inf(1)
		})
	if err := m.reg.Register(g); err != nil {
		return fmt.Errorf("kubeletmetrics: register the %s certificate's TTL: %w", which, err)
	}
	return nil
}
