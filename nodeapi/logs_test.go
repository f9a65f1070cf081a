package nodeapi

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
)

// criLine is one whole line of a CRI log file.
func criLine(ts time.Time, stream, text string) string {
	return ts.UTC().Format(time.RFC3339Nano) + " " + stream + " F " + text + "\n"
}

func writeFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// logsNode is a node running:
//   - default/web: "app" restarted once (instances 1, running, and 0,
//     exited, both in the runtime); "sidecar" restarted twice with only
//     its newest instance left in the runtime (the log of attempt 1 still
//     on disk); "init" exited once.
//   - default/pending: "app" waiting to start.
//   - default/job: finished and removed from the runtime; "main" ran
//     twice, "once" ran once.
type logsNode struct {
	*testNode
	base time.Time // the timestamp of the first line of web/app
}

func newLogsNode(t *testing.T) *logsNode {
	n := &logsNode{testNode: newTestNode(t, nil), base: time.Now().Add(-3 * time.Hour).Truncate(time.Second)}
	path := func(pod, uid, container string, attempt uint32) string {
		return runtime.ContainerLogPath(n.logRoot, "default", pod, uid, container, attempt)
	}

	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "sidecar"}},
		},
	}
	n.pods.add(web)
	writeFile(t, path("web", "uid-web", "app", 1),
		criLine(n.base, "stdout", "one"),
		criLine(n.base.Add(time.Hour), "stderr", "two"),
		criLine(n.base.Add(2*time.Hour), "stdout", "three"))
	writeFile(t, path("web", "uid-web", "app", 0), criLine(n.base.Add(-time.Hour), "stdout", "zero"))
	writeFile(t, path("web", "uid-web", "sidecar", 2), criLine(n.base, "stdout", "sidecar now"))
	writeFile(t, path("web", "uid-web", "sidecar", 1), criLine(n.base, "stdout", "sidecar before"))
	writeFile(t, path("web", "uid-web", "init", 0), criLine(n.base, "stdout", "init done"))
	n.rt.set(&runtime.PodStatus{
		UID: web.UID, Name: web.Name, Namespace: web.Namespace,
		Sandboxes: []runtime.SandboxStatus{{ID: "sb-web", State: runtime.StateRunning}},
		Containers: []runtime.ContainerStatus{
			{ID: "c-app-1", Name: "app", Attempt: 1, State: runtime.StateRunning, LogPath: path("web", "uid-web", "app", 1)},
			{ID: "c-sidecar-2", Name: "sidecar", Attempt: 2, State: runtime.StateRunning, LogPath: path("web", "uid-web", "sidecar", 2)},
			{ID: "c-app-0", Name: "app", Attempt: 0, State: runtime.StateExited, LogPath: path("web", "uid-web", "app", 0)},
			{ID: "c-init-0", Name: "init", Init: true, Attempt: 0, State: runtime.StateExited, LogPath: path("web", "uid-web", "init", 0)},
		},
	})

	n.pods.add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending", UID: "uid-pending"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}}},
	})

	terminated := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	n.pods.add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "job", UID: "uid-job"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}, {Name: "once"}, {Name: "gone"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", RestartCount: 1, State: terminated},
			{Name: "once", RestartCount: 0, State: terminated},
			{Name: "gone", RestartCount: 0, State: terminated},
		}},
	})
	// default/crash: "app" exited and waits in CrashLoopBackOff; the API
	// names that newest instance as the last terminated one.
	n.pods.add(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "crash", UID: "uid-crash"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, ContainerID: "containerd://c-crash-1"}},
		}}},
	})
	writeFile(t, path("crash", "uid-crash", "app", 1), criLine(n.base, "stdout", "second crash"))
	writeFile(t, path("crash", "uid-crash", "app", 0), criLine(n.base, "stdout", "first crash"))
	n.rt.set(&runtime.PodStatus{
		UID: "uid-crash", Name: "crash", Namespace: "default",
		Sandboxes: []runtime.SandboxStatus{{ID: "sb-crash", State: runtime.StateRunning}},
		Containers: []runtime.ContainerStatus{
			{ID: "c-crash-1", Name: "app", Attempt: 1, State: runtime.StateExited, LogPath: path("crash", "uid-crash", "app", 1)},
			{ID: "c-crash-0", Name: "app", Attempt: 0, State: runtime.StateExited, LogPath: path("crash", "uid-crash", "app", 0)},
		},
	})
	writeFile(t, path("job", "uid-job", "main", 1), criLine(n.base, "stdout", "main second run"))
	writeFile(t, path("job", "uid-job", "main", 0), criLine(n.base, "stdout", "main first run"))
	writeFile(t, path("job", "uid-job", "once", 0), criLine(n.base, "stdout", "once only"))
	return n
}

