package apiserver

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestHealthChecks: /livez and /readyz run named checks as upstream's
// (?verbose, ?exclude, PATH/NAME), the storage check among them, readiness
// adds the components' check, and a closed store fails liveness.
func TestHealthChecks(t *testing.T) {
	var notReady atomic.Bool
	notReady.Store(true)
	env := newTestEnvWith(t, storage.HubOptions{}, nil, func(c *Config) {
		c.Ready = func() error {
			if notReady.Load() {
				return errors.New("informers not synced")
			}
			return nil
		}
	})
	client, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(env.config.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/livez?verbose"); code != 200 || !strings.Contains(body, "[+]storage ok") || !strings.Contains(body, "[+]ping ok") ||
		!strings.Contains(body, "livez check passed") {
		t.Fatalf("/livez?verbose: %d\n%s", code, body)
	}
	if code, body := get("/readyz?verbose"); code != 500 || !strings.Contains(body, "[-]components failed") {
		t.Fatalf("/readyz while components are not ready: %d\n%s", code, body)
	}
	if code, body := get("/readyz?exclude=components"); code != 200 || body != "ok" {
		t.Fatalf("/readyz?exclude=components: %d %q", code, body)
	}
	notReady.Store(false)
	if code, body := get("/readyz"); code != 200 || body != "ok" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, body := get("/livez/storage"); code != 200 || body != "ok" {
		t.Fatalf("/livez/storage: %d %q", code, body)
	}
	if code, _ := get("/livez/nonsense"); code != 404 {
		t.Fatalf("/livez/nonsense: %d, want 404", code)
	}
	env.store.Close()
	if code, body := get("/livez?verbose"); code != 500 || !strings.Contains(body, "[-]storage failed") {
		t.Fatalf("/livez with the store closed: %d\n%s", code, body)
	}
}
