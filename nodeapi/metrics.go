package nodeapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serveMetrics answers upstream's /metrics and /metrics/probes with the
// nodelet's own metrics (Prometheus text), behind the same authentication
// and authorization as every other path but /healthz.
func serveMetrics(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h == nil {
			writeStatus(w, apierrors.NewServiceUnavailable("metrics are not collected on this node"))
			return
		}
		h.ServeHTTP(w, r)
	}
}
