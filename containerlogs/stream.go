package containerlogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/fifo"
)

// drainTimeout bounds the wait for a removed container's output to be
// copied (a child process holding the pipe open would block it forever).
const drainTimeout = 2 * time.Second

// copyBufferSize is each stream's read buffer: small, since the Logger
// holds two per container.
const copyBufferSize = 8 * 1024

// stream is one container being logged.
type stream struct {
	reg      registration
	file     *RotatingFile
	in       [2]io.ReadCloser // stdout, stderr
	detached atomic.Bool      // closed by a stopping Logger: keep the registration
	closing  atomic.Bool      // closed early: read errors are expected
	once     sync.Once
	done     chan struct{} // the copy ended
	finished chan struct{} // and the Logger forgot the stream
}

// openStream opens a container's FIFOs and log file. A new container's
// FIFOs are created and opened in the background (the open completes when
// the shim opens their write ends); a resumed container's are opened at
// once and read until their writers close (EOF at once if the shim is
// already gone).
func openStream(reg registration, resume bool) (*stream, error) {
	s := &stream{reg: reg, done: make(chan struct{}), finished: make(chan struct{})}
	for i, path := range []string{reg.Stdout, reg.Stderr} {
		var r io.ReadCloser
		var err error
		if resume {
			r, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		} else {
			r, err = fifo.OpenFifo(context.Background(), path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600)
		}
		if err != nil {
			s.closeInputs()
			return nil, fmt.Errorf("open fifo: %w", err)
		}
		s.in[i] = r
	}
	f, err := OpenRotating(reg.LogPath, reg.Rotation)
	if err != nil {
		s.closeInputs()
		return nil, err
	}
	s.file = f
	return s, nil
}

func (s *stream) closeInputs() {
	for _, r := range s.in {
		if r != nil {
			r.Close()
		}
	}
}

// close ends the copy early; detach keeps the registration for the next
// Logger.
func (s *stream) close(detach bool) {
	s.once.Do(func() {
		s.detached.Store(detach)
		s.closing.Store(true)
		s.closeInputs()
	})
}

// copy copies both streams into the log until each ends, then flushes and
// closes the file. It reports whether the stream was detached.
func (s *stream) copy(log *slog.Logger) bool {
	defer close(s.done)
	cri := NewCRI(s.file, nil)
	var wg sync.WaitGroup
	for i, name := range []string{"stdout", "stderr"} {
		wg.Go(func() {
			out := cri.Stream(name)
			buf := make([]byte, copyBufferSize)
			// Hide WriterTo: os.File's would copy with its own 32 KiB buffer.
			_, err := io.CopyBuffer(out, struct{ io.Reader }{s.in[i]}, buf)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil && !s.closing.Load() && !errors.Is(err, os.ErrClosed) {
				log.Warn("copy container output", "id", s.reg.ID, "stream", name, "err", err)
			}
		})
	}
	wg.Wait()
	s.close(false)
	if err := s.file.Close(); err != nil {
		log.Warn("close container log", "id", s.reg.ID, "err", err)
	}
	return s.detached.Load()
}
