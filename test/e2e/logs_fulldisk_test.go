package e2e

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestContainerLogsFullDisk fills the node's pod log filesystem (a 2 MiB
// tmpfs at --pod-log-dir) under a container that logs without pause: the
// container keeps running and making progress (the logger drains its
// pipes and drops what it cannot write), the drop is counted in
// nodelet_container_log_dropped_bytes_total and told by a
// ContainerLogDropped event on the pod, and once the filler is removed new
// lines reach kubectl logs again, the file still whole CRI entries.
func TestContainerLogsFullDisk(t *testing.T) {
	testkit.RequireRoot(t, "the test mounts a tmpfs as the node's pod log directory")
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	logDir := mountSmallTmpfs(t, "2m")
	node := startRealNode(t, cp, "node-fulldisk", "--pod-log-dir", logDir)
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	// A numbered line of 100 bytes every 10 ms (10 kB/s: a blocked pipe of
	// 64 KiB shows within seconds), the number also in /tmp/count.
	runPod(t, cp, "chatty", `i=0; pad=$(printf '%080d' 0); while true; do i=$((i+1)); echo "tick $i $pad"; echo $i > /tmp/count; sleep 0.01; done`)
	testkit.Eventually(t, 20*time.Second, "ticks in kubectl logs", func() bool { return lastTickOf(cp, "chatty") > 10 })

	filler := filepath.Join(logDir, "filler")
	fillUp(t, filler)
	atFill := podCount(t, cp, "chatty")
	metrics := "/api/v1/nodes/" + node.name + "/proxy/metrics"
	testkit.Eventually(t, 60*time.Second, "dropped bytes counted", func() bool {
		out, _, err := cp.kubectl("get", "--raw", metrics)
		return err == nil && sample(out, "nodelet_container_log_dropped_bytes_total") > 0
	})
	testkit.Eventually(t, 30*time.Second, "a ContainerLogDropped event on the pod", func() bool {
		out, _, _ := cp.kubectl("get", "events", "--field-selector", "reason=ContainerLogDropped,involvedObject.name=chatty",
			"-o", "jsonpath={.items[*].type}")
		return strings.Contains(out, "Warning")
	})
	// Still full: the container runs and counts on, well past what its
	// output's buffers hold (3,000 lines are 300 kB; the pipe into the
	// shim, the shim's copy buffer and the FIFO hold 160 KiB).
	testkit.Eventually(t, 120*time.Second, "the container wrote more than its pipes hold since the fill", func() bool {
		return podCount(t, cp, "chatty") > atFill+3000
	})
	before := podCount(t, cp, "chatty")
	time.Sleep(3 * time.Second)
	if after := podCount(t, cp, "chatty"); after <= before+50 {
		t.Fatalf("the container counted from %d to %d in 3s with its log filesystem full: blocked on its log", before, after)
	}
	if out := cp.must("get", "pod", "chatty", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); out != "0" {
		t.Fatalf("restartCount %s with the log filesystem full", out)
	}
	stale := lastTickOf(cp, "chatty")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "new lines in kubectl logs once space returned", func() bool {
		return lastTickOf(cp, "chatty") > before+100
	})
	if out := cp.must("get", "pod", "chatty", "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); out != "0" {
		t.Errorf("restartCount %s after the log filesystem was freed", out)
	}
	if out := cp.must("logs", "chatty"); !strings.HasPrefix(out, "tick 1 ") {
		t.Errorf("kubectl logs after the drop: %.200q", out)
	}
	checkCRIFile(t, filepath.Join(logDir, "default_chatty_"+cp.must("get", "pod", "chatty", "-o", "jsonpath={.metadata.uid}"), "chatty", "0.log"))
	t.Logf("last tick logged while full %d, counted meanwhile %d, logged after %d", stale, before, lastTickOf(cp, "chatty"))

	cp.must("delete", "pods", "--all", "--grace-period=0", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
	testkit.Eventually(t, 30*time.Second, "pod log directory empty", func() bool {
		entries, _ := os.ReadDir(logDir)
		return len(entries) == 0
	})
}

// mountSmallTmpfs mounts a tmpfs of size at a new directory; cleanup,
// registered before the node's (so it runs after the node, its containerd
// and its logger are gone), unmounts it and fails the test if it cannot.
func mountSmallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := unix.Unmount(dir, 0)
			if err == nil {
				return
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				unix.Unmount(dir, unix.MNT_DETACH)
				t.Errorf("unmount %s: %v (detached)", dir, err)
				return
			}
			time.Sleep(200 * time.Millisecond) // the logger ends once idle
		}
	})
	return dir
}

// fillUp writes path until the filesystem refuses more.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64*1024)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}

// lastTickOf is the number of the pod's last "tick N" line in kubectl
// logs, 0 when unknown.
func lastTickOf(cp *controlPlane, pod string) int {
	out, _, err := cp.kubectl("logs", pod, "--tail=1")
	if err != nil {
		return 0
	}
	n, _ := parseTick(out)
	return n
}

// podCount reads the pod's /tmp/count through kubectl exec (again when
// the read fell between the shell's truncation and its write).
func podCount(t *testing.T, cp *controlPlane, pod string) int {
	t.Helper()
	var out string
	for range 5 {
		out = cp.must("exec", pod, "--", "cat", "/tmp/count")
		if n, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
			return n
		}
	}
	t.Fatalf("count %q", out)
	return 0
}

// checkCRIFile fails unless every line of the log file is a CRI entry
// (timestamp, stream, tag, content) whose ticks only go up.
func checkCRIFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	last, lines, gaps := 0, 0, 0
	for sc.Scan() {
		lines++
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) != 4 || (parts[1] != "stdout" && parts[1] != "stderr") || (parts[2] != "F" && parts[2] != "P") {
			t.Fatalf("%s line %d is no CRI entry: %q", path, lines, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, parts[0]); err != nil {
			t.Fatalf("%s line %d: timestamp: %v", path, lines, err)
		}
		if parts[3] == "" { // a line cut by a drop, ended
			continue
		}
		n, err := parseTick(parts[3])
		if err != nil {
			t.Fatalf("%s line %d: %q: %v", path, lines, parts[3], err)
		}
		if n <= last {
			t.Fatalf("%s line %d: tick %d after %d", path, lines, n, last)
		}
		if n != last+1 && last != 0 {
			gaps++
		}
		last = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if gaps == 0 {
		t.Errorf("%s: no ticks missing, yet the filesystem was full", path)
	}
	t.Logf("%s: %d whole CRI entries, %d gaps of dropped ticks", path, lines, gaps)
}

// parseTick reads the N of "tick N ...".
func parseTick(s string) (int, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != "tick" {
		return 0, errors.New("not a tick")
	}
	return strconv.Atoi(f[1])
}
