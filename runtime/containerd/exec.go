package containerd

// Exec and port-forward, what the nodelet's API serves for `kubectl exec`
// and `kubectl port-forward`. Exec runs an extra process in a running
// container's task with the container's own process settings; its output is
// copied through FIFOs, and it is deleted from containerd before Exec
// returns. PortForward dials the port on the pod's loopback from inside the
// network namespace of the pod's running sandbox, as containerd's CRI
// plugin does.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	goruntime "runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netns"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// Exec runs cmd in the running container id, with the environment, working
// directory, user and capabilities of the container's own process. It
// copies stdin (may be nil) to the command and the command's output to
// stdout and stderr (either may be nil; with tty only stdout is used).
// Sizes received from resize (may be nil) resize the terminal.
//
// It returns when the process has exited and its output has been copied:
// nil for exit code 0, an *ExitError (not wrapped) for another code, an
// error wrapping ErrContainerNotRunning when the container has no running
// task. Cancelling ctx kills the process. The exec process is deleted from
// containerd and stdout and stderr are closed before Exec returns.
//
// Without tty, the end of stdin closes the command's stdin (so `cat`
// ends). With tty it does not: at a terminal the end of input is ^D, and
// closing the terminal's input would hang it up and lose its last output.
// stdin is never closed by Exec: a Read of it still blocked when Exec
// returns ends when the caller closes it.
func (c *Runtime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.WriteCloser, tty bool, resize <-chan runtime.TerminalSize) (retErr error) {
	defer closeWriters(stdout, stderr)
	if len(cmd) == 0 {
		return fmt.Errorf("exec in container %s: empty command: %w", id, errdefs.ErrInvalidArgument)
	}
	ctx = c.nsCtx(ctx)
	task, spec, err := c.runningTask(ctx, id)
	if err != nil {
		return fmt.Errorf("exec in container %s: %w", id, err)
	}
	if spec.Process == nil {
		return fmt.Errorf("exec in container %s: its spec has no process", id)
	}
	pspec := *spec.Process
	pspec.Args, pspec.Terminal = cmd, tty
	pspec.ConsoleSize = nil

	in := newExecStdin(stdin, !tty)
	defer in.finish()
	proc, err := task.Exec(ctx, "exec-"+newID()[:32], &pspec, c.execCreator(in.reader(), stdout, stderr, tty))
	if err != nil {
		return fmt.Errorf("exec in container %s: create process: %w", id, err)
	}
	defer func() {
		in.finish() // no CloseIO once the process is being deleted
		if err := deleteExec(ctx, proc); err != nil {
			c.log.Warn("delete exec process", "container", id, "exec", proc.ID(), "err", err)
			if retErr == nil {
				retErr = fmt.Errorf("exec in container %s: %w", id, err)
			}
		}
	}()
	code, err := c.runExec(ctx, proc, in, tty, resize)
	if err != nil {
		return fmt.Errorf("exec in container %s: %w", id, err)
	}
	if code != 0 {
		return &runtime.ExitError{Code: int(code)}
	}
	return nil
}

// runningTask loads a container whose task is running, and its spec.
func (c *Runtime) runningTask(ctx context.Context, id string) (ctrdclient.Task, *specs.Spec, error) {
	cont, err := c.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, nil, fmt.Errorf("%w: %w", runtime.ErrContainerNotRunning, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load container: %w", err)
	}
	task, err := cont.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil, nil, fmt.Errorf("%w: no task", runtime.ErrContainerNotRunning)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load task: %w", err)
	}
	st, err := task.Status(ctx)
	if errdefs.IsNotFound(err) {
		return nil, nil, fmt.Errorf("%w: no task", runtime.ErrContainerNotRunning)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("task status: %w", err)
	}
	if st.Status != ctrdclient.Running {
		return nil, nil, fmt.Errorf("%w: task is %s", runtime.ErrContainerNotRunning, st.Status)
	}
	spec, err := cont.Spec(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load spec: %w", err)
	}
	return task, spec, nil
}

// execCreator copies an exec process's IO through FIFOs in the state
// directory (containerd's default FIFO directory when unset).
func (c *Runtime) execCreator(stdin io.Reader, stdout, stderr io.Writer, tty bool) cio.Creator {
	if tty {
		stderr = nil
	}
	opts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr)}
	if tty {
		opts = append(opts, cio.WithTerminal)
	}
	if c.cfg.StateDir != "" {
		opts = append(opts, cio.WithFIFODir(c.cfg.StateDir+"/fifo"))
	}
	return cio.NewCreator(opts...)
}

