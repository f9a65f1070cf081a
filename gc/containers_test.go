package gc

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

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// A crash-looping container restarted by the real Syncer on a real
// containerd (back-off 1 s, 2 s, 4 s, ...): with the collector running
// between syncs, containerd keeps the current instance and at most one
// dead one, the log directory only their files, and restartCount keeps
// counting.
// assertCollected checks that the pod holds the latest instance of app
// and at most one older dead one, and that every log file belongs to one
// of them.
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
	gc := &Containers{Policy: runtime.GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1},
		List: func(context.Context) ([]runtime.PodStatus, error) { return pods, nil },
		RemoveContainer: func(_ context.Context, id string) error {
			removed = append(removed, id)
			return nil
		},
		RemoveSandbox: func(context.Context, string) error { t.Error("sandbox removed"); return nil },
		IsPodLive:     func(types.UID) bool { return true }, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := gc.Collect(context.Background()); err != nil {
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

	gc.RemoveContainer = func(context.Context, string) error { return os.ErrPermission }
	err := gc.Collect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "remove container c0 (app) of pod ns/p") {
		t.Errorf("error %v does not name the container", err)
	}
}
