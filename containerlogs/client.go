package containerlogs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ClientConfig configures the nodelet's side of the Logger.
type ClientConfig struct {
	// Dir is the Logger's directory (see Config.Dir).
	Dir string
	// Command starts a Logger on Dir when none answers: the nodelet binary
	// with its container-logger subcommand. Empty: never start one.
	Command []string
	// Rotation applies to the containers added from now on.
	Rotation Rotation
	Log      *slog.Logger
}

// Client registers containers with the node's Logger, starting it when
// none answers. Its methods are safe for concurrent use.
type Client struct {
	cfg ClientConfig
	log *slog.Logger

	mu   sync.Mutex
	conn net.Conn
	enc  *json.Encoder
	dec  *json.Decoder
	used bool // a container was added: keep a Logger running

	startHook func() // tests: called when a Logger is started
}

// NewClient returns a Client; it connects on first use.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Client{cfg: cfg, log: cfg.Log.With("component", "container-logger-client")}
}

// Add registers a container whose CRI log is logPath and returns the FIFOs
// its task must write stdout and stderr into.
func (c *Client) Add(ctx context.Context, id, logPath string) (stdout, stderr string, err error) {
	resp, err := c.call(ctx, request{Op: "add", ID: id, LogPath: logPath, Rotation: c.cfg.Rotation})
	if err != nil {
		return "", "", fmt.Errorf("container logger: add %s: %w", id, err)
	}
	return resp.Stdout, resp.Stderr, nil
}

// Remove ends a container's logging once its output is drained.
func (c *Client) Remove(ctx context.Context, id string) error {
	if _, err := c.call(ctx, request{Op: "remove", ID: id}); err != nil {
		return fmt.Errorf("container logger: remove %s: %w", id, err)
	}
	return nil
}

// Drops returns what the logs of the containers still logged dropped (by
// container ID, those that dropped output only). Nil, without asking,
// when no container is logged: it never starts a Logger for nothing.
func (c *Client) Drops(ctx context.Context) (map[string]Drops, error) {
	if !c.needed() {
		return nil, nil
	}
	resp, err := c.call(ctx, request{Op: "stats"})
	if err != nil {
		return nil, fmt.Errorf("container logger: stats: %w", err)
	}
	return resp.Drops, nil
}

// needed tells whether a Logger should run: this client added a
// container, or a Logger left registrations.
func (c *Client) needed() bool {
	c.mu.Lock()
	used := c.used
	c.mu.Unlock()
	return used || c.hasRegistrations()
}

// Run keeps a Logger running while containers are logged (this client
// added one, or registrations are on disk, from before a nodelet restart):
// every few seconds it pings it and starts a new one if it died (the new
// one resumes the containers from their registrations, and what they wrote
// meanwhile waits in their pipes).
func (c *Client) Run(ctx context.Context) error {
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	defer c.close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if !c.needed() {
			continue
		}
		if _, err := c.call(ctx, request{Op: "ping"}); err != nil && ctx.Err() == nil {
			c.log.Warn("container logger not answering", "err", err)
		}
	}
}

// call sends one request, connecting (and starting a Logger) first when
// needed; a broken connection is retried once on a new one.
func (c *Client) call(ctx context.Context, req request) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Op == "add" {
		c.used = true
	}
	var resp response
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if c.conn == nil {
			if err = c.connect(ctx); err != nil {
				return resp, err
			}
		}
		c.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err = c.enc.Encode(req); err == nil {
			err = c.dec.Decode(&resp)
		}
		if err == nil {
			break
		}
		c.closeLocked()
	}
	if err != nil {
		return resp, err
	}
	if resp.Error != "" {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// connect dials the Logger, starting one when none listens.
func (c *Client) connect(ctx context.Context) error {
	sock := SocketPath(c.cfg.Dir)
	conn, err := net.Dial("unix", sock)
	if err != nil && len(c.cfg.Command) > 0 {
		if err = c.startLogger(); err != nil {
			return err
		}
		conn, err = c.dialRetry(ctx, sock)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", sock, err)
	}
	c.conn, c.enc, c.dec = conn, json.NewEncoder(conn), json.NewDecoder(conn)
	return nil
}

func (c *Client) dialRetry(ctx context.Context, sock string) (net.Conn, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("unix", sock)
		if err == nil || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startLogger starts the Logger process in its own session, so it
// outlives the nodelet; its output goes to DIR/logger.log (not the
// nodelet's stderr, which a supervisor may be waiting on).
func (c *Client) startLogger() error {
	if err := os.MkdirAll(c.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("start container logger: %w", err)
	}
	logFile := filepath.Join(c.cfg.Dir, "logger.log")
	if st, err := os.Stat(logFile); err == nil && st.Size() > 1<<20 {
		os.Truncate(logFile, 0) // it only logs starts and errors
	}
	out, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start container logger: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start container logger: %w", err)
	}
	c.log.Info("started the container logger", "pid", cmd.Process.Pid, "dir", c.cfg.Dir)
	if c.startHook != nil {
		c.startHook()
	}
	go cmd.Wait() // reap it if it ends while the nodelet runs
	return nil
}

func (c *Client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Client) closeLocked() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.enc, c.dec = nil, nil, nil
	}
}

// hasRegistrations tells whether a Logger left containers to resume.
func (c *Client) hasRegistrations() bool {
	m, _ := filepath.Glob(filepath.Join(c.cfg.Dir, "streams", "*.json"))
	return len(m) > 0
}
