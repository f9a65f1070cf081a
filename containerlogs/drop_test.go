package containerlogs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// fullDisk is a log that refuses every write while full.
type fullDisk struct {
	buf   bytes.Buffer
	full  bool
	tries int // writes attempted while full
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if d.full {
		d.tries++
		return 0, syscall.ENOSPC
	}
	return d.buf.Write(p)
}

// entries are the writer's entries without their timestamps.
func (d *fullDisk) entries() []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(d.buf.String(), "\n"), "\n") {
		_, rest, _ := strings.Cut(l, " ")
		out = append(out, rest)
	}
	return out
}

// A log that refuses writes drops the output, counts it, tries again once
// a second (not per entry) and resumes writing when it takes writes again.
func TestCRIDropsAndResumes(t *testing.T) {
	clock := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	disk := &fullDisk{}
	l := NewCRI(disk, func() time.Time { return clock })
	var changes []Drops
	l.OnChange(func(d Drops) { changes = append(changes, d) })
	s := l.Stream("stdout")
	write := func(p string) {
		if n, err := s.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; a stream takes everything", p, n, err)
		}
	}

	write("one\n")
	disk.full = true
	for range 100 {
		write("lost\n")
	}
	if disk.tries != 1 {
		t.Errorf("%d writes tried within the retry interval, want 1", disk.tries)
	}
	clock = clock.Add(retryInterval)
	write("lost too\n")
	if disk.tries != 2 {
		t.Errorf("%d writes tried after the retry interval, want 2", disk.tries)
	}
	d := l.Drops()
	want := Drops{Bytes: 100*4 + 8, Lines: 101, Episodes: 1, Dropping: true, Err: syscall.ENOSPC.Error()}
	if d != want {
		t.Errorf("Drops = %+v, want %+v", d, want)
	}

	disk.full = false
	write("still dropped: tried again only after the interval\n")
	clock = clock.Add(retryInterval)
	write("two\n")
	if got := strings.Join(disk.entries(), "|"); got != "stdout F one|stdout F two" {
		t.Errorf("log %q", got)
	}
	d = l.Drops()
	if d.Dropping || d.Episodes != 1 || d.Lines != 102 {
		t.Errorf("after resuming: %+v", d)
	}
	if len(changes) != 2 || !changes[0].Dropping || changes[1].Dropping {
		t.Errorf("changes %+v, want dropping then writing", changes)
	}

	disk.full = true
	clock = clock.Add(retryInterval)
	write("lost\n")
	if d := l.Drops(); d.Episodes != 2 || !d.Dropping {
		t.Errorf("a second episode: %+v", d)
	}
}

// A line whose start is in the log but whose end was dropped is ended
// before the stream's next entry, so readers do not join it to the next
// line; the other stream's lines are untouched.
func TestCRIEndsCutLines(t *testing.T) {
	clock := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	disk := &fullDisk{}
	l := NewCRI(disk, func() time.Time { return clock })
	out, errs := l.Stream("stdout"), l.Stream("stderr")
	long := strings.Repeat("x", maxLine)
	out.Write([]byte(long + "abc")) // P written, "abc" pending
	disk.full = true
	out.Write([]byte("def\n")) // F dropped
	clock = clock.Add(retryInterval)
	disk.full = false
	errs.Write([]byte("err line\n"))
	out.Write([]byte("next\n"))
	want := []string{"stdout P " + long, "stderr F err line", "stdout F ", "stdout F next"}
	if got := disk.entries(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("log\n%q\nwant\n%q", got, want)
	}
}

