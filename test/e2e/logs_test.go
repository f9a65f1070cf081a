package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestContainerLogsOnRealNode checks the node's container logger: one
// process for the node whatever the number of containers, rotation by
// size and count with kubectl logs (and logs -f) unbroken across
// rotations, and logs that keep flowing while the nodelet is down or the
// logger itself is killed.
func TestContainerLogsOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-logs", "--container-log-max-size=4Ki", "--container-log-max-files=3")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	// ticker: a numbered line every 50 ms, forever; burst: 3,000 numbered
	// lines at once, then a marker.
	runPod(t, cp, "ticker", `i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.05; done`)
	runPod(t, cp, "burst", `i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo "burst line $i padded to be longer"; done; echo burst-done; sleep 3600`)

	t.Run("one logging process", func(t *testing.T) {
		before := nodeProcesses(t, node)
		for i := range 4 {
			runPod(t, cp, fmt.Sprintf("quiet-%d", i), "echo hello; sleep 3600")
		}
		after := nodeProcesses(t, node)
		if len(after) != len(before) || len(after) != 2 {
			t.Errorf("the node's own processes: %d with 2 pods, %d with 6 (want nodelet + logger both times):\n%s",
				len(before), len(after), strings.Join(after, "\n"))
		}
		out := cp.must("logs", "quiet-2")
		if strings.TrimSpace(out) != "hello" {
			t.Errorf("logs quiet-2: %q", out)
		}
	})
	t.Run("rotation", func(t *testing.T) { testRotation(t, cp, node) })
	t.Run("logs -f across rotations", func(t *testing.T) { testFollowAcrossRotation(t, cp) })
	t.Run("nodelet down", func(t *testing.T) { testLogsWhileNodeletDown(t, cp, node) })
	t.Run("logger killed", func(t *testing.T) { testLoggerKilled(t, cp, node) })

	cp.must("delete", "pods", "--all", "--grace-period=0", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// runPod starts a busybox pod running script and waits until it is Ready.
func runPod(t *testing.T, cp *controlPlane, name, script string) {
	t.Helper()
	cp.must("run", name, "--image=busybox:1.36", "--image-pull-policy=IfNotPresent", "--restart=Never", "--", "sh", "-c", script)
	cp.must("wait", "--for=condition=Ready", "pod/"+name, "--timeout=60s")
}

// nodeProcesses lists the node's own processes running the project's
// binaries (the nodelet, the logger, per-container helpers if there were
// any: those would name no flag).
func nodeProcesses(t *testing.T, node *realNode) []string {
	t.Helper()
	var out []string
	for _, p := range processes() {
		if filepath.Dir(p.args[0]) == binDir && (strings.Contains(p.cmdline, node.dir) || !strings.Contains(p.cmdline, "--")) {
			out = append(out, strconv.Itoa(p.pid)+" "+strings.Join(p.args, " "))
		}
	}
	return out
}

// podLogFiles lists the log files of a pod's container (current first).
func podLogFiles(t *testing.T, cp *controlPlane, node *realNode, pod string) []string {
	t.Helper()
	uid := strings.TrimSpace(cp.must("get", "pod", pod, "-o", "jsonpath={.metadata.uid}"))
	dir := filepath.Join(node.dir, "pods", fmt.Sprintf("default_%s_%s", pod, uid), pod)
	files, _ := filepath.Glob(filepath.Join(dir, "0.log*"))
	return files
}

func testRotation(t *testing.T, cp *controlPlane, node *realNode) {
	testkit.Eventually(t, 30*time.Second, "burst done", func() bool {
		out, _, _ := cp.kubectl("logs", "burst", "--tail=1")
		return strings.TrimSpace(out) == "burst-done"
	})
	files := podLogFiles(t, cp, node, "burst")
	if len(files) != 3 {
		t.Errorf("burst has %d log files, want 3 (--container-log-max-files): %v", len(files), files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > 4096 {
			t.Errorf("%s: %v, size over 4Ki", f, err)
		}
	}
	// kubectl logs shows the current file (as upstream's kubelet: not the
	// rotated ones), so --tail=5 may give fewer lines right after a
	// rotation; they are the newest, in order, ending with the marker.
	out := cp.must("logs", "burst", "--tail=5")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[len(lines)-1] != "burst-done" {
		t.Fatalf("logs --tail=5: %q, want the newest lines ending with burst-done", lines)
	}
	for i, line := range lines[:len(lines)-1] {
		want := fmt.Sprintf("burst line %d padded to be longer", 3000-(len(lines)-2-i))
		if line != want {
			t.Errorf("logs --tail=5 line %d: %q, want %q", i, line, want)
		}
	}
}

// testFollowAcrossRotation follows the ticker through several rotations:
// every number arrives once, in order.
func testFollowAcrossRotation(t *testing.T, cp *controlPlane) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "logs", "-f", "ticker", "--tail=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	// A tick line is about 46 bytes in the file: 4Ki holds about 90, so
	// 400 lines (20 s) cross four rotations.
	sc := bufio.NewScanner(stdout)
	prev, count := 0, 0
	for count < 400 && sc.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "tick "))
		if err != nil {
			t.Fatalf("unexpected line %q", sc.Text())
		}
		if prev != 0 && n != prev+1 {
			t.Fatalf("after tick %d came tick %d", prev, n)
		}
		prev = n
		count++
	}
	if count < 400 {
		t.Fatalf("logs -f ended after %d lines: %v", count, sc.Err())
	}
}

