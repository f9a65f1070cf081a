package containerlogs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRunning: another Logger holds the directory.
var ErrRunning = errors.New("a container logger already runs on this directory")

// idleGrace is how long a Logger with nothing to do waits before ending,
// so a nodelet restarting right away finds it.
const idleGrace = 2 * time.Second

// Config configures a Logger.
type Config struct {
	// Dir holds the socket (logger.sock), the lock, the registrations
	// (streams/) and the FIFOs (fifo/).
	Dir string
	// IdleExit ends Run once no container is logged and no client is
	// connected (the node process: started on demand by the nodelet).
	IdleExit bool
	Log      *slog.Logger
}

// Logger copies containers' output from their FIFOs into rotated CRI log
// files: one process (or goroutine, in tests) for the whole node.
type Logger struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	streams  map[string]*stream
	clients  int
	activity chan struct{} // a stream or client ended
}

// New prepares a Logger on cfg.Dir.
func New(cfg Config) (*Logger, error) {
	if cfg.Dir == "" {
		return nil, errors.New("container logger: no directory")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Logger{cfg: cfg, log: cfg.Log.With("component", "container-logger"),
		streams: map[string]*stream{}, activity: make(chan struct{}, 1)}, nil
}

// SocketPath is where the Logger of dir listens.
func SocketPath(dir string) string { return filepath.Join(dir, "logger.sock") }

// Run serves until ctx ends (or, with IdleExit, until idle). Containers
// still logged then keep their registrations and FIFOs: the shim holds
// their pipes, and the next Logger resumes them.
func (l *Logger) Run(ctx context.Context) error {
	for _, d := range []string{l.cfg.Dir, l.dir("streams"), l.dir("fifo")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("container logger: %w", err)
		}
	}
	unlock, err := lockDir(filepath.Join(l.cfg.Dir, "logger.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	l.resumeAll()
	sock := SocketPath(l.cfg.Dir)
	os.Remove(sock) // a dead Logger's; we hold the lock
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("container logger: listen on %s: %w", sock, err)
	}
	defer os.Remove(sock)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go l.exitWhenIdle(ctx, cancel)
	go func() { <-ctx.Done(); ln.Close() }()
	l.log.Info("serving", "socket", sock, "pid", os.Getpid(), "containers", l.count())
	var wg sync.WaitGroup
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Go(func() { l.serve(ctx, conn) })
	}
	wg.Wait()
	l.detachAll()
	return nil
}

func (l *Logger) dir(sub string) string { return filepath.Join(l.cfg.Dir, sub) }

// lockDir takes the Logger's flock; ErrRunning when another holds it.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("container logger: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("container logger: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// serve answers one client's requests until it disconnects.
func (l *Logger) serve(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	l.mu.Lock()
	l.clients++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.clients--
		l.mu.Unlock()
		l.poke()
	}()
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		resp := l.handle(req)
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

func (l *Logger) handle(req request) response {
	var resp response
	var err error
	switch req.Op {
	case "ping":
		resp.PID = os.Getpid()
	case "add":
		resp.Stdout, resp.Stderr, err = l.add(req)
	case "remove":
		err = l.remove(req.ID)
	case "stats":
		resp.Drops = l.drops()
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	if err != nil {
		resp.Error = err.Error()
	}
	return resp
}

// validID keeps IDs usable as file names.
func validID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return fmt.Errorf("invalid container id %q", id)
	}
	return nil
}

