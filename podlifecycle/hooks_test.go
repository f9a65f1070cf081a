package podlifecycle

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHTTPHookAndPorts(t *testing.T) {
	codes := map[string]int{"/ok": 200, "/redirect": 302, "/fail": 500}
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("X-Hook")
		w.WriteHeader(codes[r.URL.Path])
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	c := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(p)}}}
	target := hookTarget{pod: &corev1.Pod{}, c: c, podIP: host}
	f := newFakeSyncer(t)
	hook := func(path string, port intstr.IntOrString) error {
		g := &corev1.HTTPGetAction{Path: path, Port: port, HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Hook", Value: "1"}}}
		return f.s.runHook(context.Background(), target, &corev1.LifecycleHandler{HTTPGet: g})
	}
	for path, ok := range map[string]bool{"/ok": true, "/redirect": true, "/fail": false} {
		if err := hook(path, intstr.FromString("web")); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", path, err, ok)
		}
	}
	if gotHeader != "1" {
		t.Errorf("hook header not sent: %q", gotHeader)
	}
	if err := hook("/ok", intstr.FromString("nope")); err == nil {
		t.Error("unknown named port: want an error")
	}
	if err := hook("/ok", intstr.FromInt32(int32(p))); err != nil {
		t.Errorf("numbered port: %v", err)
	}
}

// TestPreStopRunsBeforeTheStopWithinGrace: the hook runs first (an exec
// in the container), and the stop gets what is left of the grace period,
// at least 2 s.
func TestPreStopRunsBeforeTheStopWithinGrace(t *testing.T) {
	f := newFakeSyncer(t)
	sleep := &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}
	exec := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"flush"}}}
	for _, tc := range []struct {
		name  string
		hook  *corev1.LifecycleHandler
		grace time.Duration
		want  []string
	}{
		{"exec", exec, 10 * time.Second, []string{"Exec c1", "StopContainer c1 10s"}},
		{"sleep takes its time off the grace", sleep, 10 * time.Second, []string{"StopContainer c1 9s"}},
		{"at least 2s are left for the stop", sleep, 2 * time.Second, []string{"StopContainer c1 2s"}},
	} {
		f.rt.calls = nil
		c := &corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: tc.hook}}
		if err := f.s.stopContainer(context.Background(), hookTarget{pod: &corev1.Pod{}, c: c, id: "c1"}, tc.grace); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(f.rt.calls, "; "), strings.Join(tc.want, "; "); got != want {
			t.Errorf("%s: calls %q, want %q", tc.name, got, want)
		}
	}
}
