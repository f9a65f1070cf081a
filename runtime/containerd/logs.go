package containerd

// Container logs are CRI log files (package containerlogs) that kubectl
// logs reads through the nodelet. Who writes them:
//
//   - The node's container logger (Config.Logs set, the way of a real
//     node): one process for the whole node reads each container's stdout
//     and stderr FIFOs and writes the rotated file. It outlives the
//     nodelet, so output keeps flowing while the nodelet is down or
//     restarting, and costs no process per container.
//   - This process (Config.Logs nil; tests and tools): it reads the FIFOs
//     itself. Output written while it is down waits in the pipe (64 KiB)
//     and then blocks the container's writes; a restarted nodelet does not
//     reattach.
//
// Interactive containers (stdin or a tty) are always served by this
// process: see attach.go.

import (
	"context"
	"io"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/nodelet/nodelet/containerlogs"
)

// ContainerLogger is the node's log process, as the runtime uses it
// (containerlogs.Client).
type ContainerLogger interface {
	// Add registers a container's log file and returns the FIFOs its task
	// writes stdout and stderr into.
	Add(ctx context.Context, id, logPath string) (stdout, stderr string, err error)
	// Remove ends a container's logging once its output is drained.
	Remove(ctx context.Context, id string) error
}

// logCreator returns the IO of a container's task: FIFOs the node's
// logger reads, or FIFOs copied by this process into the log file.
func (c *Runtime) logCreator(ctx context.Context, id, logPath string) (cio.Creator, *pipeLog, error) {
	if c.cfg.Logs != nil {
		stdout, stderr, err := c.cfg.Logs.Add(ctx, id, logPath)
		if err != nil {
			return nil, nil, err
		}
		cfg := cio.Config{Stdout: stdout, Stderr: stderr}
		return func(string) (cio.IO, error) { return loggerIO{cfg}, nil }, nil, nil
	}
	f, err := containerlogs.OpenRotating(logPath, c.cfg.LogRotation)
	if err != nil {
		return nil, nil, err
	}
	l := containerlogs.NewCRI(f, nil)
	pl := &pipeLog{file: f, streams: []*containerlogs.Stream{l.Stream("stdout"), l.Stream("stderr")}}
	opts := []cio.Opt{cio.WithStreams(nil, pl.streams[0], pl.streams[1])}
	if c.cfg.StateDir != "" {
		opts = append(opts, cio.WithFIFODir(c.cfg.StateDir+"/fifo"))
	}
	return cio.NewCreator(opts...), pl, nil
}

// loggerIO hands the shim the FIFOs the node's logger reads; this process
// holds nothing of them.
type loggerIO struct{ cfg cio.Config }

func (l loggerIO) Config() cio.Config { return l.cfg }
func (loggerIO) Cancel()              {}
func (loggerIO) Wait()                {}
func (loggerIO) Close() error         { return nil }

// pipeLog is the in-process copy of a container's output to its log file.
type pipeLog struct {
	io      cio.IO
	file    io.Closer
	streams []*containerlogs.Stream
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

func (c *Runtime) closeLog(id string) {
	c.mu.Lock()
	cl := c.closers[id]
	delete(c.closers, id)
	delete(c.attached, id)
	c.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

// removeLogger ends the node logger's registration of a container being
// removed (its output ended with its task; this only frees a registration
// whose task never started).
func (c *Runtime) removeLogger(ctx context.Context, id string) {
	if c.cfg.Logs == nil {
		return
	}
	if err := c.cfg.Logs.Remove(ctx, id); err != nil {
		c.log.Warn("container logger", "id", id, "err", err)
	}
}