// runExec starts a created exec process and returns its exit code once it
// has exited and its output has been copied. Cancelling ctx kills it.
func (c *Runtime) runExec(ctx context.Context, proc ctrdclient.Process, in *execStdin, tty bool, resize <-chan runtime.TerminalSize) (uint32, error) {
	// The wait outlives ctx, to see the process die after the kill.
	waitCtx, cancelWait := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWait()
	exited, err := proc.Wait(waitCtx)
	if err != nil {
		return 0, fmt.Errorf("wait for process: %w", err)
	}
	if err := proc.Start(ctx); err != nil {
		return 0, fmt.Errorf("start process: %w", err)
	}
	in.started(ctx, proc)
	stopResize := c.resizeTerminal(ctx, proc, tty, resize)
	defer stopResize()

	select {
	case <-ctx.Done():
		killCtx, cancel := cleanupCtx(ctx)
		defer cancel()
		if err := proc.Kill(killCtx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
			return 0, fmt.Errorf("kill process: %w (after %w)", err, ctx.Err())
		}
		select {
		case <-exited:
		case <-killCtx.Done():
		}
		return 0, ctx.Err()
	case st := <-exited:
		code, _, err := st.Result()
		if err != nil {
			return 0, fmt.Errorf("wait for process: %w", err)
		}
		// The exit can be seen before the last output is read from the
		// FIFOs; the copy ends when the FIFOs' writers are gone.
		copied := make(chan struct{})
		go func() { proc.IO().Wait(); close(copied) }()
		select {
		case <-copied:
		case <-ctx.Done():
			return 0, fmt.Errorf("copy output: %w", ctx.Err())
		}
		return code, nil
	}
}

// resizeTerminal applies the sizes received from resize to the process's
// terminal until the returned stop is called. Without tty the sizes are
// read and dropped, so that the sender never blocks.
func (c *Runtime) resizeTerminal(ctx context.Context, proc ctrdclient.Process, tty bool, resize <-chan runtime.TerminalSize) (stop func()) {
	if resize == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case size, ok := <-resize:
				if !ok {
					return
				}
				if !tty || size.Width == 0 || size.Height == 0 {
					continue
				}
				if err := proc.Resize(ctx, uint32(size.Width), uint32(size.Height)); err != nil && ctx.Err() == nil {
					c.log.Debug("resize exec terminal", "exec", proc.ID(), "err", err)
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// deleteExec kills (if still running) and deletes an exec process, which
// also closes its IO and removes its FIFOs.
func deleteExec(ctx context.Context, proc ctrdclient.Process) error {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := proc.Delete(ctx, ctrdclient.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete exec process %s: %w", proc.ID(), err)
	}
	return nil
}

func closeWriters(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			w.Close()
		}
	}
}

// execStdin passes an exec's stdin to containerd's copy and, when
// closeOnEOF, closes the process's stdin (CloseIO) at its end. The shim
// holds the stdin FIFO open itself, so the end of the copy alone is not
// seen by the process. The copy starts before the process does, and
// CloseIO before the start would be lost: it waits for the start.
type execStdin struct {
	r          io.Reader
	closeOnEOF bool
	start      chan struct{} // closed once the process started
	done       chan struct{} // closed when Exec is done with the process
	finishOnce sync.Once
	eofOnce    sync.Once
	ctx        context.Context    // set before start is closed
	proc       ctrdclient.Process // set before start is closed
}

func newExecStdin(r io.Reader, closeOnEOF bool) *execStdin {
	return &execStdin{r: r, closeOnEOF: closeOnEOF, start: make(chan struct{}), done: make(chan struct{})}
}

// reader is what containerd copies from: nil without stdin (no FIFO).
func (s *execStdin) reader() io.Reader {
	if s.r == nil {
		return nil
	}
	return s
}

func (s *execStdin) started(ctx context.Context, proc ctrdclient.Process) {
	s.ctx, s.proc = ctx, proc
	close(s.start)
}

func (s *execStdin) finish() { s.finishOnce.Do(func() { close(s.done) }) }

func (s *execStdin) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && s.closeOnEOF {
		s.eofOnce.Do(s.closeIO)
	}
	return n, err
}

// closeIO closes the process's stdin once it has started, unless Exec is
// done with it. Data of the last Read is not lost: the copy's own FIFO
// writer stays open until it has written it.
func (s *execStdin) closeIO() {
	select {
	case <-s.start:
	case <-s.done:
		return
	}
	select {
	case <-s.done:
	default:
		s.proc.CloseIO(s.ctx, ctrdclient.WithStdinCloser)
	}
}

// PortForward connects stream to TCP port on 127.0.0.1 in the network
// namespace of the pod's running sandbox (the node's own for a
// host-network pod), and copies both ways: the end of stream half-closes
// the TCP connection, the end of the TCP connection half-closes stream
// when it has CloseWrite (else closes it). It returns when both directions
// are done or ctx ends, and closes stream before returning.
func (c *Runtime) PortForward(ctx context.Context, podUID types.UID, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	ctx = c.nsCtx(ctx)
	sb, err := c.runningSandbox(ctx, podUID)
	if err != nil {
		return fmt.Errorf("port-forward to port %d of pod %s: %w", port, podUID, err)
	}
	wrap := func(err error) error {
		return fmt.Errorf("port-forward to port %d of pod %s/%s (%s): %w", port, sb.namespace, sb.name, podUID, err)
	}
	if port <= 0 || port > 65535 {
		return wrap(fmt.Errorf("invalid port: %w", errdefs.ErrInvalidArgument))
	}
	conn, err := dialInNetNS(ctx, sb.netns, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return wrap(err)
	}
	defer conn.Close()
	if err := copyBothWays(ctx, conn, stream); err != nil {
		return wrap(err)
	}
	return nil
}

