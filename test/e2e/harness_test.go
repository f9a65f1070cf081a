// Package e2e drives the real binaries with the real kubectl.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/images"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodelet-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := hosttools.Command("go", "build", "-tags", "grpcnotrace", "-o", binDir+"/", "../../cmd/controlplane", "../../cmd/nodelet", "../../cmd/nodelet-logger", "../../cmd/nodelet-lab")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build controlplane, nodelet, nodelet-logger and nodelet-lab:", err)
		os.Exit(1)
	}
	if _, err := images.BuildPause(binDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := hosttools.Path("kubectl"); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl is required for the end-to-end tests")
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// controlPlane is one running controlplane process.
type controlPlane struct {
	t          testing.TB
	dataDir    string
	port       int
	kubeconfig string
	cmd        *exec.Cmd
	logs       *bytes.Buffer
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startControlPlane starts the binary on a loopback port with dataDir and
// waits until it is ready. It is stopped when the test ends.
func startControlPlane(t testing.TB, dataDir string, port int, extraArgs ...string) *controlPlane {
	t.Helper()
	cp := &controlPlane{t: t, dataDir: dataDir, port: port, kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"), logs: &bytes.Buffer{}}
	args := append([]string{"--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(port)}, extraArgs...)
	cp.cmd = exec.Command(filepath.Join(binDir, "controlplane"), args...)
	cp.cmd.Stdout, cp.cmd.Stderr = cp.logs, cp.logs
	if err := cp.cmd.Start(); err != nil {
		t.Fatalf("start controlplane: %v", err)
	}
	t.Cleanup(cp.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(cp.kubeconfig); err == nil {
			// Ready, and the default namespace has what every pod of
			// it needs (upstream's e2e framework waits for the same).
			if out, _, err := cp.kubectl("get", "--raw", "/readyz"); err == nil && strings.TrimSpace(out) == "ok" {
				if _, _, err := cp.kubectl("get", "serviceaccount/default", "configmap/kube-root-ca.crt"); err == nil {
					return cp
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("control plane not ready after 30s; logs:\n%s", cp.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (cp *controlPlane) stop() {
	if cp.cmd.ProcessState != nil {
		return
	}
	cp.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cp.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cp.cmd.Process.Kill()
		<-done
	}
}

// kill stops the process with SIGKILL, as a crash would.
func (cp *controlPlane) kill() {
	cp.cmd.Process.Kill()
	cp.cmd.Wait()
}

func (cp *controlPlane) kubectl(args ...string) (string, string, error) {
	return cp.kubectlStdin("", args...)
}

func (cp *controlPlane) kubectlStdin(stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", cp.kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(cp.dataDir, "kubectl-cache"))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must runs kubectl and fails the test on error.
func (cp *controlPlane) must(args ...string) string {
	cp.t.Helper()
	out, errOut, err := cp.kubectl(args...)
	if err != nil {
		cp.t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (cp *controlPlane) restConfig() *rest.Config {
	cp.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		cp.t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS = -1 // no client-side throttling in tests
	return cfg
}

func (cp *controlPlane) clientset() *kubernetes.Clientset {
	cp.t.Helper()
	cs, err := kubernetes.NewForConfig(cp.restConfig())
	if err != nil {
		cp.t.Fatalf("clientset: %v", err)
	}
	return cs
}
