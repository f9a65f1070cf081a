package runtime

// Container logs in the CRI format kubectl logs reads:
//
//	2016-10-06T00:17:09.669794202Z stdout F a whole line
//	2016-10-06T00:17:09.669794203Z stderr P the first part of a long line
//
// Two ways to get a container's output there:
//
//   - The log driver (Config.LogDriver set): containerd's shim starts a
//     small program, the nodelet binary itself invoked with LogDriverArg,
//     which receives the container's stdout and stderr pipes and writes the
//     CRI file. It is a child of the shim, not of the nodelet, so logs keep
//     flowing while the nodelet is down or restarting: the chosen way for a
//     real node. The nodelet's main must call RunLogDriver first thing when
//     IsLogDriver(os.Args[1:]) (tests do it in TestMain).
//   - Pipes (LogDriver empty): the nodelet reads the container's FIFOs
//     itself and writes the file. Output written while the nodelet is down
//     stays in the pipe (64 KiB) and then blocks the container's writes; a
//     restarted nodelet does not reattach. For tests and tools only.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/runtime/v2/logging"
	"github.com/containerd/containerd/v2/pkg/cio"
)

// LogDriverArg is the first argument with which the shim starts the log
// driver; the second is the log file's path.
const LogDriverArg = "nodelet-cri-log"

// maxLogLine is the longest line written as one entry; longer lines are
// split into partial (P) entries, as containerd's CRI plugin does at 16 KiB.
const maxLogLine = 16 * 1024

const criTimeFormat = "2006-01-02T15:04:05.999999999Z07:00"

// ContainerLogPath is the CRI log file of a container instance:
// <root>/<namespace>_<pod>_<uid>/<container>/<attempt>.log.
func ContainerLogPath(root, namespace, pod, uid, container string, attempt uint32) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", namespace, pod, uid), container, fmt.Sprintf("%d.log", attempt))
}

// criLog serializes the entries of a container's two streams into one file.
type criLog struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// stream returns a writer that turns the bytes of one stream ("stdout" or
// "stderr") into CRI entries. Close flushes an unterminated last line.
func (l *criLog) stream(name string) *criStream {
	return &criStream{log: l, name: name}
}

func (l *criLog) entry(stream string, tag byte, line []byte) error {
	var b bytes.Buffer
	b.Grow(len(line) + 48)
	b.WriteString(l.now().UTC().Format(criTimeFormat))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteByte(tag)
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b.Bytes())
	return err
}

type criStream struct {
	mu      sync.Mutex
	log     *criLog
	name    string
	pending []byte // an unterminated line
}

func (s *criStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.pending = append(s.pending, p...)
			break
		}
		line := append(s.pending, p[:i]...)
		s.pending = s.pending[:0]
		p = p[i+1:]
		if err := s.emit(line, 'F'); err != nil {
			return n - len(p), err
		}
	}
	for len(s.pending) >= maxLogLine {
		if err := s.log.entry(s.name, 'P', s.pending[:maxLogLine]); err != nil {
			return n, err
		}
		s.pending = append(s.pending[:0], s.pending[maxLogLine:]...)
	}
	return n, nil
}

// emit writes a whole line, split into partial entries when too long.
func (s *criStream) emit(line []byte, last byte) error {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	for len(line) > maxLogLine {
		if err := s.log.entry(s.name, 'P', line[:maxLogLine]); err != nil {
			return err
		}
		line = line[maxLogLine:]
	}
	return s.log.entry(s.name, last, line)
}

// Close writes what is left of an unterminated last line.
func (s *criStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	err := s.emit(s.pending, 'F')
	s.pending = nil
	return err
}

// openLogFile creates the log file's directory and opens it for appending.
func openLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// IsLogDriver tells whether the program was started as the log driver
// (args without the program name).
func IsLogDriver(args []string) bool {
	return len(args) == 2 && args[0] == LogDriverArg
}

// RunLogDriver is the log driver's main: it copies the container's stdout
// and stderr (fds 3 and 4 from the shim) into the CRI log file named by
// args[1] until both close, then exits the process.
func RunLogDriver(args []string) {
	logging.Run(func(ctx context.Context, cfg *logging.Config, ready func() error) error {
		if !IsLogDriver(args) {
			return fmt.Errorf("log driver: unexpected arguments %q", args)
		}
		f, err := openLogFile(args[1])
		if err != nil {
			ready()
			return fmt.Errorf("log driver for %s: %w", cfg.ID, err)
		}
		defer f.Close()
		if err := ready(); err != nil {
			return fmt.Errorf("log driver for %s: signal ready: %w", cfg.ID, err)
		}
		return copyStreams(&criLog{w: f, now: time.Now}, cfg.Stdout, cfg.Stderr)
	})
}

// copyStreams copies both streams into l until each reaches EOF.
func copyStreams(l *criLog, stdout, stderr io.Reader) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, src := range []struct {
		name string
		r    io.Reader
	}{{"stdout", stdout}, {"stderr", stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := l.stream(src.name)
			_, err := io.Copy(s, src.r)
			if cerr := s.Close(); err == nil {
				err = cerr
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("copy container output: %w", err)
		}
	}
	return nil
}

// logCreator returns the IO of a container's task: the log driver, or
// FIFOs copied by this process into the log file.
func (c *Containerd) logCreator(id, logPath string) (cio.Creator, *pipeLog, error) {
	if c.cfg.LogDriver != "" {
		return cio.BinaryIO(c.cfg.LogDriver, map[string]string{LogDriverArg: logPath}), nil, nil
	}
	f, err := openLogFile(logPath)
	if err != nil {
		return nil, nil, err
	}
	l := &criLog{w: f, now: time.Now}
	pl := &pipeLog{file: f, streams: []*criStream{l.stream("stdout"), l.stream("stderr")}}
	opts := []cio.Opt{cio.WithStreams(nil, pl.streams[0], pl.streams[1])}
	if c.cfg.StateDir != "" {
		opts = append(opts, cio.WithFIFODir(c.cfg.StateDir+"/fifo"))
	}
	return cio.NewCreator(opts...), pl, nil
}

// pipeLog is the in-process copy of a container's output to its log file.
type pipeLog struct {
	io      cio.IO
	file    io.Closer
	streams []*criStream
}

// pipeDrainTimeout bounds the wait for a container's output to be copied
// once its task is gone (a child holding the pipe open would block it).
const pipeDrainTimeout = 2 * time.Second

// Close waits (briefly) for the copy to drain, flushes unterminated lines
// and closes the file and FIFOs.
func (p *pipeLog) Close() error {
	if p.io != nil {
		done := make(chan struct{})
		go func() { p.io.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(pipeDrainTimeout):
			p.io.Cancel()
		}
		p.io.Close()
	}
	for _, s := range p.streams {
		s.Close()
	}
	return p.file.Close()
}

func (c *Containerd) closeLog(id string) {
	c.mu.Lock()
	cl := c.closers[id]
	delete(c.closers, id)
	delete(c.attached, id)
	c.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}
