// Package containerlogs writes containers' output as CRI log files, the
// format kubectl logs reads through the nodelet:
//
//	2016-10-06T00:17:09.669794202Z stdout F a whole line
//	2016-10-06T00:17:09.669794203Z stderr P the first part of a long line
//
// rotated by size and count as upstream's kubelet does (containerLogMaxSize,
// containerLogMaxFiles), and runs the node's one log process: the Logger
// (logger.go) reads every container's stdout and stderr FIFOs, so no
// process per container is needed and output keeps flowing while the
// nodelet is down or restarting. The Client (client.go) is the nodelet's
// side: it starts the Logger when none answers and registers containers.
package containerlogs

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// maxLine is the longest line written as one entry; longer lines are split
// into partial (P) entries, as containerd's CRI plugin does at 16 KiB.
const maxLine = 16 * 1024

const criTimeFormat = "2006-01-02T15:04:05.999999999Z07:00"

// CRI serializes the entries of a container's two streams into one
// writer. Each entry is one Write, so a RotatingFile rotates between
// entries, never inside one.
type CRI struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewCRI writes entries to w; now stamps them (time.Now when nil).
func NewCRI(w io.Writer, now func() time.Time) *CRI {
	if now == nil {
		now = time.Now
	}
	return &CRI{w: w, now: now}
}

// Stream returns a writer that turns the bytes of one stream ("stdout" or
// "stderr") into entries. Its Close flushes an unterminated last line.
func (l *CRI) Stream(name string) *Stream {
	return &Stream{log: l, name: name}
}

func (l *CRI) entry(stream string, tag byte, line []byte) error {
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

// Stream is one stream of a container in CRI entries.
type Stream struct {
	mu      sync.Mutex
	log     *CRI
	name    string
	pending []byte // an unterminated line
}

func (s *Stream) Write(p []byte) (int, error) {
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
	for len(s.pending) >= maxLine {
		if err := s.log.entry(s.name, 'P', s.pending[:maxLine]); err != nil {
			return n, err
		}
		s.pending = append(s.pending[:0], s.pending[maxLine:]...)
	}
	return n, nil
}

// emit writes a whole line, split into partial entries when too long.
func (s *Stream) emit(line []byte, last byte) error {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	for len(line) > maxLine {
		if err := s.log.entry(s.name, 'P', line[:maxLine]); err != nil {
			return err
		}
		line = line[maxLine:]
	}
	return s.log.entry(s.name, last, line)
}

// Close writes what is left of an unterminated last line as a partial
// entry, as containerd's CRI plugin does: readers then show the output
// without a newline it never had (`echo -n DONE` reads back as "DONE").
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	err := s.emit(s.pending, 'P')
	s.pending = nil
	return err
}