// A failed rotation leaves the file closed; the next write opens it again.
func TestRotatingFileReopensAfterFailedRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	path := filepath.Join(dir, "0.log")
	r, err := OpenRotating(path, Rotation{MaxSize: 10, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("12345678\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil { // the rename and the new file fail
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("lost\n")); err == nil {
		t.Fatal("rotation into a removed directory succeeded")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write([]byte("back\n")); err != nil {
		t.Fatalf("write after the directory returned: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "back\n" {
		t.Errorf("log %q", data)
	}
}

// The Logger keeps reading a container whose log refuses every write (a
// full disk): the writer never blocks on a full pipe, and "stats" counts
// what was dropped.
func TestLoggerDrainsAFullLog(t *testing.T) {
	dir, logs := t.TempDir(), t.TempDir()
	startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	defer c.close()
	logPath := filepath.Join(logs, "0.log")
	if err := os.Symlink("/dev/full", logPath); err != nil { // ENOSPC on every write
		t.Fatal(err)
	}
	stdout, stderr, err := c.Add(context.Background(), "c1", logPath)
	if err != nil {
		t.Fatal(err)
	}
	ow, closeOut := shimSide(t, stdout)
	_, closeErr := shimSide(t, stderr)
	defer closeErr()
	defer closeOut()
	line := strings.Repeat("y", 99) + "\n"
	done := make(chan struct{})
	go func() { // 1 MiB: far more than a pipe holds
		defer close(done)
		for range 10 * 1024 {
			ow.WriteString(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the container's writes blocked on a log that refuses writes")
	}
	testkit.Eventually(t, 5*time.Second, "all lines counted as dropped", func() bool {
		d, err := c.Drops(context.Background())
		return err == nil && d["c1"].Lines == 10*1024
	})
	d, _ := c.Drops(context.Background())
	if got := d["c1"]; got.Bytes != 10*1024*99 || got.Episodes != 1 || !got.Dropping {
		t.Errorf("drops %+v", got)
	}
}

type dropCounts struct{ bytes, lines uint64 }

func (c *dropCounts) ContainerLogDropped(bytes, lines uint64) { c.bytes += bytes; c.lines += lines }

// The reporter passes on what was dropped since the last poll, and each
// episode once; a new Logger's smaller counts are all new.
func TestDropReporterObserve(t *testing.T) {
	var counts dropCounts
	var started []string
	r := NewDropReporter(DropReporterConfig{Metrics: &counts,
		Started: func(id string, d Drops) { started = append(started, id) }})
	r.observe(map[string]Drops{"a": {Bytes: 10, Lines: 2, Episodes: 1, Dropping: true}})
	r.observe(map[string]Drops{"a": {Bytes: 30, Lines: 5, Episodes: 1, Dropping: true}})
	r.observe(map[string]Drops{"a": {Bytes: 30, Lines: 5, Episodes: 1}, "b": {Bytes: 1, Lines: 1, Episodes: 1}})
	r.observe(map[string]Drops{"a": {Bytes: 40, Lines: 6, Episodes: 2}})
	r.observe(map[string]Drops{"a": {Bytes: 4, Lines: 1, Episodes: 1}}) // a new Logger
	r.observe(nil)
	r.observe(map[string]Drops{"b": {Bytes: 1, Lines: 1, Episodes: 1}}) // b again, after a Logger restart
	if counts != (dropCounts{bytes: 40 + 4 + 1 + 1, lines: 6 + 1 + 1 + 1}) {
		t.Errorf("counted %+v", counts)
	}
	if got := strings.Join(started, ","); got != "a,b,a,a,b" {
		t.Errorf("episodes started %s", got)
	}
}

// A Logger resuming a container whose log file cannot be opened still
// reads it (dropping the output), and opens the file once it can.
func TestLoggerResumesWithoutItsLogFile(t *testing.T) {
	dir, logs := t.TempDir(), t.TempDir()
	stop := startLogger(t, dir, false)
	c := NewClient(ClientConfig{Dir: dir})
	logDir := filepath.Join(logs, "ctr")
	logPath := filepath.Join(logDir, "0.log")
	stdout, stderr, err := c.Add(context.Background(), "c1", logPath)
	if err != nil {
		t.Fatal(err)
	}
	ow, closeOut := shimSide(t, stdout)
	_, closeErr := shimSide(t, stderr)
	defer closeErr()
	defer closeOut()
	c.close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The log's directory becomes a file: the new Logger cannot open it.
	if err := os.RemoveAll(logDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	startLogger(t, dir, false)
	c = NewClient(ClientConfig{Dir: dir})
	defer c.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2048 { // 200 kB: more than the pipe holds
			ow.WriteString(strings.Repeat("z", 99) + "\n")
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the container's writes blocked on a log that cannot be opened")
	}
	testkit.Eventually(t, 5*time.Second, "dropped lines counted", func() bool {
		d, err := c.Drops(context.Background())
		return err == nil && d["c1"].Lines == 2048 && d["c1"].Err != ""
	})
	if err := os.Remove(logDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "written again once the file can be opened", func() bool {
		ow.WriteString("back\n")
		lines := logLines(t, logPath)
		return len(lines) > 0 && lines[0] == "stdout back"
	})
}

// A write the file takes only part of (a full disk; here the process's
// file size limit) is truncated away: the file keeps whole entries.
func TestRotatingFileTruncatesAShortWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	r, err := OpenRotating(path, Rotation{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	entry := []byte(strings.Repeat("a", 29) + "\n")
	for range 3 {
		if _, err := r.Write(entry); err != nil {
			t.Fatal(err)
		}
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Writes past 100 bytes fail (EFBIG; Go ignores SIGXFSZ): the next
	// entry fits 10 of its 30 bytes.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 100, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	n, werr := r.Write(entry)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if werr == nil || n != 0 {
		t.Fatalf("Write past the limit = %d, %v; want 0 and an error", n, werr)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 90 {
		t.Fatalf("size after the short write %v, %v; want 90 (truncated back)", st.Size(), err)
	}
	if _, err := r.Write([]byte("whole\n")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := strings.Repeat(string(entry), 3) + "whole\n"; string(data) != want {
		t.Errorf("log %q, want %q", data, want)
	}
}