func TestContainerLogs(t *testing.T) {
	n := newLogsNode(t)
	// Upstream's fixed-width form: nanoseconds even when zero.
	stamp := func(d time.Duration) string { return n.base.Add(d).UTC().Format("2006-01-02T15:04:05.000000000Z07:00") }
	tests := []struct {
		name  string
		path  string
		code  int
		want  string // the body, or for errors a part of the Status message
		equal bool
	}{
		{"whole log, both streams", "/containerLogs/default/web/app", 200, "one\ntwo\nthree\n", true},
		{"tail", "/containerLogs/default/web/app?tailLines=2", 200, "two\nthree\n", true},
		{"tail zero", "/containerLogs/default/web/app?tailLines=0", 200, "", true},
		{"tail more than there is", "/containerLogs/default/web/app?tailLines=10", 200, "one\ntwo\nthree\n", true},
		{"limitBytes", "/containerLogs/default/web/app?limitBytes=6", 200, "one\ntw", true},
		{"tail and limitBytes", "/containerLogs/default/web/app?tailLines=1&limitBytes=3", 200, "thr", true},
		{"timestamps", "/containerLogs/default/web/app?timestamps=true&tailLines=2", 200,
			stamp(time.Hour) + " two\n" + stamp(2*time.Hour) + " three\n", true},
		{"sinceTime", "/containerLogs/default/web/app?sinceTime=" + n.base.Add(time.Hour).UTC().Format(time.RFC3339), 200, "two\nthree\n", true},
		{"sinceSeconds", "/containerLogs/default/web/app?sinceSeconds=5400", 200, "three\n", true},
		{"previous from the runtime's second instance", "/containerLogs/default/web/app?previous=true", 200, "zero\n", true},
		{"previous ends a follow", "/containerLogs/default/web/app?previous=true&follow=true", 200, "zero\n", true},
		{"newest instance", "/containerLogs/default/web/sidecar", 200, "sidecar now\n", true},
		{"previous from the path", "/containerLogs/default/web/sidecar?previous=1", 200, "sidecar before\n", true},
		{"init container", "/containerLogs/default/web/init", 200, "init done\n", true},
		{"no previous instance", "/containerLogs/default/web/init?previous=true", 400, `previous terminated container "init" in pod "web" not found`, false},
		{"crash loop, previous is the newest exited instance", "/containerLogs/default/crash/app?previous=true", 200, "second crash\n", true},
		{"finished pod", "/containerLogs/default/job/main", 200, "main second run\n", true},
		{"finished pod, follow ends", "/containerLogs/default/job/main?follow=true", 200, "main second run\n", true},
		{"finished pod, previous", "/containerLogs/default/job/main?previous=true", 200, "main first run\n", true},
		{"finished pod, one run", "/containerLogs/default/job/once", 200, "once only\n", true},
		{"finished pod, one run, previous", "/containerLogs/default/job/once?previous=true", 400, `container "once"`, false},
		{"finished pod, log removed", "/containerLogs/default/job/gone", 400, `container "gone"`, false},
		{"waiting", "/containerLogs/default/pending/app", 400, `container "app" in pod "pending" is waiting to start`, false},
		{"unknown pod", "/containerLogs/default/nosuch/app", 404, "nosuch", false},
		{"pod in another namespace", "/containerLogs/kube-system/web/app", 404, "web", false},
		{"unknown container", "/containerLogs/default/web/nosuch", 404, "nosuch", false},
		{"negative tail", "/containerLogs/default/web/app?tailLines=-1", 400, "tailLines", false},
		{"bad limitBytes", "/containerLogs/default/web/app?limitBytes=lots", 400, "limitBytes", false},
		{"bad follow", "/containerLogs/default/web/app?follow=maybe", 400, "follow", false},
		{"bad timestamps", "/containerLogs/default/web/app?timestamps=yes", 400, "timestamps", false},
		{"zero sinceSeconds", "/containerLogs/default/web/app?sinceSeconds=0", 400, "sinceSeconds", false},
		{"bad sinceTime", "/containerLogs/default/web/app?sinceTime=yesterday", 400, "sinceTime", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := n.do(t, "GET", tt.path)
			if code != tt.code {
				t.Fatalf("%d %q, want %d", code, body, tt.code)
			}
			if tt.code != http.StatusOK {
				if st := status(t, body); st.Code != int32(tt.code) || !strings.Contains(st.Message, tt.want) {
					t.Errorf("Status %d %q, want %d with %q", st.Code, st.Message, tt.code, tt.want)
				}
				return
			}
			if body != tt.want {
				t.Errorf("body %q, want %q", body, tt.want)
			}
		})
	}
}

