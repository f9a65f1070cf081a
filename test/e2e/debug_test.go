package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestDebugCommandsOnRealNode drives kubectl logs, exec, cp, attach and
// port-forward through the API server to a real node's HTTPS API, and
// checks that the node's API refuses callers without the right
// certificate.
func TestDebugCommandsOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-debug")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.must("apply", "-f", "testdata/debug-pods.yaml")
	cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	cp.must("wait", "--for=condition=Ready", "pod/box", "--timeout=120s")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=120s")

	t.Run("logs", func(t *testing.T) { testLogs(t, cp) })
	t.Run("logs -f", func(t *testing.T) { testLogsFollow(t, cp) })
	t.Run("logs --previous", func(t *testing.T) { testLogsPrevious(t, cp) })
	t.Run("exec", func(t *testing.T) { testExec(t, cp) })
	t.Run("cp", func(t *testing.T) { testCopy(t, cp) })
	t.Run("attach", func(t *testing.T) { testAttach(t, cp) })
	t.Run("attach -i", func(t *testing.T) { testAttachStdin(t, cp) })
	t.Run("run -it --rm", func(t *testing.T) { testRunInteractive(t, cp) })
	t.Run("port-forward", func(t *testing.T) { testPortForward(t, cp) })
	t.Run("top", func(t *testing.T) { testTop(t, cp, node) })
	t.Run("errors", func(t *testing.T) { testDebugErrors(t, cp) })
	t.Run("node API auth", func(t *testing.T) { testNodeAPIAuth(t, cp, node) })
	t.Run("nodes/proxy", func(t *testing.T) { testNodeProxy(t, cp, node) })
	t.Run("SPDY", func(t *testing.T) { testSPDY(t, cp) })
	t.Run("resize", func(t *testing.T) { testResize(t, cp) })
	t.Run("node down", func(t *testing.T) { testNodeDown(t, cp, node) })

	cp.must("delete", "-f", "testdata/debug-pods.yaml", "--wait=false")
	cp.must("delete", "-f", "testdata/nginx-deployment.yaml")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// waitNoLeftovers waits up to a minute for the node to hold nothing of
// deleted pods.
func waitNoLeftovers(t testing.TB, node *realNode) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(60 * time.Second)
	for left = node.leftovers(t); len(left) > 0 && time.Now().Before(deadline); left = node.leftovers(t) {
		time.Sleep(500 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("the node kept after the delete:\n%s", strings.Join(left, "\n"))
	}
}

func testLogs(t *testing.T, cp *controlPlane) {
	if out := cp.must("logs", "box", "-c", "main"); !strings.HasPrefix(out, "started\ntick 0\n") {
		t.Fatalf("logs box -c main:\n%.300s", out)
	}
	if out := cp.must("logs", "box", "-c", "main", "--tail=2"); strings.Count(out, "\n") != 2 || !strings.HasPrefix(out, "tick ") {
		t.Fatalf("logs --tail=2: %q", out)
	}
	out := cp.must("logs", "box", "-c", "main", "--timestamps", "--tail=1")
	ts, _, _ := strings.Cut(out, " ")
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Fatalf("logs --timestamps: %q: %v", out, err)
	}
	if out := cp.must("logs", "box", "-c", "main", "--since=1h", "--limit-bytes=7"); out != "started" {
		t.Fatalf("logs --since=1h --limit-bytes=7: %q", out)
	}
	if out := cp.must("logs", "box", "--all-containers"); !strings.Contains(out, "started") || !strings.Contains(out, "side-hello") {
		t.Fatalf("logs --all-containers:\n%.300s", out)
	}
	// A request through the Deployment: nginx logs each GET to stdout.
	cp.must("logs", "deployment/nginx-deployment")
}

// testLogsFollow writes a marker into the container's stdout through exec
// and expects the follower to see it within a second.
func testLogsFollow(t *testing.T, cp *controlPlane) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "logs", "-f", "box", "-c", "main", "--tail=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case <-lines: // following
	case <-time.After(10 * time.Second):
		t.Fatal("logs -f printed nothing within 10s")
	}
	marker := "mark-" + randomSuffix()
	cp.must("exec", "box", "-c", "main", "--", "sh", "-c", "echo "+marker+" > /proc/1/fd/1")
	deadline := time.After(time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("logs -f ended")
			}
			if l == marker {
				return
			}
		case <-deadline:
			t.Fatalf("logs -f did not show %s within 1s of its write", marker)
		}
	}
}

