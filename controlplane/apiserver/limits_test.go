package apiserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// slowBody sends a ConfigMap a byte at a time, one every interval.
func slowBody(interval time.Duration) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		for _, b := range []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"slow"}}`) {
			time.Sleep(interval)
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return pr
}

// TestRequestLimits: a body sent a byte at a time is cut off with 504 at
// the request timeout; while a mutating request holds the only mutating
// slot another user's write gets 429 with Retry-After (system:masters is
// not limited); a watch outlives the timeout.
func TestRequestLimits(t *testing.T) {
	env := newTestEnvWith(t, storage.HubOptions{}, nil, func(c *Config) {
		c.RequestTimeout = time.Second
		c.MaxMutatingRequestsInflight = 1
	})
	certPEM, keyPEM, err := env.bundle.SignClientCert("alice", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := rest.CopyConfig(env.config)
	alice.CertData, alice.KeyData = certPEM, keyPEM
	aliceClient, err := rest.HTTPClientFor(alice)
	if err != nil {
		t.Fatal(err)
	}
	post := func(c *http.Client, body io.Reader) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env.config.Host+"/api/v1/namespaces/default/configmaps", body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	// alice's slow body holds the one mutating slot until the timeout.
	slow := make(chan int, 1)
	start := time.Now()
	go func() {
		code, _, _ := post(aliceClient, slowBody(200*time.Millisecond))
		slow <- code
	}()
	time.Sleep(300 * time.Millisecond)
	code, header, body := post(aliceClient, strings.NewReader(`{"metadata":{"name":"second"}}`))
	if code != http.StatusTooManyRequests || header.Get("Retry-After") != "1" {
		t.Fatalf("a second write while the slot is taken: %d %v %s, want 429 with Retry-After", code, header, body)
	}
	admin, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := post(admin, strings.NewReader(`{"metadata":{"name":"masters"}}`)); code != http.StatusCreated {
		t.Fatalf("system:masters while the slot is taken: %d %s, want 201", code, body)
	}
	if code := <-slow; code != http.StatusGatewayTimeout {
		t.Fatalf("slow body: %d, want 504", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("slow body cut off after %v", d)
	}
	if code, _, body := post(aliceClient, strings.NewReader(`{"metadata":{"name":"third"}}`)); code != http.StatusCreated {
		t.Fatalf("a write once the slot is free: %d %s", code, body)
	}

	// A watch is long-running: no deadline.
	w, err := env.clientset(t).CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	time.Sleep(1500 * time.Millisecond)
	if _, err := env.clientset(t).CoreV1().ConfigMaps("default").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-timeout"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended at the request timeout")
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "after-timeout" {
				return
			}
		case <-deadline:
			t.Fatal("no event after the request timeout")
		}
	}
}
