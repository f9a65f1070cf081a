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
	cri      *CRI
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
// already gone), even when its log file cannot be opened.
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
	if err != nil && resume {
		// The container runs and writes: read it anyway, and open its
		// log with the first write that can (until then its output is
		// dropped and counted, the error in its Drops).
		f, err = unopenedRotating(reg.LogPath, reg.Rotation), nil
	}
	if err != nil {
		s.closeInputs()
		return nil, err
	}
	s.file = f
	s.cri = NewCRI(f, nil)
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
// closes the file. It reports whether the stream was detached. The FIFOs
// are read for as long as the container writes, whatever the file does:
// what it refuses is dropped (CRI), so the container never blocks on a
// full pipe.
func (s *stream) copy(log *slog.Logger) bool {
	defer close(s.done)
	log = log.With("id", s.reg.ID, "path", s.reg.LogPath)
	s.cri.OnChange(func(d Drops) {
		if d.Dropping {
			log.Warn("dropping container output: its log refuses writes", "err", d.Err)
		} else {
			log.Info("container log writable again", "droppedBytes", d.Bytes, "droppedLines", d.Lines)
		}
	})
	var wg sync.WaitGroup
	for i, name := range []string{"stdout", "stderr"} {
		wg.Go(func() {
			out := s.cri.Stream(name)
			err := drain(s.in[i], out)
			out.Close()
			if err != nil && !s.closing.Load() && !errors.Is(err, os.ErrClosed) {
				log.Warn("read container output", "stream", name, "err", err)
			}
		})
	}
	wg.Wait()
	s.close(false)
	if err := s.file.Close(); err != nil {
		log.Warn("close container log", "err", err)
	}
	return s.detached.Load()
}

// drain reads r into the stream until EOF (nil) or a read error. The
// stream takes everything (dropping what its log refuses), so reading
// never stops early.
func drain(r io.Reader, out *Stream) error {
	buf := make([]byte, copyBufferSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// drops is what the container's log dropped so far.
func (s *stream) drops() Drops { return s.cri.Drops() }