// testLogsPrevious waits for the crasher's first restart and reads the
// previous instance's output.
func testLogsPrevious(t *testing.T, cp *controlPlane) {
	testkit.Eventually(t, 60*time.Second, "crasher restarted", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "crasher", "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
		return out != "" && out != "0"
	})
	prev := cp.must("logs", "crasher", "--previous")
	if !strings.HasPrefix(prev, "run-at ") {
		t.Fatalf("logs --previous: %q", prev)
	}
	if cur, _, err := cp.kubectl("logs", "crasher"); err == nil && cur == prev {
		t.Fatalf("logs and logs --previous show the same instance: %q", cur)
	}
}

func testExec(t *testing.T, cp *controlPlane) {
	if out := cp.must("exec", "box", "-c", "main", "--", "echo", "hello"); out != "hello\n" {
		t.Fatalf("exec echo: %q", out)
	}
	_, _, err := cp.kubectl("exec", "box", "-c", "main", "--", "sh", "-c", "exit 7")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("exec exit 7: want kubectl to exit 7, got %v", err)
	}
	in := "piped through stdin " + randomSuffix() + "\n"
	if out, errOut, err := cp.kubectlStdin(in, "exec", "-i", "box", "-c", "main", "--", "cat"); err != nil || out != in {
		t.Fatalf("exec -i cat: %q, %v, %s", out, err, errOut)
	}
	// A terminal: script(1) gives kubectl a pty, as a user's shell would.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	line := fmt.Sprintf("KUBECACHEDIR=%s kubectl --kubeconfig %s exec -it box -c main -- sh -c 'tty; stty size; exit 0'",
		filepath.Join(cp.dataDir, "kubectl-cache"), cp.kubeconfig)
	out, err := hosttools.CommandContext(ctx, "script", "-qec", line, "/dev/null").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/dev/pts/") {
		t.Fatalf("exec -it tty: %v\n%s", err, out)
	}
}

func testCopy(t *testing.T, cp *controlPlane) {
	dir := t.TempDir()
	content := make([]byte, 256<<10)
	rand.Read(content)
	src := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	cp.must("cp", src, "box:/tmp/in.bin", "-c", "main")
	sum := cp.must("exec", "box", "-c", "main", "--", "md5sum", "/tmp/in.bin")
	back := filepath.Join(dir, "back.bin")
	cp.must("cp", "box:/tmp/in.bin", back, "-c", "main")
	got, err := os.ReadFile(back)
	if err != nil || string(got) != string(content) {
		t.Fatalf("kubectl cp round trip: %d bytes back of %d (%v); in the pod: %s", len(got), len(content), err, sum)
	}
}

func testAttach(t *testing.T, cp *controlPlane) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "attach", "box", "-c", "main")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tick ") {
			return
		}
	}
	t.Fatalf("attach saw no new output (%v)", sc.Err())
}

func testPortForward(t *testing.T, cp *controlPlane) {
	cp.must("expose", "deployment/nginx-deployment", "--port=80", "--name=nginx")
	for _, target := range []string{"pod/" + nginxPods(t, cp, 3)[0].Name, "deployment/nginx-deployment", "service/nginx"} {
		p1, p2 := freePort(t), freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "port-forward", target,
			fmt.Sprintf("%d:80", p1), fmt.Sprintf("%d:80", p2))
		var logs lockedBuffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for _, port := range []int{p1, p2} {
			var body string
			testkit.Eventually(t, 20*time.Second, fmt.Sprintf("nginx through port-forward %s on %d", target, port), func() bool {
				body, _ = getLocal(fmt.Sprintf("http://127.0.0.1:%d/", port))
				return strings.Contains(body, "Welcome to nginx!")
			})
		}
		cancel()
		cmd.Wait()
	}
	if out := cp.must("logs", "deployment/nginx-deployment"); !strings.Contains(out, "GET / HTTP") {
		t.Fatalf("nginx did not log the forwarded GETs:\n%.500s", out)
	}
}

