package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// upPhases are the phases `make up` announces, in order.
var upPhases = []string{"deps", "build", "images", "containerd", "control plane", "node", "sample", "service"}

var (
	phaseLine = regexp.MustCompile(`^==> ([a-z][a-z ]*): \S`)
	okLine    = regexp.MustCompile(`^    ok \(\d+\.\d s\)$`)
)

// TestMakeUp runs the README's first command, scripts/up.sh (make up runs
// nothing else), as a user would, inside a network namespace of the
// test's own: a veth pair inside it gives the node an address and a default
// route that lead nowhere, so every address the cluster uses exists only
// there. It checks the phases are announced and timed, the closing lines,
// that the node runs as system:node:NAME with its own certificate, that
// node and control plane report one version, and that Ctrl-C leaves
// nothing behind.
func TestMakeUp(t *testing.T) {
	testkit.RequireRoot(t, "make up runs a node")
	b := make([]byte, 3)
	rand.Read(b)
	id := "nlup-" + hex.EncodeToString(b)
	ns := makeUpNetns(t, id)
	dataDir := filepath.Join(t.TempDir(), "up")
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const nodeName = "up-node"
	env := map[string]string{
		"DATA_DIR": dataDir, "RUN_DIR": "/run/" + id, "CGROUP_ROOT": "/" + id, "BRIDGE": "nlup0",
		"NODE_NAME": nodeName, "PORT": "6443", "NODELET_ARGS": "--resolv-conf " + resolv,
	}
	up := startUp(t, ns, env)

	lines := up.waitFor(t, "Ctrl-C drains the node and stops everything", 8*time.Minute)
	checkPhases(t, lines)
	out := strings.Join(lines, "\n")
	for _, want := range []string{"Ready in ", "export KUBECONFIG=" + dataDir + "/admin.kubeconfig", "kubectl get nodes", "answers: <title>Welcome to nginx!</title>",
		"(Service nginx-deployment) answers"} {
		if !strings.Contains(out, want) {
			t.Errorf("make up's output lacks %q:\n%s", want, out)
		}
	}

	kubectl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := hosttools.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + ns, "kubectl", "--kubeconfig", dataDir + "/admin.kubeconfig"}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return string(b)
	}
	var v struct {
		ServerVersion struct{ GitVersion, Minor string }
	}
	if err := json.Unmarshal([]byte(kubectl("version", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	kubelet := kubectl("get", "node", nodeName, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}")
	if v.ServerVersion.GitVersion == "" || kubelet != v.ServerVersion.GitVersion {
		t.Errorf("node reports %q, control plane %q: one version expected", kubelet, v.ServerVersion.GitVersion)
	}
	checkNodeIdentity(t, dataDir, nodeName)

	up.interrupt(t)
	if !slices.ContainsFunc(up.lines(), func(l string) bool { return strings.HasPrefix(l, "up: draining "+nodeName) }) {
		t.Errorf("Ctrl-C did not drain the node:\n%s", strings.Join(up.lines(), "\n"))
	}
	checkUpLeftovers(t, env)
}

// makeUpNetns creates the namespace make up runs in, removed when the test
// ends.
func makeUpNetns(t *testing.T, name string) string {
	t.Helper()
	addNetns(t, name)
	mustIP(t, "-n", name, "link", "add", "nv0", "type", "veth", "peer", "name", "nv1")
	mustIP(t, "-n", name, "addr", "add", "10.98.0.1/24", "dev", "nv0")
	mustIP(t, "-n", name, "link", "set", "nv0", "up")
	mustIP(t, "-n", name, "link", "set", "nv1", "up")
	mustIP(t, "-n", name, "route", "add", "default", "dev", "nv0")
	return name
}

// upRun is scripts/up.sh running, its output collected line by line.
type upRun struct {
	cmd  interface{ Signal(os.Signal) error }
	done chan struct{} // closed when it has exited, err set
	err  error
	mu   sync.Mutex
	out  []string
	more chan struct{} // a line arrived
}

func startUp(t *testing.T, ns string, env map[string]string) *upRun {
	t.Helper()
	cmd := hosttools.Command("nsenter", "--net=/run/netns/"+ns, "scripts/up.sh")
	cmd.Dir = "../.."
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &upRun{cmd: cmd.Process, done: make(chan struct{}), more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			u.mu.Lock()
			u.out = append(u.out, sc.Text())
			u.mu.Unlock()
			select {
			case u.more <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		u.err = cmd.Wait()
		pw.Close()
		close(u.done)
	}()
	t.Cleanup(func() {
		if u.running() {
			u.interrupt(t)
		}
		if t.Failed() {
			t.Logf("make up's output:\n%s", strings.Join(u.lines(), "\n"))
			if b, err := os.ReadFile(filepath.Join(env["DATA_DIR"], "nodelet.log")); err == nil {
				t.Logf("nodelet.log (tail):\n%s", tail(string(b), 60))
			}
		}
	})
	return u
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func (u *upRun) lines() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.out)
}

func (u *upRun) running() bool {
	select {
	case <-u.done:
		return false
	default:
		return true
	}
}

// waitFor returns the output up to and including the first line that
// starts with prefix; it fails the test if make up ends or time runs out.
func (u *upRun) waitFor(t *testing.T, prefix string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		lines := u.lines()
		if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) }); i >= 0 {
			return lines[:i+1]
		}
		select {
		case <-u.more:
		case <-u.done:
			t.Fatalf("make up ended (%v) before printing %q", u.err, prefix)
		case <-deadline:
			t.Fatalf("make up printed no %q within %s", prefix, timeout)
		}
	}
}

