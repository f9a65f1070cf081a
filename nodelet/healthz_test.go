package nodelet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHealthzHandler(t *testing.T) {
	var health error
	h := healthzHandler(func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("check without a deadline")
		}
		return health
	})
	get := func(method string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(http.MethodGet); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %q, want 200 ok", code, body)
	}
	health = errors.New("PLEG is not healthy: pleg was last seen active 4m0s ago")
	if code, body := get(http.MethodGet); code != http.StatusInternalServerError || !strings.Contains(body, "PLEG is not healthy") {
		t.Errorf("unhealthy: %d %q, want 500 with the reason", code, body)
	}
	if code, _ := get(http.MethodPost); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", code)
	}
}

func TestHealthzServeAndPortInUse(t *testing.T) {
	a := &Agent{cfg: Config{HealthzBindAddress: "127.0.0.1", HealthzPort: -1}}
	if ln, err := a.listenHealthz(); ln != nil || err != nil {
		t.Fatalf("disabled: %v, %v", ln, err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	a.cfg.HealthzPort = busy.Addr().(*net.TCPAddr).Port
	if _, err := a.listenHealthz(); err == nil || !strings.Contains(err.Error(), "healthz") {
		t.Fatalf("port in use: %v, want an error naming healthz", err)
	}
	busy.Close()
	ln, err := a.listenHealthz()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHealthz(ctx, ln, healthzHandler(func(context.Context) error { return nil }), slog.New(slog.DiscardHandler))
	}()
	resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(a.cfg.HealthzPort)) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET /healthz: %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveHealthz: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serveHealthz did not return after cancel")
	}
}