func getLocal(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// testDebugErrors: clear errors, quickly, never a hang.
func testDebugErrors(t *testing.T, cp *controlPlane) {
	testkit.Eventually(t, 60*time.Second, "pod done Succeeded", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "done", "-o", "jsonpath={.status.phase}")
		return out == "Succeeded"
	})
	// kubectl refuses a completed pod itself; the API and the node must
	// refuse a stopped container too.
	cfg := cp.restConfig()
	u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/default/pods/done/exec?command=true&stdout=true&container=main")
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("exec into a stopped container: want a 'not running' error, got %v", err)
	}
	if out := cp.must("logs", "done"); out != "done\n" {
		t.Errorf("logs of a completed pod: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "box", "-c", "nope"}, "is not valid for pod box"},
		{[]string{"get", "--raw", "/api/v1/namespaces/default/pods/box/log"}, "a container name must be specified for pod box"},
		{[]string{"get", "--raw", "/api/v1/namespaces/default/pods/box/log?container=main&tailLines=-5"}, "tailLines"},
		{[]string{"get", "--raw", "/api/v1/nodes/node-debug:22/proxy/pods"}, "only the node's own API"},
		{[]string{"logs", "unschedulable"}, "does not have a host assigned"},
		{[]string{"exec", "unschedulable", "--", "true"}, "does not have a host assigned"},
		{[]string{"logs", "no-such-pod"}, "not found"},
		{[]string{"exec", "done", "--", "true"}, "completed pod"},
	} {
		start := time.Now()
		out, errOut, err := cp.kubectl(tc.args...)
		if err == nil && tc.want != "" {
			t.Errorf("kubectl %s succeeded: %s", strings.Join(tc.args, " "), out)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("kubectl %s: want %q in the error, got %s", strings.Join(tc.args, " "), tc.want, errOut)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("kubectl %s took %s", strings.Join(tc.args, " "), d)
		}
	}
}

// testNodeProxy reads the node's API through the API server's nodes/proxy.
func testNodeProxy(t *testing.T, cp *controlPlane, node *realNode) {
	if out := cp.must("get", "--raw", "/api/v1/nodes/"+node.name+"/proxy/healthz"); out != "ok" {
		t.Errorf("nodes/proxy/healthz: %q", out)
	}
	var pods corev1.PodList
	if err := json.Unmarshal([]byte(cp.must("get", "--raw", "/api/v1/nodes/"+node.name+"/proxy/pods")), &pods); err != nil || len(pods.Items) == 0 {
		t.Errorf("nodes/proxy/pods: %d pods, %v", len(pods.Items), err)
	}
	var sum statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(cp.must("get", "--raw", "/api/v1/nodes/"+node.name+"/proxy/stats/summary")), &sum); err != nil || sum.Node.NodeName != node.name || len(sum.Pods) == 0 {
		t.Errorf("nodes/proxy/stats/summary: node %q, %d pods, %v", sum.Node.NodeName, len(sum.Pods), err)
	}
	if out := cp.must("get", "--raw", "/api/v1/nodes/"+node.name+"/proxy/metrics/resource"); !strings.Contains(out, "node_cpu_usage_seconds_total") {
		t.Errorf("nodes/proxy/metrics/resource:\n%.500s", out)
	}
}

// testNodeAPIAuth calls the nodelet's API directly: a caller without
// credentials gets 401 (/healthz too, as upstream kubelet's secure port
// without anonymous access), one with a certificate of the cluster CA for
// an ordinary user 403.
func testNodeAPIAuth(t *testing.T, cp *controlPlane, node *realNode) {
	base := fmt.Sprintf("https://%s:10250", node.ip)
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for path, want := range map[string]int{"/healthz": 401, "/pods": 401, "/containerLogs/default/box/main": 401, "/stats/summary": 401} {
		resp, err := anon.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a certificate: %d, want %d", path, resp.StatusCode, want)
		}
	}
	kc, err := exec.Command(filepath.Join(binDir, "controlplane"), "kubeconfig", "--data-dir", cp.dataDir, "--user", "bob").Output()
	if err != nil {
		t.Fatal(err)
	}
	kcFile := filepath.Join(t.TempDir(), "bob.kubeconfig")
	os.WriteFile(kcFile, kc, 0o600)
	bob := clientFromKubeconfig(t, kcFile)
	resp, err := bob.Get(base + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /pods as bob: %d, want 403", resp.StatusCode)
	}
}