func TestContainerLogsFollow(t *testing.T) {
	n := newLogsNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", n.url+"/containerLogs/default/web/app?follow=true&tailLines=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.clients["apiserver"].Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("answer %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewReader(resp.Body)
	readLine := func() string {
		t.Helper()
		l, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("read followed log: %q %v", l, err)
		}
		return l
	}
	if l := readLine(); l != "three\n" {
		t.Fatalf("first line %q", l)
	}
	logPath := runtime.ContainerLogPath(n.logRoot, "default", "web", "uid-web", "app", 1)
	appendFile(t, logPath, criLine(time.Now(), "stdout", "four"))
	if l := readLine(); l != "four\n" {
		t.Fatalf("appended line %q", l)
	}
	// Once the container stopped, its last words arrive and the stream ends.
	n.rt.setState("uid-web", "c-app-1", runtime.StateExited)
	appendFile(t, logPath, criLine(time.Now(), "stderr", "five"))
	if l := readLine(); l != "five\n" {
		t.Fatalf("last line %q", l)
	}
	done := make(chan error, 1)
	go func() {
		_, err := lines.ReadString('\n')
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("more lines after the container exited")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the followed log of an exited container did not end")
	}
}

func TestLogOptions(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		query                string
		follow, ts, previous bool
		tail, limit          *int64
		since                time.Time
	}{
		{query: ""},
		{query: "follow=true&timestamps=1", follow: true, ts: true},
		{query: "follow=true&previous=true", previous: true},
		{query: "tailLines=0&limitBytes=10", tail: n(0), limit: n(10)},
		{query: "sinceTime=2025-01-02T03:04:05Z", since: since},
	}
	for _, tt := range tests {
		opts, previous, err := logOptions(httptest.NewRequest("GET", "/containerLogs/a/b/c?"+tt.query, nil))
		if err != nil {
			t.Errorf("%q: %v", tt.query, err)
			continue
		}
		if opts.Follow != tt.follow || opts.Timestamp != tt.ts || previous != tt.previous || !opts.Since.Equal(tt.since) ||
			!eqPtr(opts.TailLines, tt.tail) || !eqPtr(opts.LimitBytes, tt.limit) {
			t.Errorf("%q: %+v previous=%v", tt.query, opts, previous)
		}
	}
	opts, _, err := logOptions(httptest.NewRequest("GET", "/x?sinceSeconds=60", nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(opts.Since); d < 59*time.Second || d > 70*time.Second {
		t.Errorf("sinceSeconds=60 gave since %v ago", d)
	}
	for _, bad := range []string{"follow=2", "previous=no", "tailLines=-3", "tailLines=1.5", "limitBytes=-1", "sinceSeconds=-5", "sinceSeconds=x", "sinceTime=2025-01-02"} {
		if _, _, err := logOptions(httptest.NewRequest("GET", "/x?"+bad, nil)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func eqPtr(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestRunning(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	terminated := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}
	tests := []struct {
		name   string
		status []runtime.ContainerStatus
		api    []corev1.ContainerStatus
		want   string // "" for running
	}{
		{"running", []runtime.ContainerStatus{{ID: "c2", Name: "c", State: runtime.StateRunning}, {ID: "c1", Name: "c", State: runtime.StateExited}}, nil, ""},
		{"exited", []runtime.ContainerStatus{{ID: "c2", Name: "c", State: runtime.StateExited}, {ID: "c1", Name: "c", State: runtime.StateRunning}}, nil, "not running (exited)"},
		{"created", []runtime.ContainerStatus{{ID: "c1", Name: "c", State: runtime.StateCreated}}, nil, "not running (created)"},
		{"gone, terminated", nil, []corev1.ContainerStatus{terminated}, "not running (terminated)"},
		{"never started", []runtime.ContainerStatus{{ID: "o", Name: "other", State: runtime.StateRunning}}, nil, "waiting to start"},
	}
	for _, tt := range tests {
		p := pod.DeepCopy()
		p.Status.ContainerStatuses = tt.api
		target := &podTarget{pod: p, container: "c", status: &runtime.PodStatus{Containers: tt.status}}
		c, err := target.running()
		switch {
		case tt.want == "" && (err != nil || c == nil || c.ID != "c2"):
			t.Errorf("%s: %v %v", tt.name, c, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestInstances(t *testing.T) {
	target := &podTarget{container: "c", status: &runtime.PodStatus{Containers: []runtime.ContainerStatus{
		{ID: "o1", Name: "other"}, {ID: "c3", Name: "c"}, {ID: "o0", Name: "other"}, {ID: "c2", Name: "c"}, {ID: "c1", Name: "c"},
	}}}
	if latest, prev := target.instances(); latest == nil || prev == nil || latest.ID != "c3" || prev.ID != "c2" {
		t.Errorf("instances = %v, %v", latest, prev)
	}
	target.container = "other"
	target.status.Containers = target.status.Containers[:2]
	if latest, prev := target.instances(); latest == nil || prev != nil || latest.ID != "o1" {
		t.Errorf("one instance: %v, %v", latest, prev)
	}
	target.container = "none"
	if latest, prev := target.instances(); latest != nil || prev != nil {
		t.Errorf("no instance: %v, %v", latest, prev)
	}
}
