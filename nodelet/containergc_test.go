package nodelet

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// A crash-looping container restarted by the real Syncer on a real
// containerd (back-off 1 s, 2 s, 4 s, ...): with the collector running
// between syncs, containerd keeps the current instance and at most one
// dead one, the log directory only their files, and restartCount keeps
// counting.
func TestContainerGCCrashLoop(t *testing.T) {
	inNodeNetns(t, func(t *testing.T, base string) {
		n := newNode(t, base)
		ctx := context.Background()
		pod := busyboxPod()
		pod.Spec.InitContainers = nil
		pod.Spec.Containers[0].Command = []string{"sh", "-c", "echo crash; exit 1"}
		t.Cleanup(func() {
			_ = n.syncer.SyncTerminatingPod(ctx, pod, 0)
			if err := n.syncer.SyncTerminatedPod(ctx, pod); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
		gc := &containerGC{policy: runtime.DefaultGCPolicy, list: n.rt.PodStatuses,
			removeContainer: n.rt.RemoveContainer, removeSandbox: n.rt.RemoveSandbox,
			isPodLive: func(types.UID) bool { return true }, now: time.Now,
			log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
		logDir := filepath.Join(n.syncer.podLogDir(pod), "app")

		var restarts int32
		deadline := time.Now().Add(90 * time.Second)
		for restarts < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("restartCount %d after 90s; last status %+v", restarts, n.status.last())
			}
			if _, err := n.syncer.SyncPod(ctx, pod); err != nil {
				t.Logf("SyncPod: %v", err)
			}
			if err := gc.collect(ctx); err != nil {
				t.Fatalf("collect: %v", err)
			}
			rc := appRestartCount(n.status.last())
			if rc < restarts {
				t.Fatalf("restartCount went down from %d to %d", restarts, rc)
			}
			restarts = rc
			assertCollected(t, n, pod, logDir)
			time.Sleep(300 * time.Millisecond)
		}
		rs, err := n.syncer.podStatus(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if latest := rs.LatestContainer("app"); latest == nil || latest.Attempt < 4 {
			t.Errorf("latest instance %+v: attempt < 4", latest)
		}
		if _, err := os.Stat(filepath.Join(logDir, "0.log")); !os.IsNotExist(err) {
			t.Errorf("the first attempt's log is still there: %v", err)
		}
		// The kept dead instance still gives the last state.
		for _, cs := range n.status.last().ContainerStatuses {
			last := cs.LastTerminationState.Terminated
			if cs.State.Terminated != nil {
				last = cs.State.Terminated
			}
			if last == nil || last.ExitCode != 1 {
				t.Errorf("app status %+v: no last termination with exit code 1", cs)
			}
		}
		if len(rs.Sandboxes) != 1 {
			t.Errorf("%d sandboxes, want 1", len(rs.Sandboxes))
		}
	})
}

func appRestartCount(st corev1.PodStatus) int32 {
	for _, cs := range st.ContainerStatuses {
		if cs.Name == "app" {
			return cs.RestartCount
		}
	}
	return 0
}

// assertCollected checks that the pod holds the latest instance of app
// and at most one older dead one, and that every log file belongs to one
// of them.
func assertCollected(t *testing.T, n *node, pod *corev1.Pod, logDir string) {
	t.Helper()
	rs, err := n.syncer.podStatus(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	var attempts []string
	for _, cs := range rs.Containers {
		if cs.Name == "app" {
			attempts = append(attempts, strconv.Itoa(int(cs.Attempt))+".log")
		}
	}
	if len(attempts) > 2 {
		t.Fatalf("%d instances of app after collection (attempts %v)", len(attempts), attempts)
	}
	entries, err := os.ReadDir(logDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(attempts, e.Name()) {
			t.Errorf("log file %s of a removed instance (instances: %v)", e.Name(), attempts)
		}
	}
}

// The executor removes what the plan names, with the log files (rotated
// ones too), and goes on past a failure, whose error names the object.
func TestContainerGCCollect(t *testing.T) {
	dir := t.TempDir()
	logOf := func(attempt string) string { return filepath.Join(dir, attempt+".log") }
	for _, f := range []string{"0.log", "0.log.1", "1.log", "2.log"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	inst := func(id string, attempt uint32, st runtime.State) runtime.ContainerStatus {
		return runtime.ContainerStatus{ID: id, Name: "app", Attempt: attempt, State: st, SandboxID: "sb",
			CreatedAt: now.Add(-time.Duration(10-attempt) * time.Minute), LogPath: logOf(strconv.Itoa(int(attempt)))}
	}
	pods := []runtime.PodStatus{{UID: "u", Namespace: "ns", Name: "p",
		Sandboxes:  []runtime.SandboxStatus{{ID: "sb", State: runtime.StateRunning}},
		Containers: []runtime.ContainerStatus{inst("c2", 2, runtime.StateRunning), inst("c1", 1, runtime.StateExited), inst("c0", 0, runtime.StateExited)}}}
	var removed []string
	gc := &containerGC{policy: runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1},
		list: func(context.Context) ([]runtime.PodStatus, error) { return pods, nil },
		removeContainer: func(_ context.Context, id string) error {
			removed = append(removed, id)
			return nil
		},
		removeSandbox: func(context.Context, string) error { t.Error("sandbox removed"); return nil },
		isPodLive:     func(types.UID) bool { return true }, now: time.Now, log: slog.New(slog.DiscardHandler)}
	if err := gc.collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"c0"}) {
		t.Errorf("removed %v, want [c0] (c1 is the latest exited)", removed)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if !slices.Equal(left, []string{"1.log", "2.log"}) {
		t.Errorf("log files left %v", left)
	}

	gc.removeContainer = func(context.Context, string) error { return os.ErrPermission }
	err := gc.collect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "remove container c0 (app) of pod ns/p") {
		t.Errorf("error %v does not name the container", err)
	}
}
