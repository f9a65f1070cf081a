package podlifecycle

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/gc"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

func TestContainerGCCrashLoop(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
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
		gc := &gc.Containers{Policy: runtime.DefaultGCPolicy, List: n.rt.PodStatuses,
			RemoveContainer: n.rt.RemoveContainer, RemoveSandbox: n.rt.RemoveSandbox,
			IsPodLive: func(types.UID) bool { return true }, Now: time.Now,
			Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
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
			if err := gc.Collect(ctx); err != nil {
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
