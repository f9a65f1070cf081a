package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const (
	benchPodsFile = "testdata/debug-bench-pods.yaml"
	execRuns      = 30 // round trips per exec variant
	transferRuns  = 3  // transfers per logs and port-forward variant
	// The bench-logs container writes logPayload bytes of 100-byte lines,
	// then logMarker.
	logPayload   = 100 << 20
	logMarker    = "log-written\n"
	logOutput    = int64(logPayload + len(logMarker))
	bigFileBytes = 100 << 20 // served by nginx for port-forward
)

var (
	wsExec    = []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=true"} // kubectl 1.32's default, made explicit
	spdyExec  = []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}
	wsForward = []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=true"}
	spdyFwd   = []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}
)

// BenchmarkDebugCommands measures the debug commands with the real kubectl
// against a real node (the harness of BenchmarkPodStartup):
//   - `kubectl exec POD -- true`: wall time of the whole command as a user
//     sees it, p50 and p99 of 30 runs, over WebSocket (kubectl's default)
//     and SPDY; beside it the same exec through client-go in this process
//     (no kubectl start-up, no GET of the pod) and `kubectl get pod` (the
//     cost of starting kubectl and one API call);
//   - `kubectl logs` of a container that wrote 100 MiB of 100-byte lines:
//     MB/s of container output and seconds; beside it the same log through
//     client-go (the API server's proxy without kubectl), straight from the
//     nodelet's /containerLogs, and the rate at which the node wrote it;
//   - `kubectl port-forward`: MB/s of a 100 MiB file fetched from nginx
//     through 127.0.0.1, over WebSocket (kubectl's default) and SPDY;
//     beside it the same fetch from the pod's IP inside the node's
//     namespace, without port-forward.
//
// MB is 10^6 bytes. Throughputs are the median of 3 transfers. Run with
// -benchtime 1x: one iteration is the whole scenario.
func BenchmarkDebugCommands(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-debug-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.must("apply", "-f", benchPodsFile)
	cp.must("wait", "--for=condition=Ready", "pod/bench-box", "pod/bench-logs", "pod/bench-nginx", "--timeout=120s")
	writeRate := writeBenchLog(b, cp, node)
	cp.must("exec", "bench-nginx", "--", "sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /usr/share/nginx/html/big.bin", bigFileBytes))

	s := &benchSamples{durations: map[string][]time.Duration{}, values: map[string][]float64{}}
	for i := 0; i < b.N; i++ {
		benchExec(b, cp, s)
		benchLogs(b, cp, node, s)
		for _, mode := range []struct {
			name string
			env  []string
		}{{"pf-ws", wsForward}, {"pf-spdy", spdyFwd}} {
			benchPortForward(b, cp, node, s, mode.name, mode.env)
		}
		benchPodNetwork(b, cp, node, s)
	}
	for _, name := range []string{"exec-ws", "exec-spdy", "exec-go-ws", "exec-go-spdy", "get"} {
		b.ReportMetric(ms(s.percentile(name, 50)), name+"-p50-ms")
		b.ReportMetric(ms(s.percentile(name, 99)), name+"-p99-ms")
	}
	b.ReportMetric(s.median("logs-kubectl-s"), "logs-kubectl-s")
	for _, name := range []string{"logs-kubectl", "logs-go", "logs-nodelet", "pf-ws", "pf-spdy", "pod-net"} {
		b.ReportMetric(s.median(name), name+"-MB/s")
	}
	b.ReportMetric(writeRate, "logwrite-MB/s")
	for _, name := range []string{"logs", "pf-ws", "pf-spdy"} {
		for _, proc := range []string{"kubectl", "apiserver", "nodelet"} {
			b.ReportMetric(s.median(name+"-cpu-"+proc), name+"-cpu-"+proc+"-s")
			if name != "logs" || proc != "kubectl" { // kubectl logs has exited: no /proc to read
				b.ReportMetric(s.median(name+"-writes-"+proc)/1000, name+"-writes-"+proc+"-k")
			}
		}
	}
	b.ReportMetric(0, "ns/op") // the scenario's wall time says nothing

	cp.must("delete", "-f", benchPodsFile, "--wait=false")
	testkit.Eventually(b, 90*time.Second, "benchmark pods gone from the API and the node", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == "" && len(node.leftovers(b)) == 0
	})
}

// benchSamples collects the measurements of all iterations by name.
type benchSamples struct {
	durations map[string][]time.Duration
	values    map[string][]float64
}

func (s *benchSamples) percentile(name string, p int) time.Duration {
	d := append([]time.Duration(nil), s.durations[name]...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*p/100]
}

func (s *benchSamples) median(name string) float64 {
	v := append([]float64(nil), s.values[name]...)
	sort.Float64s(v)
	return v[len(v)/2]
}

func (s *benchSamples) add(name string, v float64) { s.values[name] = append(s.values[name], v) }

