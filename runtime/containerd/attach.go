package containerd

// Interactive containers (stdin or tty) cannot use the log driver, which
// only takes stdout and stderr: their FIFOs are served by this process.
// It copies their output into the CRI log and to the sessions attached at
// the moment (kubectl attach, kubectl run -it), and feeds their stdin from
// those sessions. After a nodelet restart, ReattachInteractive reopens
// the FIFOs of the containers still running; what they wrote meanwhile
// waits in the pipe (64 KiB, then their writes block until the nodelet
// is back).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/containerlogs"
	"github.com/nodelet/nodelet/runtime"
)

func interactiveFlags(ctr *corev1.Container) string {
	var f []string
	if ctr.Stdin {
		f = append(f, "stdin")
	}
	if ctr.Stdin && ctr.StdinOnce {
		f = append(f, "once")
	}
	if ctr.TTY {
		f = append(f, "tty")
	}
	return strings.Join(f, ",")
}

// attachIO is one interactive container's streams.
type attachIO struct {
	tty, stdin, once bool
	log              *pipeLog
	stdout, stderr   *fanout
	stdinR           *io.PipeReader
	stdinW           *io.PipeWriter
	stdinOnce        sync.Once
	done             chan struct{} // closed when the container's output ends
	doneOnce         sync.Once
}

func newAttachIO(logPath, flags string, rot containerlogs.Rotation) (*attachIO, error) {
	f, err := containerlogs.OpenRotating(logPath, rot)
	if err != nil {
		return nil, err
	}
	l := containerlogs.NewCRI(f, nil)
	a := &attachIO{
		tty: strings.Contains(flags, "tty"), stdin: strings.Contains(flags, "stdin"), once: strings.Contains(flags, "once"),
		log:  &pipeLog{file: f, streams: []*containerlogs.Stream{l.Stream("stdout"), l.Stream("stderr")}},
		done: make(chan struct{}),
	}
	a.stdout = &fanout{log: a.log.streams[0], subs: map[*subscriber]bool{}}
	a.stderr = &fanout{log: a.log.streams[1], subs: map[*subscriber]bool{}}
	if a.stdin {
		a.stdinR, a.stdinW = io.Pipe()
	}
	return a, nil
}

// streams are the cio options serving the container's FIFOs.
func (a *attachIO) streams(fifoDir string) []cio.Opt {
	var in io.Reader
	if a.stdin {
		in = a.stdinR
	}
	opts := []cio.Opt{cio.WithStreams(in, a.stdout, a.stderr)}
	if a.tty {
		opts = append(opts, cio.WithTerminal)
	}
	if fifoDir != "" {
		opts = append(opts, cio.WithFIFODir(fifoDir))
	}
	return opts
}

func (a *attachIO) closeStdin() {
	a.stdinOnce.Do(func() {
		if a.stdinW != nil {
			a.stdinW.Close()
		}
	})
}

// Close ends the container's streams: stdin closes, the output is
// drained into the log and the attached sessions end.
func (a *attachIO) Close() error {
	a.closeStdin()
	err := a.log.Close()
	a.doneOnce.Do(func() { close(a.done) })
	return err
}

// detach leaves a running container's FIFOs in place for a later
// ReattachInteractive: it only flushes the log and ends the sessions. The
// container's stdin sees its end when this process exits (its writer goes).
func (a *attachIO) detach() {
	for _, s := range a.log.streams {
		s.Close()
	}
	a.log.file.Close()
	a.doneOnce.Do(func() { close(a.done) })
}

// fanout writes a stream into the log and to every attached session.
type fanout struct {
	mu   sync.Mutex
	log  io.Writer
	subs map[*subscriber]bool
}

type subscriber struct {
	w      io.Writer
	failed chan struct{}
}

func (f *fanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		if _, err := s.w.Write(p); err != nil {
			delete(f.subs, s) // a session that went away
			close(s.failed)
		}
	}
	return f.log.Write(p)
}

func (f *fanout) subscribe(w io.Writer) (*subscriber, func()) {
	s := &subscriber{w: w, failed: make(chan struct{})}
	f.mu.Lock()
	f.subs[s] = true
	f.mu.Unlock()
	return s, func() {
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
	}
}

// interactiveCreator prepares an interactive container's IO (nil, nil
// for any other container).
func (c *Runtime) interactiveCreator(ctr *corev1.Container, logPath string) (cio.Creator, *attachIO, error) {
	flags := interactiveFlags(ctr)
	if flags == "" {
		return nil, nil, nil
	}
	a, err := newAttachIO(logPath, flags, c.cfg.LogRotation)
	if err != nil {
		return nil, nil, err
	}
	return cio.NewCreator(a.streams(c.fifoDir())...), a, nil
}

