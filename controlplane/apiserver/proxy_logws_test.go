package apiserver

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
)

func TestPodLogWebSocket(t *testing.T) {
	env := newProxyEnv(t)
	tlsConfig, err := rest.TLSConfigFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	wsURL := strings.Replace(env.config.Host, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/solo/log?tailLines=5"
	for _, tt := range []struct {
		protocol string
		decode   func(string) (string, error)
	}{
		{"base64.binary.k8s.io", func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		}},
		{"binary.k8s.io", func(s string) (string, error) { return s, nil }},
	} {
		cfg, err := websocket.NewConfig(wsURL, env.config.Host)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TlsConfig, cfg.Protocol = tlsConfig, []string{tt.protocol}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			t.Fatalf("%s: dial: %v", tt.protocol, err)
		}
		if got := ws.Config().Protocol; len(got) != 1 || got[0] != tt.protocol {
			t.Errorf("%s: negotiated %v", tt.protocol, got)
		}
		var log strings.Builder
		for {
			var msg string
			if err := websocket.Message.Receive(ws, &msg); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: receive: %v", tt.protocol, err)
			}
			chunk, err := tt.decode(msg)
			if err != nil {
				t.Fatalf("%s: message %q: %v", tt.protocol, msg, err)
			}
			log.WriteString(chunk)
		}
		ws.Close()
		if want := "log of /containerLogs/default/solo/app\n"; log.String() != want {
			t.Errorf("%s: log %q, want %q", tt.protocol, log.String(), want)
		}
	}
	if q := env.node.requests()[0].query; q.Get("tailLines") != "5" {
		t.Errorf("the node got %v", q)
	}
}

func TestPodLogWebSocketNodeError(t *testing.T) {
	env := newProxyEnv(t)
	env.node.setLogs(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "container app is waiting to start", http.StatusBadRequest)
	})
	header := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {"base64.binary.k8s.io"}}
	if code := env.doUpgrade(t, "GET", "/api/v1/namespaces/default/pods/solo/log", header); code != http.StatusBadRequest {
		t.Errorf("a refused log over websocket: %d", code)
	}
}