// testLogsWhileNodeletDown stops the nodelet for a while: the ticker's
// output keeps reaching its file, and after the restart kubectl logs has
// every number.
func testLogsWhileNodeletDown(t *testing.T, cp *controlPlane, node *realNode) {
	last := lastTick(t, cp)
	node.stop()
	time.Sleep(3 * time.Second)
	files := podLogFiles(t, cp, node, "ticker")
	var during string
	for _, f := range files {
		data, _ := os.ReadFile(f)
		during += string(data)
	}
	if !strings.Contains(during, fmt.Sprintf(" tick %d\n", last+40)) {
		t.Errorf("with the nodelet down for 3 s the ticker's log did not reach tick %d", last+40)
	}
	node.start()
	testkit.Eventually(t, 30*time.Second, "logs after the restart", func() bool {
		_, _, err := cp.kubectl("logs", "ticker", "--tail=1")
		return err == nil
	})
	checkTicksContinuous(t, cp)
}

// testLoggerKilled kills the logger: the nodelet starts another, which
// resumes the containers; nothing written meanwhile is lost.
func testLoggerKilled(t *testing.T, cp *controlPlane, node *realNode) {
	pid := loggerPID(t, node)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "a new logger", func() bool {
		p := loggerPIDOrZero(node)
		return p != 0 && p != pid
	})
	start := lastTick(t, cp)
	testkit.Eventually(t, 10*time.Second, "the ticker logged again", func() bool { return lastTick(t, cp) > start+10 })
	checkTicksContinuous(t, cp)
}

func loggerPIDOrZero(node *realNode) int {
	for _, p := range processes() {
		if filepath.Base(p.args[0]) == "nodelet-logger" && strings.Contains(p.cmdline, node.dir) {
			return p.pid
		}
	}
	return 0
}

func loggerPID(t *testing.T, node *realNode) int {
	t.Helper()
	pid := loggerPIDOrZero(node)
	if pid == 0 {
		t.Fatal("no container logger runs for the node")
	}
	return pid
}

func lastTick(t *testing.T, cp *controlPlane) int {
	t.Helper()
	out, _, err := cp.kubectl("logs", "ticker", "--tail=1")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(out), "tick "))
	return n
}

// checkTicksContinuous reads the ticker's current log file through
// kubectl: no number is missing or repeated.
func checkTicksContinuous(t *testing.T, cp *controlPlane) {
	t.Helper()
	out := cp.must("logs", "ticker")
	prev := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "tick "))
		if err != nil {
			t.Fatalf("unexpected line %q", line)
		}
		if prev != 0 && n != prev+1 {
			t.Fatalf("ticks not continuous: %d then %d", prev, n)
		}
		prev = n
	}
}
