package nodelet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultHealthzPort is upstream's: monitors and installers that probe a
// kubelet's http://127.0.0.1:10248/healthz work unchanged.
const DefaultHealthzPort = 10248

// healthzTimeout bounds one check: containerd that does not answer in
// time is unhealthy, and the prober gets a reply either way.
const healthzTimeout = 5 * time.Second

// listenHealthz listens on the healthz address, nil when disabled
// (HealthzPort < 0). Listening before the slow start-up makes a port in
// use fail the start at once.
func (a *Agent) listenHealthz() (net.Listener, error) {
	if a.cfg.HealthzPort < 0 {
		return nil, nil
	}
	addr := net.JoinHostPort(a.cfg.HealthzBindAddress, strconv.Itoa(a.cfg.HealthzPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("nodelet: healthz: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// healthzHandler answers GET /healthz with 200 "ok" while check passes
// and 500 with its error otherwise, as upstream's kubelet.
func healthzHandler(check func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthzTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := check(ctx); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprint(w, "ok")
	})
	return mux
}

// serveHealthz serves plain HTTP on ln until ctx ends.
func serveHealthz(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving healthz", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("nodelet: healthz: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	return nil
}