// addUsage records what a process used for one transfer.
func (s *benchSamples) addUsage(name, proc string, before, after usage) {
	s.add(name+"-cpu-"+proc, after.cpu-before.cpu)
	s.add(name+"-writes-"+proc, after.writes-before.writes)
}

// usage is what a process has used so far: CPU seconds and write system
// calls (write, writev and the like: syscw in /proc/PID/io). Writes tell
// how finely a stream is cut up on its way.
type usage struct{ cpu, writes float64 }

func readUsage(b *testing.B, pid int) usage {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatalf("read io of pid %d: %v", pid, err)
	}
	u := usage{cpu: cpuSeconds(b, pid)}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			if u.writes, err = strconv.ParseFloat(v, 64); err != nil {
				b.Fatalf("parse %q: %v", line, err)
			}
		}
	}
	return u
}

func mbPerSecond(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// runKubectl runs kubectl with extra environment and its output to stdout
// (nil: /dev/null), and returns the command's wall time and CPU time.
func runKubectl(cp *controlPlane, env []string, stdout io.Writer, args ...string) (wall time.Duration, cpu float64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(cp.dataDir, "kubectl-cache"))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("kubectl %s (%s): %w: %s", strings.Join(args, " "), strings.Join(env, " "), err, stderr.String())
	}
	return wall, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), nil
}

// benchExec times exec round trips, the variants interleaved so that
// the machine's drift hits them alike.
func benchExec(b *testing.B, cp *controlPlane, s *benchSamples) {
	b.Helper()
	cfg := cp.restConfig()
	kubectl := func(env []string, args ...string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, _, err := runKubectl(cp, env, nil, args...)
			return d, err
		}
	}
	variants := []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{"exec-ws", kubectl(wsExec, "exec", "bench-box", "--", "true")},
		{"exec-spdy", kubectl(spdyExec, "exec", "bench-box", "--", "true")},
		{"exec-go-ws", func() (time.Duration, error) { return goExec(cfg, true) }},
		{"exec-go-spdy", func() (time.Duration, error) { return goExec(cfg, false) }},
		{"get", kubectl(nil, "get", "pod", "bench-box", "-o", "name")},
	}
	for range execRuns {
		for _, v := range variants {
			d, err := v.run()
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			s.durations[v.name] = append(s.durations[v.name], d)
		}
	}
}

// goExec runs `true` in bench-box through client-go's WebSocket or SPDY
// executor on a fresh connection, as a new kubectl process would.
func goExec(cfg *rest.Config, websocket bool) (time.Duration, error) {
	u, err := url.Parse(cfg.Host + "/api/v1/namespaces/default/pods/bench-box/exec?command=true&container=main&stdout=true&stderr=true")
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var ex remotecommand.Executor
	if websocket {
		ex, err = remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", u)
	}
	if err != nil {
		return 0, err
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// writeBenchLog starts bench-logs' writer and waits until its CRI log
// file ends with the marker line. It returns the rate at which the node
// wrote the container's output, from the first entry's timestamp to the
// last's.
func writeBenchLog(b *testing.B, cp *controlPlane, node *realNode) float64 {
	b.Helper()
	cp.must("exec", "bench-logs", "--", "touch", "/tmp/go")
	var path string
	testkit.Eventually(b, 3*time.Minute, "bench-logs' 100 MiB in its log file", func() bool {
		m, _ := filepath.Glob(filepath.Join(node.dir, "pods", "default_bench-logs_*", "main", "0.log"))
		if len(m) != 1 {
			return false
		}
		path = m[0]
		first, last := logEnds(b, path)
		return strings.HasSuffix(last, " F "+strings.TrimSuffix(logMarker, "\n")) && first != ""
	})
	first, last := logEnds(b, path)
	t0, err0 := time.Parse(time.RFC3339Nano, strings.Fields(first)[0])
	t1, err1 := time.Parse(time.RFC3339Nano, strings.Fields(last)[0])
	if err0 != nil || err1 != nil {
		b.Fatalf("timestamps of %s: %q (%v), %q (%v)", path, first, err0, last, err1)
	}
	return mbPerSecond(logPayload, t1.Sub(t0))
}

// logEnds returns the first and the last line of a log file.
func logEnds(b *testing.B, path string) (first, last string) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, 0)
	first, _, _ = strings.Cut(string(buf[:n]), "\n")
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	off := max(st.Size()-int64(len(buf)), 0)
	n, _ = f.ReadAt(buf, off)
	tail := strings.TrimSuffix(string(buf[:n]), "\n")
	return first, tail[strings.LastIndexByte(tail, '\n')+1:]
}

