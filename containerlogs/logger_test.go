package containerlogs

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// startLogger runs a Logger on dir until the returned stop is called.
func startLogger(t *testing.T, dir string, idleExit bool) (stop func() error) {
	t.Helper()
	l, err := New(Config{Dir: dir, IdleExit: idleExit})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Run(ctx) }()
	// The socket file appears at bind, before listen: wait until it accepts.
	testkit.Eventually(t, 5*time.Second, "logger socket", func() bool {
		conn, err := net.Dial("unix", SocketPath(dir))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { stop() })
	return stop
}

// shimSide opens a FIFO's write end as containerd's shim does (and a read
// end, as the shim also holds one, so no write fails while no Logger runs).
func shimSide(t *testing.T, path string) (w *os.File, closeAll func()) {
	t.Helper()
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	return w, func() { w.Close(); r.Close() }
}

func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			out = append(out, f[1]+" "+f[3])
		}
	}
	return out
}

func TestLoggerCopiesUntilEOF(t *testing.T) {
	dir, logs := t.TempDir(), t.TempDir()
	startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	defer c.close()
	logPath := filepath.Join(logs, "ctr", "0.log")
	stdout, stderr, err := c.Add(context.Background(), "c1", logPath)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := c.Add(context.Background(), "c1", logPath)
	if err != nil || again != stdout {
		t.Fatalf("second Add = %q, %v; want the same FIFOs", again, err)
	}
	ow, closeOut := shimSide(t, stdout)
	ew, closeErr := shimSide(t, stderr)
	ow.WriteString("hello\nwor")
	ew.WriteString("oops\n")
	ow.WriteString("ld\nno newline")
	closeOut()
	closeErr()
	testkit.Eventually(t, 5*time.Second, "stream to end", func() bool { return !fileExists(filepath.Join(dir, "streams", "c1.json")) })
	var outs, errs []string
	for _, l := range logLines(t, logPath) {
		if s, ok := strings.CutPrefix(l, "stdout "); ok {
			outs = append(outs, s)
		} else {
			errs = append(errs, strings.TrimPrefix(l, "stderr "))
		}
	}
	if strings.Join(outs, "|") != "hello|world|no newline" || strings.Join(errs, "|") != "oops" {
		t.Errorf("stdout %q, stderr %q", outs, errs)
	}
	if fileExists(stdout) || fileExists(stderr) {
		t.Error("FIFOs left after the stream ended")
	}
}

// A restarted Logger resumes the containers its predecessor logged; what
// they wrote while no Logger ran is not lost.
func TestLoggerResumes(t *testing.T) {
	dir, logs := t.TempDir(), t.TempDir()
	stop := startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	logPath := filepath.Join(logs, "0.log")
	stdout, stderr, err := c.Add(context.Background(), "c1", logPath)
	if err != nil {
		t.Fatal(err)
	}
	ow, closeOut := shimSide(t, stdout)
	_, closeErr := shimSide(t, stderr)
	ow.WriteString("before\n")
	testkit.Eventually(t, 5*time.Second, "first line", func() bool { return len(logLines(t, logPath)) == 1 })
	c.close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(dir, "streams", "c1.json")) {
		t.Fatal("registration gone after the Logger stopped")
	}
	ow.WriteString("while down\n") // waits in the pipe
	startLogger(t, dir, false)
	ow.WriteString("after\n")
	closeOut()
	closeErr()
	testkit.Eventually(t, 5*time.Second, "stream to end", func() bool { return !fileExists(filepath.Join(dir, "streams", "c1.json")) })
	if got := strings.Join(logLines(t, logPath), "|"); got != "stdout before|stdout while down|stdout after" {
		t.Errorf("log lines %q", got)
	}
}

// A resumed container whose shim is gone ends at once.
func TestLoggerResumeWriterGone(t *testing.T) {
	dir := t.TempDir()
	stop := startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	stdout, stderr, err := c.Add(context.Background(), "c1", filepath.Join(t.TempDir(), "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	_, closeOut := shimSide(t, stdout)
	_, closeErr := shimSide(t, stderr)
	c.close()
	stop()
	closeOut()
	closeErr()
	startLogger(t, dir, false)
	testkit.Eventually(t, 5*time.Second, "resumed stream to end", func() bool { return !fileExists(filepath.Join(dir, "streams", "c1.json")) })
}

// Remove of a container whose task never opened its FIFOs does not hang.
func TestLoggerRemoveUnopened(t *testing.T) {
	dir := t.TempDir()
	startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	defer c.close()
	stdout, _, err := c.Add(context.Background(), "c1", filepath.Join(t.TempDir(), "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if fileExists(stdout) || fileExists(filepath.Join(dir, "streams", "c1.json")) {
		t.Error("FIFO or registration left after Remove")
	}
	if err := c.Remove(context.Background(), "unknown"); err != nil {
		t.Errorf("Remove of an unknown container: %v", err)
	}
}

func TestLoggerRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	defer c.close()
	for _, tc := range []struct{ id, path string }{{"../x", "/tmp/x.log"}, {"", "/tmp/x.log"}, {"ok", "relative.log"}} {
		if _, _, err := c.Add(context.Background(), tc.id, tc.path); err == nil {
			t.Errorf("Add(%q, %q) accepted", tc.id, tc.path)
		}
	}
	if _, err := c.call(context.Background(), request{Op: "bogus"}); err == nil {
		t.Error("unknown operation accepted")
	}
}

func TestLoggerSecondInstanceRefused(t *testing.T) {
	dir := t.TempDir()
	startLogger(t, dir, false)
	l, _ := New(Config{Dir: dir})
	if err := l.Run(context.Background()); err != ErrRunning {
		t.Errorf("second Logger: %v, want ErrRunning", err)
	}
}

func TestLoggerIdleExit(t *testing.T) {
	dir := t.TempDir()
	l, _ := New(Config{Dir: dir, IdleExit: true})
	errc := make(chan error, 1)
	go func() { errc <- l.Run(context.Background()) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4*idleGrace + time.Second):
		t.Fatal("idle Logger did not exit")
	}
	if fileExists(SocketPath(dir)) {
		t.Error("socket left behind")
	}
}

// A client that never added a container still restarts a dead Logger that
// left registrations (the nodelet restarted since it added them).
func TestClientRestartsLoggerWithRegistrations(t *testing.T) {
	dir := t.TempDir()
	stop := startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	stdout, stderr, err := c.Add(context.Background(), "c1", filepath.Join(t.TempDir(), "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	_, closeOut := shimSide(t, stdout)
	_, closeErr := shimSide(t, stderr)
	defer closeOut()
	defer closeErr()
	c.close()
	stop()

	started := make(chan bool, 1)
	fresh := NewClient(ClientConfig{Dir: dir, Command: []string{"/bin/true"}})
	fresh.startHook = func() { started <- true }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fresh.Run(ctx)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no Logger started for the registrations left behind")
	}
}