// add registers a container and opens its FIFOs for reading; the shim's
// opening of their write ends (task creation) completes the open.
func (l *Logger) add(req request) (string, string, error) {
	if err := validID(req.ID); err != nil {
		return "", "", err
	}
	if !filepath.IsAbs(req.LogPath) {
		return "", "", fmt.Errorf("container %s: log path %q is not absolute", req.ID, req.LogPath)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.streams[req.ID]; s != nil {
		return s.reg.Stdout, s.reg.Stderr, nil
	}
	reg := registration{ID: req.ID, LogPath: req.LogPath, Rotation: req.Rotation,
		Stdout: filepath.Join(l.dir("fifo"), req.ID+".stdout"), Stderr: filepath.Join(l.dir("fifo"), req.ID+".stderr")}
	if err := l.saveRegistration(reg); err != nil {
		return "", "", fmt.Errorf("container %s: %w", req.ID, err)
	}
	s, err := openStream(reg, false)
	if err != nil {
		l.forget(reg)
		return "", "", fmt.Errorf("container %s: %w", req.ID, err)
	}
	l.start(s)
	return reg.Stdout, reg.Stderr, nil
}

// remove ends a container's logging: what its FIFOs still hold is copied
// for a moment, then they are closed and removed.
func (l *Logger) remove(id string) error {
	l.mu.Lock()
	s := l.streams[id]
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	select {
	case <-s.finished:
	case <-time.After(drainTimeout):
		s.close(false)
		<-s.finished
	}
	return nil
}

// start copies s in the background and forgets it when its output ends.
// Callers hold l.mu.
func (l *Logger) start(s *stream) {
	l.streams[s.reg.ID] = s
	go func() {
		detached := s.copy(l.log)
		l.mu.Lock()
		delete(l.streams, s.reg.ID)
		l.mu.Unlock()
		if !detached {
			l.forget(s.reg)
		}
		close(s.finished)
		l.poke()
	}()
}

// resumeAll takes over the containers a previous Logger left.
func (l *Logger) resumeAll() {
	files, _ := filepath.Glob(filepath.Join(l.dir("streams"), "*.json"))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range files {
		var reg registration
		data, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(data, &reg)
		}
		if err == nil {
			err = validID(reg.ID)
		}
		if err != nil {
			l.log.Warn("drop unreadable registration", "file", f, "err", err)
			os.Remove(f)
			continue
		}
		s, err := openStream(reg, true)
		if err != nil {
			l.log.Warn("resume container log", "id", reg.ID, "err", err)
			l.forget(reg)
			continue
		}
		l.start(s)
	}
}

func (l *Logger) saveRegistration(reg registration) error {
	data, err := json.Marshal(reg)
	if err != nil {
		return err
	}
	path := filepath.Join(l.dir("streams"), reg.ID+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("save registration: %w", err)
	}
	return os.Rename(tmp, path)
}

// forget removes a container's FIFOs, then its registration (last: a
// registration without FIFOs is resumed as ended, FIFOs without one would
// be left behind).
func (l *Logger) forget(reg registration) {
	os.Remove(reg.Stdout)
	os.Remove(reg.Stderr)
	os.Remove(filepath.Join(l.dir("streams"), reg.ID+".json"))
}

// detachAll closes every stream and keeps its registration.
func (l *Logger) detachAll() {
	l.mu.Lock()
	streams := make([]*stream, 0, len(l.streams))
	for _, s := range l.streams {
		streams = append(streams, s)
	}
	l.mu.Unlock()
	for _, s := range streams {
		s.close(true)
		<-s.finished
	}
}

// drops is what the logged containers' logs dropped, for those that did.
func (l *Logger) drops() map[string]Drops {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Drops{}
	for id, s := range l.streams {
		if d := s.drops(); d.Episodes > 0 {
			out[id] = d
		}
	}
	return out
}

func (l *Logger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.streams)
}

func (l *Logger) poke() {
	select {
	case l.activity <- struct{}{}:
	default:
	}
}

// exitWhenIdle cancels Run once nothing is logged and nobody is connected
// for idleGrace.
func (l *Logger) exitWhenIdle(ctx context.Context, cancel func()) {
	if !l.cfg.IdleExit {
		return
	}
	idle := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.streams) == 0 && l.clients == 0
	}
	tick := time.NewTicker(idleGrace)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.activity:
		case <-tick.C:
		}
		if idle() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(idleGrace):
			}
			if idle() {
				l.log.Info("nothing to log and no nodelet connected; exiting")
				cancel()
				return
			}
		}
	}
}