func (c *Runtime) fifoDir() string {
	if c.cfg.StateDir == "" {
		return ""
	}
	return c.cfg.StateDir + "/fifo"
}

// registerInteractive makes a running interactive container attachable.
func (c *Runtime) registerInteractive(id string, a *attachIO, taskIO cio.IO) {
	a.log.io = taskIO
	c.mu.Lock()
	c.closers[id] = a
	c.attached[id] = a
	c.mu.Unlock()
}

// ReattachInteractive reopens the FIFOs of the interactive containers
// still running, after a restart of this process.
func (c *Runtime) ReattachInteractive(ctx context.Context) error {
	ctx = c.nsCtx(ctx)
	list, err := c.client.Containers(ctx, fmt.Sprintf("labels.%q", runtime.LabelInteractive))
	if err != nil {
		return fmt.Errorf("list interactive containers: %w", err)
	}
	var errs []error
	for _, cont := range list {
		if err := c.reattach(ctx, cont); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Runtime) reattach(ctx context.Context, cont ctrdclient.Container) error {
	c.mu.Lock()
	_, known := c.attached[cont.ID()]
	c.mu.Unlock()
	if known {
		return nil
	}
	labels, err := cont.Labels(ctx)
	if err != nil {
		return fmt.Errorf("reattach %s: %w", cont.ID(), err)
	}
	a, err := newAttachIO(labels[runtime.LabelLogPath], labels[runtime.LabelInteractive], c.cfg.LogRotation)
	if err != nil {
		return fmt.Errorf("reattach %s: %w", cont.ID(), err)
	}
	task, err := cont.Task(ctx, cio.NewAttach(a.streams("")...))
	if errdefs.IsNotFound(err) {
		a.log.Close()
		return nil // not running: nothing to attach to
	}
	if err != nil {
		a.log.Close()
		return fmt.Errorf("reattach %s: %w", cont.ID(), err)
	}
	if st, err := task.Status(ctx); err != nil || st.Status != ctrdclient.Running {
		a.log.io = task.IO()
		a.Close()
		return nil
	}
	c.registerInteractive(cont.ID(), a, task.IO())
	return nil
}

// Attach connects to a running interactive container: stdin (when the
// container has one and stdin is not nil) goes to the container, and what
// it writes from now on goes to stdout and stderr (with a tty, stdout
// only). Sizes from resize resize its terminal. It returns when the
// container's output ends, stdout fails or ctx ends; with stdinOnce, the
// end of this session's stdin closes the container's stdin. Containers
// without stdin or tty give ErrNotAttachable.
func (c *Runtime) Attach(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer, resize <-chan runtime.TerminalSize) error {
	c.mu.Lock()
	a := c.attached[id]
	c.mu.Unlock()
	if a == nil {
		return fmt.Errorf("attach to container %s: %w", id, runtime.ErrNotAttachable)
	}
	var failed []chan struct{}
	if stdout != nil {
		s, unsub := a.stdout.subscribe(stdout)
		defer unsub()
		failed = append(failed, s.failed)
	}
	if stderr != nil && !a.tty {
		s, unsub := a.stderr.subscribe(stderr)
		defer unsub()
		failed = append(failed, s.failed)
	}
	if stdin != nil && a.stdin {
		go func() {
			io.Copy(a.stdinW, stdin)
			if a.once {
				a.closeStdin()
			}
		}()
	}
	if a.tty && resize != nil {
		go c.resizeTask(ctx, id, resize)
	}
	fail := make(chan struct{})
	var failOnce sync.Once
	for _, f := range failed {
		go func() {
			select {
			case <-f:
				failOnce.Do(func() { close(fail) })
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-a.done:
	case <-ctx.Done():
	case <-fail:
	}
	return nil
}

// resizeTask applies terminal sizes to a container's task until resize
// closes or ctx ends.
func (c *Runtime) resizeTask(ctx context.Context, id string, resize <-chan runtime.TerminalSize) {
	nctx := c.nsCtx(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-resize:
			if !ok {
				return
			}
			if sz.Width == 0 || sz.Height == 0 {
				continue
			}
			cont, err := c.client.LoadContainer(nctx, id)
			if err != nil {
				return
			}
			task, err := cont.Task(nctx, nil)
			if err != nil {
				return
			}
			if err := task.Resize(nctx, uint32(sz.Width), uint32(sz.Height)); err != nil {
				c.log.Debug("resize container terminal", "container", id, "err", err)
			}
		}
	}
}