func clientFromKubeconfig(t *testing.T, path string) *http.Client {
	t.Helper()
	cfg := (&controlPlane{t: t, kubeconfig: path}).restConfig()
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
}

// testSPDY runs exec and port-forward with kubectl's WebSocket protocols
// turned off: the SPDY path through the API server must work as well.
func testSPDY(t *testing.T, cp *controlPlane) {
	env := []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}
	run := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := hosttools.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		return string(out), err
	}
	if out, err := run("over spdy\n", "exec", "-i", "box", "-c", "main", "--", "cat"); err != nil || out != "over spdy\n" {
		t.Fatalf("exec -i over SPDY: %q %v", out, err)
	}
	if _, err := run("", "exec", "box", "-c", "main", "--", "sh", "-c", "exit 7"); err == nil || err.(*exec.ExitError).ExitCode() != 7 {
		t.Fatalf("exec exit 7 over SPDY: %v", err)
	}
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "port-forward", "deployment/nginx-deployment", fmt.Sprintf("%d:80", port))
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	testkit.Eventually(t, 20*time.Second, "nginx through port-forward over SPDY", func() bool {
		body, _ := getLocal(fmt.Sprintf("http://127.0.0.1:%d/", port))
		return strings.Contains(body, "Welcome to nginx!")
	})
}

// testNodeDown stops the nodelet: logs and exec fail at once with a clear
// error; started again, the node serves them again.
func testNodeDown(t *testing.T, cp *controlPlane, node *realNode) {
	node.stop()
	for _, args := range [][]string{{"logs", "box", "-c", "main"}, {"exec", "box", "-c", "main", "--", "true"}} {
		start := time.Now()
		_, errOut, err := cp.kubectl(args...)
		if err == nil || !strings.Contains(errOut, "connection refused") {
			t.Errorf("kubectl %s with the nodelet down: %v: %s", strings.Join(args, " "), err, errOut)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("kubectl %s with the nodelet down took %s", strings.Join(args, " "), d)
		}
	}
	node.start()
	testkit.Eventually(t, 30*time.Second, "logs after the nodelet's restart", func() bool {
		out, _, err := cp.kubectl("logs", "box", "-c", "main", "--tail=1")
		return err == nil && strings.HasPrefix(out, "tick ")
	})
	// The nodelet held the interactive container's stdin: cat saw its end
	// and, restarted, is attachable again (the restarted nodelet took the
	// pipes back).
	var err error
	testkit.Eventually(t, 60*time.Second, "attach -i after the nodelet's restart", func() bool {
		_, err = attachEcho(cp, 10*time.Second)
		return err == nil
	})
}

// testTop waits for two samples of the node's stats, then expects kubectl
// top to list the node and the pods with non-zero usage.
func testTop(t *testing.T, cp *controlPlane, node *realNode) {
	var out string
	testkit.Eventually(t, 60*time.Second, "kubectl top nodes", func() bool {
		out, _, _ = cp.kubectl("top", "nodes", "--no-headers")
		f := strings.Fields(out)
		return len(f) >= 5 && f[0] == node.name && f[1] != "0m" && f[3] != "0Mi"
	})
	testkit.Eventually(t, 60*time.Second, "kubectl top pods", func() bool {
		out, _, _ = cp.kubectl("top", "pods", "--no-headers", "--containers", "-l", "app=box")
		// box main 1m 0Mi / box side ...: the busy loop uses CPU.
		return strings.Contains(out, "box") && strings.Contains(out, "main") && strings.Contains(out, "side")
	})
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		// main's busy loop uses CPU; side only sleeps.
		if f := strings.Fields(l); len(f) != 4 || f[1] == "main" && f[2] == "0m" {
			t.Errorf("kubectl top pods --containers: %q", l)
		}
	}
	all := cp.must("top", "pods", "-A", "--no-headers")
	if !strings.Contains(all, "nginx-deployment-") {
		t.Errorf("kubectl top pods -A lists no nginx pod:\n%s", all)
	}
}

