// Package etcdtest starts a real etcd for a test: the host's etcd binary
// (Debian's etcd-server, listed in hosttools/tools.list for the test
// target), one member on 127.0.0.1 with free ports and a data directory of
// the test's own, stopped and removed when the test ends.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
)

// Server is one running etcd member.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT (https:// with
	// StartTLS).
	Endpoint string
	// CAFile, CertFile and KeyFile are, with StartTLS, the CA of etcd's
	// serving certificate and a client certificate etcd accepts.
	CAFile, CertFile, KeyFile string
	cmd                       *exec.Cmd
	exited                    chan struct{}
	logPath                   string
	hc                        *http.Client
}

// Start starts etcd on plain http and waits until it answers /health. The
// test fails (never skips) when etcd is not installed: run
// scripts/deps.sh test.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartTLS starts etcd serving https and requiring client certificates
// signed by a CA of the test.
func StartTLS(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, secure bool) *Server {
	t.Helper()
	dir := t.TempDir()
	scheme, args := "http://", []string{}
	s := &Server{exited: make(chan struct{}), logPath: filepath.Join(dir, "etcd.log"), hc: &http.Client{Timeout: time.Second}}
	if secure {
		c := writeCerts(t, dir)
		scheme = "https://"
		s.CAFile, s.CertFile, s.KeyFile = c.CA, c.ClientCert, c.ClientKey
		s.hc.Transport = &http.Transport{TLSClientConfig: c.clientTLS(t)}
		args = []string{"--cert-file", c.ServerCert, "--key-file", c.ServerKey,
			"--trusted-ca-file", c.CA, "--client-cert-auth"}
	}
	client := scheme + freeAddr(t)
	peer := "http://" + freeAddr(t)
	s.Endpoint = client
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = hosttools.Command("etcd", append([]string{"--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=" + peer,
		"--logger", "zap", "--log-level", "warn"}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			s.dumpLog(t)
		}
	})
	if err := s.waitHealthy(30 * time.Second); err != nil {
		s.dumpLog(t)
		t.Fatalf("etcd at %s: %v", client, err)
	}
	return s
}

func (s *Server) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("exited: %v", s.cmd.ProcessState)
		default:
		}
		resp, err := s.hc.Get(s.Endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/health: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) dumpLog(t testing.TB) {
	data, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	t.Logf("etcd log (last lines):\n%s", strings.Join(lines, "\n"))
}

// freeAddr returns a 127.0.0.1 address with a port free at the moment.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Stop kills etcd (as a crash would) and waits for it to exit.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.exited
}
