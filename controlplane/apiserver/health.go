package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// storageCheckTimeout bounds the storage check, as upstream's etcd check.
const storageCheckTimeout = 2 * time.Second

// newHealthHandler serves /healthz, /livez and /readyz with named checks
// through upstream's healthz handlers: each check also at PATH/NAME,
// ?verbose lists them ([+]ping ok ...), ?exclude=NAME skips one. Live
// means the process answers and its storage reads and commits; ready
// adds the components' readiness (ready, may be nil) and turns false once
// shutdown has begun.
func (s *Server) newHealthHandler(ready func() error) http.Handler {
	storageCheck := healthz.NamedCheck("storage", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), storageCheckTimeout)
		defer cancel()
		return storage.CheckHealth(ctx, s.store)
	})
	live := []healthz.HealthChecker{healthz.PingHealthz, healthz.LogHealthz, storageCheck}
	readyChecks := append(append([]healthz.HealthChecker(nil), live...),
		healthz.NamedCheck("shutdown", func(*http.Request) error {
			select {
			case <-s.shuttingDown:
				return fmt.Errorf("process is shutting down")
			default:
				return nil
			}
		}))
	if ready != nil {
		readyChecks = append(readyChecks, healthz.NamedCheck("components", func(*http.Request) error { return ready() }))
	}
	mux := http.NewServeMux()
	healthz.InstallHandler(mux, live...)
	healthz.InstallLivezHandler(mux, live...)
	healthz.InstallReadyzHandler(mux, readyChecks...)
	return mux
}
