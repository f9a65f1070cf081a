package nodeapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serveSummary answers upstream's /stats/summary.
func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		writeStatus(w, apierrors.NewServiceUnavailable("stats are not collected on this node"))
		return
	}
	writeJSON(w, http.StatusOK, s.cfg.Stats.Summary())
}

// serveResourceMetrics answers upstream's /metrics/resource (Prometheus text).
func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		writeStatus(w, apierrors.NewServiceUnavailable("stats are not collected on this node"))
		return
	}
	s.cfg.Stats.ResourceMetricsHandler().ServeHTTP(w, r)
}
