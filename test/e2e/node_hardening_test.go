package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const fileModesPod = `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: s3cr3t-e2e
---
apiVersion: v1
kind: Pod
metadata:
  name: modes
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    runAsUser: 1000
    runAsGroup: 1000
  volumes:
  - name: db
    secret:
      secretName: db
  containers:
  - name: main
    image: busybox:1.36
    command: ["/bin/sh", "-c", "cat /etc/db/password; echo; echo written-by-1000 > /dev/termination-log; exec sleep 3600"]
    volumeMounts:
    - name: db
      mountPath: /etc/db
`

// TestNodeFileModes: on a real node, the nodelet's root, a pod's
// directories, its secret volume, its ServiceAccount token and its
// termination log are out of another local user's reach (checked as
// nobody with setpriv, against a file nobody can read as a control), while
// the pod's own non-root user reads the secret and writes its termination
// log.
func TestNodeFileModes(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-modes")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	cp.mustStdin(fileModesPod, "apply", "-f", "-")
	testkit.Eventually(t, 90*time.Second, "pod modes running and reading its secret", func() bool {
		out, _, _ := cp.kubectl("logs", "modes")
		return strings.Contains(out, "s3cr3t-e2e")
	})
	uid := cp.must("get", "pod", "modes", "-o", "jsonpath={.metadata.uid}")
	root := filepath.Join(node.dir, "root")

	// The test's temporary directories are 0700: open the way to the
	// node's directory so that only the nodelet's own modes stand between
	// nobody and the files, and check nobody reads a file of 0644 there.
	for _, d := range []string{filepath.Dir(node.dir), node.dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := filepath.Join(node.dir, "control")
	if err := os.WriteFile(control, []byte("readable"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := asNobody("cat", control); err != nil || out != "readable" {
		t.Fatalf("control: nobody cannot read a 0644 file: %q %v", out, err)
	}

	secret := filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~secret", "db", "password")
	tokens, _ := filepath.Glob(filepath.Join(root, "pods", uid, "volumes", "kubernetes.io~projected", "*", "token"))
	termLog := filepath.Join(root, "pod-files", uid, "termination-log", "main-0")
	if b, err := os.ReadFile(secret); err != nil || string(b) != "s3cr3t-e2e" {
		t.Fatalf("secret on the host: %q %v", b, err)
	}
	if len(tokens) != 1 {
		t.Fatalf("ServiceAccount token files: %v", tokens)
	}
	podDir := filepath.Join(root, "pods", uid)
	modes := map[string]os.FileMode{root: 0o750, filepath.Dir(podDir): 0o750, podDir: 0o750,
		filepath.Join(podDir, "volumes"): 0o750, filepath.Dir(filepath.Dir(secret)): 0o750,
		filepath.Dir(secret): 0o755, filepath.Join(root, "pod-files"): 0o750,
		filepath.Join(root, "pod-files", uid): 0o750, filepath.Dir(termLog): 0o750, termLog: 0o660}
	for path, want := range modes {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	fi, err := os.Stat(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("termination log owned by %d:%d, want the container's 1000:1000", st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile(termLog); strings.TrimSpace(string(b)) != "written-by-1000" {
		t.Errorf("termination log: %q, want what the non-root container wrote", b)
	}
	for _, p := range []string{secret, tokens[0], termLog} {
		if out, err := asNobody("cat", p); err == nil || strings.Contains(out, "s3cr3t") {
			t.Errorf("nobody read %s: %q", p, out)
		} else if !strings.Contains(out, "Permission denied") {
			t.Errorf("nobody reading %s: %v: %q, want Permission denied", p, err, out)
		}
	}
	if out, err := asNobody("ls", root); err == nil {
		t.Errorf("nobody lists the nodelet's root: %q", out)
	}

	cp.mustStdin(fileModesPod, "delete", "-f", "-", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// asNobody runs a busybox applet as nobody (65534, no supplementary
// groups) and returns its combined output.
func asNobody(applet string, args ...string) (string, error) {
	out, err := hosttools.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups",
		"--", "/bin/busybox", applet}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
