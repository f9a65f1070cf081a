package scheduler

import "github.com/prometheus/client_golang/prometheus"

// Attempts is scheduler_schedule_attempts_total for result and profile.
func (m *Metrics) Attempts(result, profile string) prometheus.Counter {
	return m.attempts.WithLabelValues(result, profile)
}
