package containerd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/test/testkit"
)

// writeBuffer is an io.WriteCloser recording what was written and whether
// it was closed.
type writeBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (w *writeBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *writeBuffer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

func (w *writeBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *writeBuffer) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// slowWriter is a writeBuffer that takes its time.
type slowWriter struct {
	writeBuffer
	delay time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	return w.writeBuffer.Write(p)
}

// execResult is what one Exec gave.
type execResult struct {
	stdout, stderr string
	err            error
}

// execIn runs Exec and checks that it closed both writers and left no
// FIFO behind.
func (f *fixture) execIn(t *testing.T, ctx context.Context, id string, cmd []string, stdin io.Reader, tty bool, resize <-chan runtime.TerminalSize) execResult {
	t.Helper()
	var stdout, stderr writeBuffer
	err := f.rt.Exec(ctx, id, cmd, stdin, &stdout, &stderr, tty, resize)
	if !stdout.isClosed() || !stderr.isClosed() {
		t.Errorf("exec %q: stdout closed %v, stderr closed %v", cmd, stdout.isClosed(), stderr.isClosed())
	}
	f.assertNoFIFOs(t)
	return execResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// assertNoFIFOs checks that no exec left its FIFO directory (the fixture
// uses the log driver, so containers have none).
func (f *fixture) assertNoFIFOs(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(f.cfg.StateDir, "fifo"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("FIFO directory left: %s", e.Name())
	}
}

// startPod runs a sandbox with the pod's containers; the sandbox and its
// containers are removed at cleanup.
func (f *fixture) startPod(t *testing.T, pod *corev1.Pod) (string, []string) {
	t.Helper()
	ctx := context.Background()
	sb, err := f.rt.RunSandbox(ctx, pod, runtime.SandboxConfig{Image: f.pause, NetNSPath: f.netns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.rt.RemoveSandbox(context.Background(), sb); err != nil {
			t.Errorf("remove sandbox: %v", err)
		}
		assertNothingLeft(t, f.rt)
	})
	var ids []string
	for i := range pod.Spec.Containers {
		ids = append(ids, f.runContainer(t, pod, sb, i))
	}
	return sb, ids
}

func TestExec(t *testing.T) {
	f := newFixture(t, true)
	main := corev1.Container{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "999"},
		Env: []corev1.EnvVar{{Name: "FOO", Value: "bar"}}, WorkingDir: "/tmp"}
	_, ids := f.startPod(t, testPod("exec", main))
	id := ids[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("output", func(t *testing.T) {
		r := f.execIn(t, ctx, id, []string{"sh", "-c", "echo hi; echo oops >&2"}, nil, false, nil)
		if r.err != nil || r.stdout != "hi\n" || r.stderr != "oops\n" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("sync", func(t *testing.T) {
		out, code, err := f.rt.ExecSync(ctx, id, []string{"sh", "-c", "echo hi; echo oops >&2; exit 4"})
		if err != nil || code != 4 || !strings.Contains(string(out), "hi\n") || !strings.Contains(string(out), "oops\n") {
			t.Errorf("ExecSync = %q, %d, %v", out, code, err)
		}
		if _, _, err := f.rt.ExecSync(ctx, id, []string{"/no/such/command"}); err == nil {
			t.Error("ExecSync of a missing command: want an error")
		}
	})
	t.Run("slow reader", func(t *testing.T) {
		// The process exits while much of its output is still in the
		// pipes: Exec must wait for it to be copied.
		stdout := &slowWriter{delay: 20 * time.Millisecond}
		var stderr writeBuffer
		err := f.rt.Exec(ctx, id, []string{"head", "-c", "300000", "/bin/busybox"}, nil, stdout, &stderr, false, nil)
		if got := len(stdout.String()); err != nil || got != 300000 {
			t.Errorf("err %v, %d bytes of 300000 (stderr %q)", err, got, stderr.String())
		}
		f.assertNoFIFOs(t)
	})
	t.Run("container's process settings", func(t *testing.T) {
		r := f.execIn(t, ctx, id, []string{"sh", "-c", "echo $FOO; pwd; id -u"}, nil, false, nil)
		if r.err != nil || r.stdout != "bar\n/tmp\n0\n" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		r := f.execIn(t, ctx, id, []string{"sh", "-c", "exit 7"}, nil, false, nil)
		var exit *runtime.ExitError
		if !errors.As(r.err, &exit) || exit.Code != 7 || r.err.Error() != "command terminated with exit code 7" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		in := strings.Repeat("0123456789abcdef", 16<<10) + "last line without newline"
		r := f.execIn(t, ctx, id, []string{"cat"}, strings.NewReader(in), false, nil)
		if r.err != nil || r.stdout != in {
			t.Errorf("cat: err %v, %d bytes back of %d", r.err, len(r.stdout), len(in))
		}
		r = f.execIn(t, ctx, id, []string{"cat"}, strings.NewReader(""), false, nil)
		if r.err != nil || r.stdout != "" {
			t.Errorf("cat of empty stdin: %+v", r)
		}
	})
	t.Run("tty", func(t *testing.T) {
		r := f.execIn(t, ctx, id, []string{"/bin/busybox", "tty"}, nil, true, nil)
		if r.err != nil || !strings.HasPrefix(r.stdout, "/dev/pts/") || r.stderr != "" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("tty resize", func(t *testing.T) { testExecResize(t, f, ctx, id) })
	t.Run("command not found", func(t *testing.T) {
		r := f.execIn(t, ctx, id, []string{"/no/such/command"}, nil, false, nil)
		t.Logf("error: %v", r.err)
		var exit *runtime.ExitError
		if r.err == nil || errors.As(r.err, &exit) || ctx.Err() != nil || !strings.Contains(r.err.Error(), id) {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("cancel kills", func(t *testing.T) { testExecCancel(t, f, ctx, id) })
}

// testExecCancel ends an exec by its context and checks that the process
// is gone and the container's own process is not.
func testExecCancel(t *testing.T, f *fixture, ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	r := f.execIn(t, cctx, id, []string{"sleep", "1001"}, nil, false, nil)
	if !errors.Is(r.err, context.DeadlineExceeded) || time.Since(start) > 15*time.Second {
		t.Errorf("after %v: %+v", time.Since(start), r)
	}
	ps := f.execIn(t, ctx, id, []string{"ps"}, nil, false, nil)
	if ps.err != nil || !strings.Contains(ps.stdout, "sleep 999") || strings.Contains(ps.stdout, "sleep 1001") {
		t.Errorf("processes after cancel: %+v", ps)
	}
}

// testExecResize resizes a terminal and reads its size back. Sending two
// sizes on an unbuffered channel makes sure the first was applied before
// the command asks (sizes are applied in order).
func testExecResize(t *testing.T, f *fixture, ctx context.Context, id string) {
	resize := make(chan runtime.TerminalSize)
	inR, inW := io.Pipe()
	defer inW.Close()
	go func() {
		resize <- runtime.TerminalSize{Width: 100, Height: 30}
		resize <- runtime.TerminalSize{Width: 123, Height: 45}
		resize <- runtime.TerminalSize{Width: 123, Height: 45}
		inW.Write([]byte("go\n"))
	}()
	r := f.execIn(t, ctx, id, []string{"sh", "-c", "read x; /bin/busybox stty size"}, inR, true, resize)
	if r.err != nil || !strings.Contains(r.stdout, "45 123") {
		t.Errorf("got %+v", r)
	}
}

func TestExecNotRunning(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := f.rt.Events(ctx)
	_, ids := f.startPod(t, testPod("exited", corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"true"}}))
	waitExit(t, events, ids[0])

	check := func(what, id string) {
		t.Helper()
		r := f.execIn(t, ctx, id, []string{"echo", "hi"}, nil, false, nil)
		t.Logf("%s: %v", what, r.err)
		if !errors.Is(r.err, runtime.ErrContainerNotRunning) || !strings.Contains(r.err.Error(), id) || r.stdout != "" {
			t.Errorf("%s: %+v", what, r)
		}
	}
	check("exited task", ids[0])
	podStatus(t, f.rt, "uid-exited") // reaps the exited task
	check("reaped task", ids[0])
	check("missing container", "no-such-container")
}

// forward runs PortForward on one end of a pipe and returns the other end
// and PortForward's result.
func forward(ctx context.Context, rt *containerd.Runtime, uid types.UID, port int32) (net.Conn, <-chan error) {
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- rt.PortForward(ctx, uid, port, server) }()
	return client, done
}

// waitResult waits for PortForward to return.
func waitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("PortForward did not return within 20s")
		return nil
	}
}

// echoOnce sends msg through a forward to the echo server and reads it
// back.
func echoOnce(ctx context.Context, rt *containerd.Runtime, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, done := forward(ctx, rt, uid, 8080)
	defer client.Close()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write([]byte("ping\n")); err != nil {
		return errors.Join(err, <-done)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "ping\n" {
		return errors.Join(errors.New("echo: "+string(buf)), err, <-done)
	}
	client.Close()
	return <-done
}

func TestPortForward(t *testing.T) {
	f := newFixture(t, true)
	if out, err := hosttools.Command("ip", "-n", filepath.Base(f.netns), "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	echo := corev1.Container{Name: "echo", Image: "busybox:1.36", Command: []string{"nc", "-ll", "-p", "8080", "-e", "cat"}}
	sb, _ := f.startPod(t, testPod("fwd", echo))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uid := types.UID("uid-fwd")

	testkit.Eventually(t, 10*time.Second, "an echo through port-forward", func() (bool, error) {
		err := echoOnce(ctx, f.rt, uid)
		return err == nil, err
	})

	t.Run("half-close", func(t *testing.T) { testForwardHalfClose(t, ctx, f.rt, uid) })
	t.Run("cancel", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		client, done := forward(cctx, f.rt, uid, 8080)
		defer client.Close()
		if _, err := client.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		ccancel()
		if err := waitResult(t, done); !errors.Is(err, context.Canceled) {
			t.Errorf("PortForward after cancel: %v", err)
		}
		assertClosed(t, client)
	})
	t.Run("closed port", func(t *testing.T) {
		client, done := forward(ctx, f.rt, uid, 8081)
		defer client.Close()
		err := waitResult(t, done)
		t.Logf("error: %v", err)
		if err == nil || !strings.Contains(err.Error(), "8081") || !strings.Contains(err.Error(), "default/fwd") {
			t.Errorf("PortForward to a closed port: %v", err)
		}
		assertClosed(t, client)
	})
	t.Run("unknown pod", func(t *testing.T) {
		client, done := forward(ctx, f.rt, "uid-none", 8080)
		defer client.Close()
		if err := waitResult(t, done); !errors.Is(err, runtime.ErrSandboxNotRunning) || !strings.Contains(err.Error(), "uid-none") {
			t.Errorf("PortForward to an unknown pod: %v", err)
		}
		assertClosed(t, client)
	})
	t.Run("exited sandbox", func(t *testing.T) {
		// The pause process dies, its task stays: the echo server still
		// listens in the namespace, but the pod has no running sandbox.
		killTask(t, f.rt, sb)
		client, done := forward(ctx, f.rt, uid, 8080)
		defer client.Close()
		if err := waitResult(t, done); !errors.Is(err, runtime.ErrSandboxNotRunning) {
			t.Errorf("PortForward to an exited sandbox: %v", err)
		}
	})
}

// killTask kills a task's process and waits for its exit, leaving the
// task in containerd.
func killTask(t *testing.T, rt *containerd.Runtime, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(rt.NamespaceForTest(context.Background()), 20*time.Second)
	defer cancel()
	cont, err := rt.ClientForTest().LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	exited, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Kill(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("task did not exit")
	}
}

// TestPortForwardHostNetwork forwards to a server of the test on the
// node's loopback through a host-network pod. The server ends its output
// first and reads on: the forward must half-close the client's stream,
// not close it.
func TestPortForwardHostNetwork(t *testing.T) {
	f := newFixture(t, true)
	pod := testPod("hostnet", corev1.Container{Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "999"}})
	pod.Spec.HostNetwork = true
	sb, err := f.rt.RunSandbox(context.Background(), pod, runtime.SandboxConfig{Image: f.pause})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.rt.RemoveSandbox(context.Background(), sb); err != nil {
			t.Errorf("remove sandbox: %v", err)
		}
		assertNothingLeft(t, f.rt)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		conn.Write([]byte("hello"))
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		b, err := io.ReadAll(conn)
		got <- fmt.Sprintf("%s %v", b, err)
	}()
	client, server := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	port := ln.Addr().(*net.TCPAddr).Port
	go func() { done <- f.rt.PortForward(ctx, "uid-hostnet", int32(port), server) }()

	client.SetDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(client); err != nil || string(b) != "hello" {
		t.Fatalf("from server: %q %v", b, err)
	}
	if _, err := client.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	client.(*net.TCPConn).CloseWrite()
	if s := <-got; s != "more <nil>" {
		t.Errorf("server read %q", s)
	}
	if err := waitResult(t, done); err != nil {
		t.Errorf("PortForward: %v", err)
	}
}

// tcpPair returns both ends of a TCP connection on loopback.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// testForwardHalfClose forwards a TCP connection (which can half-close):
// the client's end of input reaches cat, whose exit ends the server's
// output, which the client sees as the end of the echo.
func testForwardHalfClose(t *testing.T, ctx context.Context, rt *containerd.Runtime, uid types.UID) {
	client, server := tcpPair(t)
	done := make(chan error, 1)
	go func() { done <- rt.PortForward(ctx, uid, 8080, server) }()

	payload := strings.Repeat("port-forward ", 20000)
	go func() {
		client.Write([]byte(payload))
		client.(*net.TCPConn).CloseWrite()
	}()
	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	back, err := io.ReadAll(client)
	if err != nil || string(back) != payload {
		t.Errorf("echo: %v, %d bytes of %d", err, len(back), len(payload))
	}
	if err := waitResult(t, done); err != nil {
		t.Errorf("PortForward: %v", err)
	}
}

// assertClosed checks that PortForward closed its end of the pipe.
func assertClosed(t *testing.T, client net.Conn) {
	t.Helper()
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("stream not closed: read gives %v", err)
	}
}