// countingWriter counts what it discards.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// benchLogs reads bench-logs' whole log with kubectl (stdout through a
// pipe into this process), with client-go through the API server, and
// from the nodelet's API directly.
func benchLogs(b *testing.B, cp *controlPlane, node *realNode, s *benchSamples) {
	b.Helper()
	cfg := cp.restConfig()
	cs := cp.clientset()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	nodeClient := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer nodeClient.CloseIdleConnections()
	check := func(what string, n int64, d time.Duration) {
		if n != logOutput {
			b.Fatalf("%s: %d bytes, want %d", what, n, logOutput)
		}
		s.add(what, mbPerSecond(n, d))
	}
	for range transferRuns {
		var out countingWriter
		apiBefore, nodeBefore := readUsage(b, cp.cmd.Process.Pid), readUsage(b, node.cmd.Process.Pid)
		d, kubectlCPU, err := runKubectl(cp, nil, &out, "logs", "bench-logs")
		if err != nil {
			b.Fatal(err)
		}
		s.addUsage("logs", "apiserver", apiBefore, readUsage(b, cp.cmd.Process.Pid))
		s.addUsage("logs", "nodelet", nodeBefore, readUsage(b, node.cmd.Process.Pid))
		s.add("logs-cpu-kubectl", kubectlCPU)
		s.add("logs-kubectl-s", d.Seconds())
		check("logs-kubectl", out.n, d)

		start := time.Now()
		n, err := readAll(func(ctx context.Context) (io.ReadCloser, error) {
			return cs.CoreV1().Pods("default").GetLogs("bench-logs", &corev1.PodLogOptions{}).Stream(ctx)
		})
		if err != nil {
			b.Fatalf("logs through client-go: %v", err)
		}
		check("logs-go", n, time.Since(start))

		start = time.Now()
		n, err = readAll(func(ctx context.Context) (io.ReadCloser, error) {
			return httpGetBody(ctx, nodeClient, fmt.Sprintf("https://%s:10250/containerLogs/default/bench-logs/main", node.ip))
		})
		if err != nil {
			b.Fatalf("logs from the nodelet: %v", err)
		}
		check("logs-nodelet", n, time.Since(start))
	}
}

// readAll opens a stream and counts its bytes, within two minutes.
func readAll(open func(context.Context) (io.ReadCloser, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, err := open(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	return io.Copy(io.Discard, body)
}

func httpGetBody(ctx context.Context, c *http.Client, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
	}
	return resp.Body, nil
}

// benchPortForward runs one kubectl port-forward to bench-nginx and
// fetches the big file through it transferRuns times.
func benchPortForward(b *testing.B, cp *controlPlane, node *realNode, s *benchSamples, name string, env []string) {
	b.Helper()
	port := freePort(b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := hosttools.CommandContext(ctx, "kubectl", "--kubeconfig", cp.kubeconfig, "port-forward", "pod/bench-nginx", fmt.Sprintf("%d:80", port))
	cmd.Env = append(append(os.Environ(), "KUBECACHEDIR="+filepath.Join(cp.dataDir, "kubectl-cache")), env...)
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d/", port)
	testkit.Eventually(b, 20*time.Second, name+" forwarding", func() bool {
		body, _ := getLocal(base)
		return strings.Contains(body, "Welcome to nginx!")
	})
	client := &http.Client{Timeout: 2 * time.Minute}
	pids := map[string]int{"kubectl": cmd.Process.Pid, "apiserver": cp.cmd.Process.Pid, "nodelet": node.cmd.Process.Pid}
	for range transferRuns {
		before := map[string]usage{}
		for proc, pid := range pids {
			before[proc] = readUsage(b, pid)
		}
		start := time.Now()
		n, err := readAll(func(ctx context.Context) (io.ReadCloser, error) {
			return httpGetBody(ctx, client, base+"big.bin")
		})
		d := time.Since(start)
		if err != nil || n != bigFileBytes {
			b.Fatalf("%s: fetched %d bytes of %d: %v\nkubectl port-forward:\n%s", name, n, bigFileBytes, err, logs.tail(20))
		}
		for proc, pid := range pids {
			s.addUsage(name, proc, before[proc], readUsage(b, pid))
		}
		s.add(name, mbPerSecond(n, d))
	}
}

// benchPodNetwork fetches the big file from the pod's IP inside the
// node's namespace (busybox wget): the same transfer without
// port-forward.
func benchPodNetwork(b *testing.B, cp *controlPlane, node *realNode, s *benchSamples) {
	b.Helper()
	ip := cp.must("get", "pod", "bench-nginx", "-o", "jsonpath={.status.podIP}")
	for range transferRuns {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		start := time.Now()
		out, err := node.inNetns(ctx, "busybox", "wget", "-q", "-O", "/dev/null", "http://"+ip+"/big.bin")
		d := time.Since(start)
		cancel()
		if err != nil {
			b.Fatalf("wget from the pod's IP %s: %v: %s", ip, err, out)
		}
		s.add("pod-net", mbPerSecond(bigFileBytes, d))
	}
}
