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

// retryInterval is how long a log that refused an entry is left alone:
// entries meanwhile are dropped without a try, so a full disk costs no
// write (nor rotation attempt) per entry.
const retryInterval = time.Second

// CRI serializes the entries of a container's two streams into one
// writer. Each entry is one Write, so a RotatingFile rotates between
// entries, never inside one.
//
// The container never waits on its log: an entry the writer refuses (a
// full disk, a failed rotation) is dropped and counted (Drops), and the
// writer is tried again on the first entry once retryInterval has passed,
// so writing resumes when space returns. Streams never return an error.
type CRI struct {
	mu      sync.Mutex
	w       io.Writer
	now     func() time.Time
	drops   Drops
	retryAt time.Time // while dropping: the first try again
	changed func(Drops)
}

// Drops is what a container's log lost: entries its file refused.
type Drops struct {
	// Bytes and Lines count the container's output dropped: its bytes
	// (without line ends) and its log entries (lines, or parts of lines
	// longer than 16 KiB).
	Bytes uint64 `json:"bytes"`
	Lines uint64 `json:"lines"`
	// Episodes counts the times dropping started after a write (or
	// before the first one); Dropping tells whether it goes on.
	Episodes uint64 `json:"episodes"`
	Dropping bool   `json:"dropping,omitempty"`
	// Err is the last refusal.
	Err string `json:"err,omitempty"`
}

// NewCRI writes entries to w; now stamps them (time.Now when nil).
func NewCRI(w io.Writer, now func() time.Time) *CRI {
	if now == nil {
		now = time.Now
	}
	return &CRI{w: w, now: now}
}

// OnChange calls f with the counts when dropping starts and when it ends
// (not under the CRI's lock; f must not block).
func (l *CRI) OnChange(f func(Drops)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changed = f
}

// Drops returns what was dropped so far.
func (l *CRI) Drops() Drops {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.drops
}

// Stream returns a writer that turns the bytes of one stream ("stdout" or
// "stderr") into entries. Its Close flushes an unterminated last line.
func (l *CRI) Stream(name string) *Stream {
	return &Stream{log: l, name: name}
}

// entry writes one entry, after an empty F entry ending the stream's
// line when endLine is set; false when it was dropped.
func (l *CRI) entry(stream string, tag byte, line []byte, endLine bool) bool {
	now := l.now()
	if l.skip(now, len(line)) {
		return false
	}
	var b bytes.Buffer
	b.Grow(len(line) + 96)
	if endLine {
		appendEntry(&b, now, stream, 'F', nil)
	}
	appendEntry(&b, now, stream, tag, line)
	l.mu.Lock()
	ok, changed := l.write(now, b.Bytes(), len(line))
	d, f := l.drops, l.changed
	l.mu.Unlock()
	if changed && f != nil {
		f(d)
	}
	return ok
}

// skip drops an entry without formatting it while the writer is left
// alone.
func (l *CRI) skip(now time.Time, content int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drops.Dropping && now.Before(l.retryAt) {
		l.drop(content)
		return true
	}
	return false
}

// write writes one entry or drops it; changed tells whether dropping
// started or ended. Callers hold l.mu.
func (l *CRI) write(now time.Time, b []byte, content int) (ok, changed bool) {
	if l.drops.Dropping && now.Before(l.retryAt) {
		l.drop(content)
		return false, false
	}
	if _, err := l.w.Write(b); err != nil {
		l.drop(content)
		l.drops.Err = err.Error()
		l.retryAt = now.Add(retryInterval)
		if !l.drops.Dropping {
			l.drops.Dropping = true
			l.drops.Episodes++
			return false, true
		}
		return false, false
	}
	if l.drops.Dropping {
		l.drops.Dropping = false
		return true, true
	}
	return true, false
}

func (l *CRI) drop(content int) {
	l.drops.Bytes += uint64(content)
	l.drops.Lines++
}

func appendEntry(b *bytes.Buffer, ts time.Time, stream string, tag byte, line []byte) {
	b.WriteString(ts.UTC().Format(criTimeFormat))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteByte(tag)
	b.WriteByte(' ')
	b.Write(line)
	b.WriteByte('\n')
}

// Stream is one stream of a container in CRI entries.
type Stream struct {
	mu      sync.Mutex
	log     *CRI
	name    string
	pending []byte // an unterminated line
	// open: the file holds the start of the current line (a P entry);
	// cut: and a later part of it was dropped, so the file's line is
	// ended before the stream's next entry (readers would join the two).
	open, cut bool
}

// Write turns p into entries; it always takes all of p (what the log
// refuses is dropped and counted by the CRI).
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
		s.emit(line, 'F')
	}
	for len(s.pending) >= maxLine {
		s.put('P', s.pending[:maxLine])
		s.pending = append(s.pending[:0], s.pending[maxLine:]...)
	}
	return n, nil
}

// emit writes a whole line, split into partial entries when too long.
func (s *Stream) emit(line []byte, last byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	for len(line) > maxLine {
		s.put('P', line[:maxLine])
		line = line[maxLine:]
	}
	s.put(last, line)
}

// put writes one entry of the stream, ending first a line of the file
// that lost its continuation.
func (s *Stream) put(tag byte, line []byte) {
	if !s.log.entry(s.name, tag, line, s.cut) {
		s.cut = s.open
		return
	}
	s.cut = false
	s.open = tag == 'P'
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
	s.emit(s.pending, 'P')
	s.pending = nil
	return nil
}
