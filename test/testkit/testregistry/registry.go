// Package testregistry runs Debian's docker-registry (distribution 2.8)
// on loopback for tests that pull images, with a recording reverse proxy
// to put in front of it and the busybox test image to push there. Every
// fixture is stopped at the test's cleanup and fails the test, rather
// than skipping it, when what it needs is not installed.
package testregistry

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// registryConfig is the docker-registry configuration; registryAuth is
// appended when the registry has a user.
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: nodelet-test
`

const registryAuth = `auth:
  htpasswd:
    realm: nodelet-test
    path: %s
`

// Registry is a docker-registry serving plain HTTP on 127.0.0.1.
type Registry struct {
	Host           string // 127.0.0.1:port
	User, Password string // empty: no auth
}

// Start runs docker-registry on a free loopback port with its storage in
// a temporary directory, requiring basic auth as user when user is not
// empty, until the test ends. The test fails when the registry is not
// installed (apt-get install docker-registry apache2-utils) or does not
// answer within 20 s.
func Start(t testing.TB, user, password string) *Registry {
	t.Helper()
	bin, err := hosttools.Path("docker-registry")
	if err != nil {
		t.Fatalf("docker-registry is not installed (apt-get install docker-registry apache2-utils): %v", err)
	}
	dir := t.TempDir()
	authConf := ""
	if user != "" {
		out, err := hosttools.Command("htpasswd", "-Bbn", user, password).Output()
		if err != nil {
			t.Fatalf("htpasswd (apt-get install apache2-utils): %v", err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, bytes.TrimSpace(out), 0o600); err != nil {
			t.Fatal(err)
		}
		authConf = fmt.Sprintf(registryAuth, htpasswd)
	}
	// The free port may be taken before the registry binds it: retry.
	for attempt := 1; ; attempt++ {
		host := freeLoopbackAddr(t)
		conf := fmt.Sprintf(registryConfig, filepath.Join(dir, "storage"), host) + authConf
		err := run(t, bin, filepath.Join(dir, fmt.Sprint(attempt)), host, conf)
		if err == nil {
			return &Registry{Host: host, User: user, Password: password}
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; retrying on another port", err)
	}
}

// run starts docker-registry with conf (its files in dir) and waits until
// it answers on host; the registry is stopped at cleanup. The error says
// the registry exited at start (its port taken, say).
func run(t testing.TB, bin, dir, host, conf string) error {
	t.Helper()
	cfgPath, logPath := filepath.Join(dir, "config.yml"), filepath.Join(dir, "registry.log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start docker-registry: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				t.Logf("docker-registry log:\n%s", data)
			}
		}
	})
	client := &http.Client{Timeout: time.Second}
	var exitErr error
	testkit.Eventually(t, 20*time.Second, "docker-registry on "+host, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			data, _ := os.ReadFile(logPath)
			exitErr = fmt.Errorf("docker-registry on %s exited at start: %v\n%s", host, waitErr, data)
			return true, nil // stop waiting: the caller retries or fails
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		// 401: up, asking for the credentials it was configured with.
		return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized, nil
	})
	return exitErr
}

// freeLoopbackAddr returns 127.0.0.1:<a port free a moment ago>.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// BlockDNS makes every DNS query of this process fail until the test
// ends: a pull that went to a registry by name instead of the configured
// loopback hosts fails rather than asking the host's resolver, which is
// off-machine. Tests that call it must not run in parallel with others.
func BlockDNS(t testing.TB) {
	old := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("test: DNS query to %s blocked", addr)
	}}
	t.Cleanup(func() { net.DefaultResolver = old })
}