// podSandbox is what PortForward needs of a pod's sandbox.
type podSandbox struct {
	netns, namespace, name string
}

// runningSandbox finds the pod's newest sandbox whose task is running.
func (c *Runtime) runningSandbox(ctx context.Context, uid types.UID) (podSandbox, error) {
	filter := fmt.Sprintf("labels.%q==%q,labels.%q==%q", runtime.LabelPodUID, string(uid), runtime.LabelKind, runtime.KindSandbox)
	list, err := c.client.ContainerService().List(ctx, filter)
	if err != nil {
		return podSandbox{}, fmt.Errorf("list sandboxes: %w", err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
	for _, ct := range list {
		resp, err := c.client.TaskService().Get(ctx, &tasksapi.GetRequest{ContainerID: ct.ID})
		if err != nil {
			if err = errgrpc.ToNative(err); errdefs.IsNotFound(err) {
				continue
			}
			return podSandbox{}, fmt.Errorf("task of sandbox %s: %w", ct.ID, err)
		}
		if resp.Process != nil && resp.Process.Status == tasktypes.Status_RUNNING {
			l := ct.Labels
			return podSandbox{netns: l[runtime.LabelNetNSPath], namespace: l[runtime.LabelPodNamespace], name: l[runtime.LabelPodName]}, nil
		}
	}
	return podSandbox{}, fmt.Errorf("no running sandbox: %w", runtime.ErrSandboxNotRunning)
}

// dialInNetNS dials addr over TCP from inside the network namespace at
// path (the caller's own when path is empty). The socket keeps the
// namespace it was made in. The dial runs on a goroutine of its own whose
// OS thread enters the namespace; if the thread cannot return to its own
// namespace it stays locked, and Go ends it with the goroutine.
func dialInNetNS(ctx context.Context, path, addr string) (*net.TCPConn, error) {
	var d net.Dialer
	if path == "" {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return conn.(*net.TCPConn), nil
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	type result struct {
		conn net.Conn
		err  error
	}
	res := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			goruntime.UnlockOSThread()
			res <- result{err: fmt.Errorf("get own network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			goruntime.UnlockOSThread()
			res <- result{err: fmt.Errorf("enter network namespace %s: %w", path, err)}
			return
		}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if rerr := netns.Set(orig); rerr != nil {
			// The thread stays locked: Go discards it when we return.
			if conn != nil {
				conn.Close()
			}
			res <- result{err: fmt.Errorf("return from network namespace %s: %w", path, rerr)}
			return
		}
		goruntime.UnlockOSThread()
		res <- result{conn: conn, err: err}
	}()
	r := <-res
	if r.err != nil {
		return nil, r.err
	}
	return r.conn.(*net.TCPConn), nil
}

// copyBothWays copies between conn and stream until both directions are
// done or ctx ends; see PortForward. Errors caused by closing a side
// itself are not reported.
func copyBothWays(ctx context.Context, conn *net.TCPConn, stream io.ReadWriteCloser) error {
	upDone := make(chan error, 1)   // stream to conn
	downDone := make(chan error, 1) // conn to stream
	go func() {
		_, err := io.Copy(conn, stream)
		if cerr := conn.CloseWrite(); err == nil && cerr != nil {
			err = fmt.Errorf("half-close connection: %w", cerr)
		}
		upDone <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		downDone <- err
	}()
	up, down := upDone, downDone // nil once received from
	var errs []error
	streamClosed := false
	for up != nil || down != nil {
		select {
		case err := <-up:
			up = nil
			if err != nil && !streamClosed {
				errs = append(errs, fmt.Errorf("copy to port: %w", err))
			}
		case err := <-down:
			down = nil
			if err != nil {
				errs = append(errs, fmt.Errorf("copy from port: %w", err))
			}
			if up == nil {
				break
			}
			if cw, ok := stream.(interface{ CloseWrite() error }); ok && err == nil {
				cw.CloseWrite()
				break
			}
			// Without half-close, the end of the port's output ends
			// the forward: closing stream also ends the copy to it.
			streamClosed = true
			stream.Close()
		case <-ctx.Done():
			conn.Close()
			stream.Close()
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// ExecSync runs cmd in the running container id without stdin and returns
// its combined output and exit code, as CRI's ExecSync: a non-zero exit
// is a result (err nil), err only says the command could not run.
func (c *Runtime) ExecSync(ctx context.Context, id string, cmd []string) (output []byte, exitCode int, err error) {
	var out syncOutput
	err = c.Exec(ctx, id, cmd, nil, &out, &out, false, nil)
	var exit *runtime.ExitError
	if errors.As(err, &exit) {
		return out.bytes(), exit.Code, nil
	}
	return out.bytes(), 0, err
}

// syncOutput collects both streams of an exec (written from two
// goroutines) in one buffer; Close is a no-op.
type syncOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *syncOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *syncOutput) Close() error { return nil }

func (o *syncOutput) bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf.Bytes())
}