// interrupt sends SIGINT, as Ctrl-C in the terminal would, and waits for
// make up to drain the node and stop.
func (u *upRun) interrupt(t *testing.T) {
	t.Helper()
	u.cmd.Signal(syscall.SIGINT)
	select {
	case <-u.done:
		// 130: the exit status of a script ended by SIGINT.
		var exit *exec.ExitError
		if !errors.As(u.err, &exit) || exit.ExitCode() != 130 {
			t.Errorf("make up after Ctrl-C: %v, want exit status 130", u.err)
		}
	case <-time.After(3 * time.Minute):
		t.Errorf("make up did not stop within 3 minutes of Ctrl-C")
		u.cmd.Signal(syscall.SIGKILL)
		<-u.done
	}
}

// checkPhases wants every phase announced in order, each followed by its
// "ok (N.N s)" before the next one starts.
func checkPhases(t *testing.T, lines []string) {
	t.Helper()
	var got []string
	open := false
	for _, l := range lines {
		if m := phaseLine.FindStringSubmatch(l); m != nil {
			if open {
				t.Errorf("phase %q started before %q said ok", m[1], got[len(got)-1])
			}
			got, open = append(got, m[1]), true
		} else if okLine.MatchString(l) {
			if !open {
				t.Errorf("an ok line outside a phase: %q", l)
			}
			open = false
		}
	}
	if open {
		t.Errorf("phase %q never said ok", got[len(got)-1])
	}
	if !slices.Equal(got, upPhases) {
		t.Errorf("phases = %q, want %q", got, upPhases)
	}
}

// checkNodeIdentity wants the running nodelet to use a kubeconfig whose
// client certificate is system:node:NAME in group system:nodes, not the
// admin's.
func checkNodeIdentity(t *testing.T, dataDir, nodeName string) {
	t.Helper()
	var kubeconfig string
	for _, p := range processes() {
		if filepath.Base(p.args[0]) == "nodelet" && strings.Contains(p.cmdline, dataDir) {
			if i := slices.Index(p.args, "--kubeconfig"); i >= 0 && i+1 < len(p.args) {
				kubeconfig = p.args[i+1]
			}
		}
	}
	if kubeconfig == "" {
		t.Fatal("no running nodelet of make up, or it has no --kubeconfig")
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var certPEM []byte
	for _, a := range cfg.AuthInfos {
		certPEM = a.ClientCertificateData
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("%s holds no client certificate", kubeconfig)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:"+nodeName || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("the nodelet runs as CN=%q O=%q, want system:node:%s in system:nodes (kubeconfig %s)",
			cert.Subject.CommonName, cert.Subject.Organization, nodeName, kubeconfig)
	}
}

// checkUpLeftovers wants nothing of make up left after Ctrl-C: processes,
// mounts, its run directory, its cgroups.
func checkUpLeftovers(t *testing.T, env map[string]string) {
	t.Helper()
	for _, p := range processes() {
		if strings.Contains(p.cmdline, env["DATA_DIR"]) || strings.Contains(p.cmdline, env["RUN_DIR"]) {
			t.Errorf("process left after Ctrl-C: %d %s", p.pid, strings.ReplaceAll(p.cmdline, "\x00", " "))
		}
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mounts), env["DATA_DIR"]) {
		t.Errorf("mounts left under %s", env["DATA_DIR"])
	}
	if _, err := os.Stat(env["RUN_DIR"]); !os.IsNotExist(err) {
		t.Errorf("%s left after Ctrl-C (%v)", env["RUN_DIR"], err)
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/")
	for _, h := range append(hierarchies, "/sys/fs/cgroup/") {
		if _, err := os.Stat(filepath.Join(h, env["CGROUP_ROOT"])); err == nil {
			t.Errorf("cgroup %s left in %s", env["CGROUP_ROOT"], h)
		}
	}
}
