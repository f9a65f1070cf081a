package containerlogs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Upstream kubelet's defaults (containerLogMaxSize, containerLogMaxFiles).
const (
	DefaultMaxSize  = 10 * 1024 * 1024
	DefaultMaxFiles = 5
)

// rotatedTimeFormat suffixes a rotated file as upstream's kubelet does:
// 0.log.20161006-001709.
const rotatedTimeFormat = "20060102-150405"

// Rotation limits one container's log: the current file grows to MaxSize
// bytes, then is renamed PATH.TIMESTAMP and a new one started; at most
// MaxFiles files (the current one included) are kept, the oldest rotated
// ones removed. MaxSize <= 0 never rotates.
type Rotation struct {
	MaxSize  int64
	MaxFiles int
}

// RotatingFile is a container's log file under a Rotation. kubectl logs
// reads the current file; a follower sees the rename and reopens the path,
// so following continues across a rotation.
//
// A failed Write leaves no part of p behind (a short write is truncated
// away), so the file holds whole entries only and stays readable; a file
// a failed rotation left closed is opened again by the next Write.
type RotatingFile struct {
	mu     sync.Mutex
	path   string
	rot    Rotation
	f      *os.File // nil after a failed rotation, or closed
	closed bool
	size   int64
	torn   bool // a short write could not be truncated: end its line first
	now    func() time.Time
}

// OpenRotating creates the file's directory and opens it for appending.
func OpenRotating(path string, rot Rotation) (*RotatingFile, error) {
	r := unopenedRotating(path, rot)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for %s: %w", path, err)
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// unopenedRotating is a RotatingFile its first Write opens.
func unopenedRotating(path string, rot Rotation) *RotatingFile {
	return &RotatingFile{path: path, rot: rot, now: time.Now}
}

func (r *RotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat log file: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p, first rotating when p would take the file past MaxSize
// (a file holds at least one entry, however long).
func (r *RotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, fs.ErrClosed
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if r.rot.MaxSize > 0 && r.size > 0 && r.size+int64(len(p)) > r.rot.MaxSize {
		if err := r.rotate(); err != nil {
			return 0, fmt.Errorf("rotate %s: %w", r.path, err)
		}
	}
	return r.write(p)
}

// write appends p whole or not at all: a short write (a full disk) is
// truncated away, since a reader cannot parse a torn entry, nor the next
// one appended to it.
func (r *RotatingFile) write(p []byte) (int, error) {
	out := p
	if r.torn {
		out = append([]byte{'\n'}, p...)
	}
	n, err := r.f.Write(out)
	if err == nil {
		r.size += int64(n)
		r.torn = false
		return len(p), nil
	}
	if n > 0 {
		if terr := r.f.Truncate(r.size); terr != nil {
			// The torn line is ended before the next entry: readers skip
			// it as unparseable.
			r.size += int64(n)
			r.torn = true
			err = errors.Join(err, fmt.Errorf("truncate torn entry: %w", terr))
		}
	}
	return 0, fmt.Errorf("write %s: %w", r.path, err)
}

// rotate renames the current file aside, opens a new one and prunes. On
// failure the file may be left closed (r.f nil): the next Write opens it
// again and retries the rotation.
func (r *RotatingFile) rotate() error {
	err := r.f.Close()
	r.f = nil
	if err != nil {
		return err
	}
	base := r.path + "." + r.now().UTC().Format(rotatedTimeFormat)
	dst := base
	for i := 1; fileExists(dst); i++ { // rotated twice within a second
		dst = fmt.Sprintf("%s-%03d", base, i)
	}
	if err := os.Rename(r.path, dst); err != nil {
		r.open() // keep writing to the old file rather than lose output
		return err
	}
	if err := r.open(); err != nil {
		return err
	}
	return r.prune()
}

// prune removes the oldest rotated files beyond MaxFiles-1.
func (r *RotatingFile) prune() error {
	rotated, err := Rotated(r.path)
	if err != nil {
		return err
	}
	keep := max(r.rot.MaxFiles-1, 1)
	var errs []error
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		rotated = rotated[1:]
	}
	return errors.Join(errs...)
}

// Rotated lists the rotated files of the log at path, oldest first (the
// suffixes sort in time order).
func Rotated(path string) ([]string, error) {
	matches, err := filepath.Glob(path + ".*")
	if err != nil {
		return nil, fmt.Errorf("rotated files of %s: %w", path, err)
	}
	matches = slices.DeleteFunc(matches, func(m string) bool {
		return strings.HasSuffix(m, ".tmp")
	})
	slices.Sort(matches)
	return matches, nil
}

// Close closes the current file.
func (r *RotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
