package gc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/images"
)

// BenchmarkGCIdle measures what the container and image garbage
// collection cost on an idle node with nothing to collect: a real
// containerd holding 30 pods (a sandbox and two containers each, their
// latest instances, which GC keeps) and three images. It reports the CPU
// per pass of this process and of containerd, and the share of one core
// at upstream's intervals (container GC every minute, image GC every 5
// minutes).
func BenchmarkGCIdle(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	addr := runtimetest.StartContainerd(b)
	rt, err := containerd.New(ctx, containerd.Config{Address: addr, LogRoot: filepath.Join(dir, "pods"), StateDir: filepath.Join(dir, "state")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	runtimetest.ImportTestImages(b, rt, dir, true)
	makeIdlePods(b, addr, 30)
	if pods, err := rt.PodStatuses(ctx); err != nil || len(pods) != 30 || len(pods[0].Containers) != 2 || len(pods[0].Sandboxes) != 1 {
		b.Fatalf("the runtime sees %d pods (%v), want 30 with a sandbox and 2 containers each", len(pods), err)
	}
	ctdPID := containerdPID(b, addr)
	discard := slog.New(slog.DiscardHandler)
	cgc := &Containers{Policy: runtime.DefaultGCPolicy, List: rt.PodStatuses,
		RemoveContainer: func(context.Context, string) error { b.Fatal("container GC removed a container"); return nil },
		RemoveSandbox:   func(context.Context, string) error { b.Fatal("container GC removed a sandbox"); return nil },
		IsPodLive:       func(types.UID) bool { return true }, Now: time.Now, Log: discard}
	igc := &Images{Policy: runtime.DefaultImageGCPolicy,
		Usage: func(context.Context) (runtime.FSUsage, error) { return StatfsUsage(dir) },
		List:  rt.ListImages, InUse: rt.ImagesInUse, Remove: rt.RemoveImage,
		Pinned: func(n string) bool { return n == images.PauseRef }, Now: time.Now, Log: discard,
	}

	measure := func(name string, pass func(context.Context) error, interval time.Duration) {
		selfBefore, ctdBefore := selfCPU(), procCPU(b, ctdPID)
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if err := pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
		wall := time.Since(start) / time.Duration(b.N)
		self := (selfCPU() - selfBefore) / time.Duration(b.N)
		ctd := (procCPU(b, ctdPID) - ctdBefore) / time.Duration(b.N)
		b.ReportMetric(float64(wall.Microseconds())/1000, name+"-wall-ms/pass")
		b.ReportMetric(float64(self.Microseconds())/1000, name+"-nodelet-cpu-ms/pass")
		b.ReportMetric(float64(ctd.Microseconds())/1000, name+"-containerd-cpu-ms/pass")
		b.ReportMetric(100*float64(self+ctd)/float64(interval), name+"-%core")
	}
	b.ResetTimer()
	measure("containergc", cgc.Collect, time.Minute)
	measure("imagegc", igc.Collect, 5*time.Minute)
}

// makeIdlePods creates n pods' sandboxes and containers (no tasks: exited
// instances, labelled as the runtime labels them).
func makeIdlePods(b *testing.B, addr string, n int) {
	create := runtimetest.ContainerRecords(b, addr, containerd.DefaultNamespace)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range n {
		uid := fmt.Sprintf("uid-%d", i)
		base := map[string]string{runtime.LabelPodUID: uid, runtime.LabelPodName: fmt.Sprintf("pod-%d", i),
			runtime.LabelPodNamespace: "default", runtime.LabelAttempt: "0"}
		with := func(extra map[string]string) map[string]string {
			l := map[string]string{}
			for k, v := range base {
				l[k] = v
			}
			for k, v := range extra {
				l[k] = v
			}
			return l
		}
		sb := "sb-" + uid
		create(sb, images.PauseRef, with(map[string]string{runtime.LabelKind: "sandbox"}))
		for _, name := range []string{"app", "sidecar"} {
			create(name+"-"+uid, images.BusyboxRef, with(map[string]string{runtime.LabelKind: "container",
				runtime.LabelContainer: name, runtime.LabelSandboxID: sb, runtime.LabelExitCode: "0",
				runtime.LabelFinishedAt: now, runtime.LabelStartedAt: now}))
		}
	}
}

// containerdPID finds the containerd serving addr.
func containerdPID(b *testing.B, addr string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if filepath.Base(args[0]) == "containerd" && bytes.Contains(cmdline, []byte(addr)) {
			return pid
		}
	}
	b.Fatalf("no containerd process for %s", addr)
	return 0
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a process's user plus system time.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}