// testAttachStdin attaches to a container with stdin open: what is typed
// reaches cat, whose echo comes back and is in the log.
func testAttachStdin(t *testing.T, cp *controlPlane) {
	cp.must("wait", "--for=condition=Ready", "pod/catter", "--timeout=60s")
	marker, err := attachEcho(cp, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out := cp.must("logs", "catter"); !strings.Contains(out, marker) {
		t.Errorf("the echoed input is not in the log:\n%s", out)
	}
}

// attachEcho types into kubectl attach -i catter until cat echoes it.
func attachEcho(cp *controlPlane, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "attach", "-i", "catter")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var errOut lockedBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		return "", err
	}
	defer func() { cancel(); cmd.Wait() }()
	marker := "typed-" + randomSuffix()
	go func() {
		// Keep typing until the echo comes back: the session may not be
		// connected yet when the first line is written.
		for ctx.Err() == nil {
			io.WriteString(stdin, marker+"\n")
			time.Sleep(300 * time.Millisecond)
		}
	}()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == marker {
			return marker, nil
		}
	}
	return "", fmt.Errorf("attach -i: cat did not echo the input (%v): %s", sc.Err(), errOut.tail(20))
}

// testRunInteractive runs throwaway pods as users do: with stdin piped,
// and with a terminal.
func testRunInteractive(t *testing.T, cp *controlPlane) {
	out, errOut, err := cp.kubectlStdin("hello from stdin\n", "run", "-i", "--rm", "--restart=Never", "runner",
		"--image=busybox:1.36", "--", "sh", "-c", "read x; echo got: $x")
	if err != nil || !strings.Contains(out, "got: hello from stdin") {
		t.Fatalf("kubectl run -i --rm: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	line := fmt.Sprintf("KUBECACHEDIR=%s kubectl --kubeconfig %s run -it --rm --restart=Never tty-runner --image=busybox:1.36 -- sh -c 'sleep 1; tty; echo tty-done'",
		filepath.Join(cp.dataDir, "kubectl-cache"), cp.kubeconfig)
	b, err := hosttools.CommandContext(ctx, "script", "-qec", line, "/dev/null").CombinedOutput()
	if err != nil || !strings.Contains(string(b), "tty-done") || !strings.Contains(string(b), "/dev/pts/") {
		t.Fatalf("kubectl run -it --rm: %v\n%s", err, b)
	}
	testkit.Eventually(t, 60*time.Second, "the run pods deleted", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "runner", "tty-runner", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
}

// sizeQueue hands out one terminal size, then waits for the end.
type sizeQueue struct {
	sizes chan remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	sz, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &sz
}

// testResize resizes an exec session's terminal through the API server,
// over WebSocket (translated to SPDY) and over SPDY, as client-go does.
func testResize(t *testing.T, cp *controlPlane) {
	cfg := cp.restConfig()
	u := cfg.Host + "/api/v1/namespaces/default/pods/box/exec?container=main&stdin=true&stdout=true&tty=true" +
		"&command=sh&command=-c&command=" + url.QueryEscape("sleep 1; stty size")
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u)
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", pu)
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"websocket": ws, "spdy": spdy} {
		q := sizeQueue{sizes: make(chan remotecommand.TerminalSize, 1)}
		q.sizes <- remotecommand.TerminalSize{Width: 123, Height: 45}
		var out lockedBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		stdin, stdinW := io.Pipe()
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Tty: true, TerminalSizeQueue: q})
		cancel()
		stdinW.Close()
		close(q.sizes)
		if err != nil || !strings.Contains(out.tail(5), "45 123") {
			t.Errorf("%s: resized exec: %v, output %q", name, err, out.tail(5))
		}
	}
}
