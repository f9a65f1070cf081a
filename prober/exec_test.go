package prober

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestExecProbe(t *testing.T) {
	errGone := errors.New("container not running")
	tests := []struct {
		name       string
		exec       ExecFunc
		want       Result
		wantOutput string
		wantErr    error
	}{{
		name: "exit 0",
		exec: func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte("ok\n"), 0, nil
		},
		want: Success, wantOutput: "ok\n",
	}, {
		name: "exit 1",
		exec: func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte("not yet"), 1, nil
		},
		want: Failure, wantOutput: "not yet",
	}, {
		name: "output limited",
		exec: func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return []byte(strings.Repeat("y", 2*maxOutputLength)), 2, nil
		},
		want: Failure, wantOutput: strings.Repeat("y", maxOutputLength),
	}, {
		name: "timeout",
		exec: func(ctx context.Context, _ string, _ []string, timeout time.Duration) ([]byte, int, error) {
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
				return nil, 0, errors.New("no deadline")
			}
			<-ctx.Done()
			return nil, 0, ctx.Err()
		},
		want: Failure, wantOutput: `command timed out: "check --deep" timed out after 20ms`,
	}, {
		name: "error",
		exec: func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return nil, 0, errGone
		},
		want: Unknown, wantErr: errGone,
	}, {
		name: "no exec", want: Unknown, wantErr: errAny,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := testHandlers()
			h.exec = tt.exec
			got, out, err := h.execProbe(context.Background(), "c1", []string{"check", "--deep"}, 20*time.Millisecond)
			if got != tt.want || out != tt.wantOutput {
				t.Errorf("got %v %q, want %v %q", got, out, tt.want, tt.wantOutput)
			}
			switch {
			case tt.wantErr == nil && err != nil, tt.wantErr != nil && err == nil:
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
		})
	}
}

// errAny stands for any error in tables.
var errAny = errors.New("any error")

func TestExpandCommand(t *testing.T) {
	env := []corev1.EnvVar{
		{Name: "PORT", Value: "8080"},
		{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{}},
	}
	tests := []struct{ in, want string }{
		{"curl localhost:$(PORT)/", "curl localhost:8080/"},
		{"$(PORT)$(PORT)", "80808080"},
		{"$$(PORT)", "$(PORT)"},
		{"$(MISSING)", "$(MISSING)"},
		{"x$(FROM_SECRET)y", "xy"},
		{"unterminated $(PORT", "unterminated $(PORT"},
		{"cost $5 and $", "cost $5 and $"},
		{"$$$$", "$$"},
	}
	for _, tt := range tests {
		if got := expandCommand([]string{tt.in}, env); !reflect.DeepEqual(got, []string{tt.want}) {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

type event struct{ container, eventtype, reason, message string }

type eventLog struct {
	mu     sync.Mutex
	events []event
}

func (l *eventLog) record(_ *corev1.Pod, container, eventtype, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event{container, eventtype, reason, message})
}

func (l *eventLog) get() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.events...)
}

// TestProbeEvents checks the results and events of one probe as the
// worker sees them: failures are results, errors are retried and thrown
// away, warnings are successes.
func TestProbeEvents(t *testing.T) {
	warnSrv := newRedirectServer(t)
	tests := []struct {
		name      string
		probeType ProbeType
		probe     corev1.ProbeHandler
		exec      ExecFunc
		want      Result
		wantErr   bool
		wantCalls int
		wantEvent *event
	}{{
		name: "success", probeType: Liveness,
		probe: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		exec:  fakeExitCode(0, ""), want: Success, wantCalls: 1,
	}, {
		name: "failure", probeType: Liveness,
		probe: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
		exec:  fakeExitCode(1, "boom"), want: Failure, wantCalls: 1,
		wantEvent: &event{"app", "Warning", "Unhealthy", "Liveness probe failed: boom"},
	}, {
		name: "error retried", probeType: Readiness,
		probe: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"x"}}},
		exec: func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
			return nil, 0, errors.New("task gone")
		},
		want: Failure, wantErr: true, wantCalls: maxProbeRetries,
		wantEvent: &event{"app", "Warning", "Unhealthy", "Readiness probe errored and resulted in unknown state: exec in container c1: task gone"},
	}, {
		name: "warning", probeType: Startup,
		probe: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(warnSrv)}},
		want:  Success,
		wantEvent: &event{"app", "Warning", "ProbeWarning",
			"Startup probe warning: Probe terminated redirects, Response body: "},
	}, {
		name: "no handler", probeType: Readiness, want: Failure, wantErr: true,
		wantEvent: &event{"app", "Warning", "Unhealthy", "Readiness probe errored and resulted in unknown state: missing probe handler for web_ns(uid-1):app"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log eventLog
			calls := 0
			h := testHandlers()
			h.record = log.record
			if tt.exec != nil {
				h.exec = func(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
					calls++
					return tt.exec(ctx, id, cmd, timeout)
				}
			}
			pod := testPod()
			tg := target{pod: pod, container: &pod.Spec.Containers[0], containerID: "c1", podIP: "127.0.0.1"}
			got, _, err := h.probe(context.Background(), tt.probeType, withDefaults(&corev1.Probe{ProbeHandler: tt.probe}), tg)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
			if tt.wantCalls != 0 && calls != tt.wantCalls {
				t.Errorf("%d exec calls, want %d", calls, tt.wantCalls)
			}
			events := log.get()
			switch {
			case tt.wantEvent == nil && len(events) != 0:
				t.Errorf("events %v, want none", events)
			case tt.wantEvent != nil && (len(events) != 1 || !strings.HasPrefix(events[0].message, tt.wantEvent.message) ||
				events[0].reason != tt.wantEvent.reason || events[0].eventtype != tt.wantEvent.eventtype ||
				events[0].container != tt.wantEvent.container):
				t.Errorf("events %v, want %v", events, *tt.wantEvent)
			}
		})
	}
}

// TestProbeStoppedIsQuiet: a probe whose worker is stopped records
// nothing and is thrown away.
func TestProbeStoppedIsQuiet(t *testing.T) {
	var log eventLog
	h := testHandlers()
	h.record = log.record
	ctx, cancel := context.WithCancel(context.Background())
	h.exec = func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		cancel()
		return nil, 0, context.Canceled
	}
	pod := testPod()
	tg := target{pod: pod, container: &pod.Spec.Containers[0], containerID: "c1"}
	p := withDefaults(&corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"x"}}}})
	if _, _, err := h.probe(ctx, Liveness, p, tg); err == nil {
		t.Error("a stopped probe returned no error")
	}
	if ev := log.get(); len(ev) != 0 {
		t.Errorf("events %v", ev)
	}
}

func fakeExitCode(code int, output string) ExecFunc {
	return func(context.Context, string, []string, time.Duration) ([]byte, int, error) {
		return []byte(output), code, nil
	}
}
