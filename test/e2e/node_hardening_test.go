package e2e

import (
	"os"
	"path/filepath"
	"strconv"
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

const forkBombPod = `apiVersion: v1
kind: Pod
metadata:
  name: forker
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: steady
    image: busybox:1.36
    command: ["sleep", "3600"]
  - name: bomb
    image: busybox:1.36
    # ash exits on a refused fork, so the loop runs in a background
    # subshell while the container's main process stays: the container's
    # cgroup, where kernels before 6.12 count the refusal, stays too.
    command: ["/bin/sh", "-c", "(while true; do sleep 600 & done) & exec sleep 3600"]
`

// TestNodePodMaxPids: with --pod-max-pids=20 a pod's fork loop stops at
// the limit: its cgroup's pids.max is 20, pids.current never passes it,
// the kernel counts refused forks, the pod's other container keeps
// running and the node stays Ready and runs another pod.
func TestNodePodMaxPids(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-pids", "--pod-max-pids=20")
	ready := func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	}
	testkit.Eventually(t, 60*time.Second, "node Ready", ready)
	cp.mustStdin(forkBombPod, "apply", "-f", "-")
	testkit.Eventually(t, 90*time.Second, "forker running", func() bool {
		out, _, _ := cp.kubectl("get", "pod", "forker", "-o", "jsonpath={.status.containerStatuses[*].state.running}")
		return strings.Count(out, "startedAt") >= 1
	})
	uid := cp.must("get", "pod", "forker", "-o", "jsonpath={.metadata.uid}")
	dir := podPidsCgroup(t, node, uid)
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("pids.max"); got != "20" {
		t.Fatalf("pids.max of the pod's cgroup %s = %q, want 20", dir, got)
	}
	// The kernel counts a refused fork in the forking task's cgroup (the
	// container's, below the pod's) before Linux 6.12's pids.events.local.
	refused := func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "pids.events"))
		for _, f := range append(files, filepath.Join(dir, "pids.events")) {
			if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) != "max 0" {
				return true
			}
		}
		return false
	}
	testkit.Eventually(t, 60*time.Second, "forks refused at the limit (pids.events max > 0)", refused)
	for range 20 { // a few seconds of the loop pushing on the limit
		cur, err := strconv.Atoi(read("pids.current"))
		if err != nil || cur > 20 {
			t.Fatalf("pids.current = %d (%v), over the limit of 20", cur, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := cp.must("get", "pod", "forker", "-o", `jsonpath={.status.containerStatuses[?(@.name=="steady")].state.running}`); out == "" {
		t.Errorf("the pod's other container stopped")
	}
	if out := cp.must("get", "pod", "forker", "-o", `jsonpath={.status.containerStatuses[?(@.name=="bomb")].restartCount}`); out != "0" {
		t.Errorf("the forking container restarted %s times; a refused fork should not kill its main process", out)
	}
	if !ready() {
		t.Fatal("node not Ready with the fork loop running")
	}
	cp.must("run", "after", "--image=busybox:1.36", "--restart=Never", "--", "echo", "forked-fine")
	testkit.Eventually(t, 60*time.Second, "another pod runs", func() bool {
		out, _, _ := cp.kubectl("logs", "after")
		return strings.TrimSpace(out) == "forked-fine"
	})

	cp.must("delete", "pod", "forker", "after", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}

// podPidsCgroup is the directory of the pod's cgroup in the pids
// hierarchy (v1) or the unified one (v2), under the node's cgroup root.
func podPidsCgroup(t *testing.T, node *realNode, uid string) string {
	t.Helper()
	base := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(base); err != nil {
		base = "/sys/fs/cgroup"
	}
	for _, pattern := range []string{"kubepods/pod" + uid, "kubepods/*/pod" + uid} {
		if m, _ := filepath.Glob(filepath.Join(base, node.cgroupRoot, pattern)); len(m) == 1 {
			return m[0]
		}
	}
	t.Fatalf("no cgroup of pod %s under %s%s", uid, base, node.cgroupRoot)
	return ""
}

const securityPods = `apiVersion: v1
kind: Pod
metadata:
  name: seccomp-default
spec:
  restartPolicy: Never
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: main
    image: busybox:1.36
    command: ["grep", "^Seccomp:", "/proc/self/status"]
---
apiVersion: v1
kind: Pod
metadata:
  name: seccomp-unconfined
spec:
  restartPolicy: Never
  securityContext:
    seccompProfile:
      type: Unconfined
  containers:
  - name: main
    image: busybox:1.36
    command: ["grep", "^Seccomp:", "/proc/self/status"]
---
apiVersion: v1
kind: Pod
metadata:
  name: seccomp-none
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    command: ["grep", "^Seccomp:", "/proc/self/status"]
---
apiVersion: v1
kind: Pod
metadata:
  name: seccomp-localhost
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    command: ["/bin/sh", "-c", "grep ^Seccomp: /proc/self/status; mkdir /tmp/x 2>&1 || echo mkdir-refused"]
    securityContext:
      seccompProfile:
        type: Localhost
        localhostProfile: profiles/deny-mkdir.json
---
apiVersion: v1
kind: Pod
metadata:
  name: seccomp-missing
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    command: ["true"]
    securityContext:
      seccompProfile:
        type: Localhost
        localhostProfile: profiles/none.json
---
apiVersion: v1
kind: Pod
metadata:
  name: apparmor
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.36
    command: ["true"]
    securityContext:
      appArmorProfile:
        type: RuntimeDefault
`

// TestNodeSecurityProfiles: seccompProfile is honoured (RuntimeDefault and
// a Localhost profile from ROOT-DIR/seccomp put the container in seccomp
// filter mode, 2; Unconfined leaves it at 0; none gets RuntimeDefault under
// --seccomp-default) or refused with a clear error (a missing Localhost
// profile), and an AppArmor profile, which the node does not apply, is
// refused at admission rather than ignored.
func TestNodeSecurityProfiles(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-security", "--seccomp-default")
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	profiles := filepath.Join(node.dir, "root", "seccomp", "profiles")
	if err := os.MkdirAll(profiles, 0o750); err != nil {
		t.Fatal(err)
	}
	deny := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(profiles, "deny-mkdir.json"), []byte(deny), 0o644); err != nil {
		t.Fatal(err)
	}
	cp.mustStdin(securityPods, "apply", "-f", "-")
	field := func(pod, path string) string {
		out, _, _ := cp.kubectl("get", "pod", pod, "-o", "jsonpath="+path)
		return out
	}
	logs := func(pod string) string {
		testkit.Eventually(t, 90*time.Second, pod+" Succeeded", func() bool { return field(pod, "{.status.phase}") == "Succeeded" })
		return strings.Join(strings.Fields(cp.must("logs", pod)), " ")
	}
	if out := logs("seccomp-default"); out != "Seccomp: 2" {
		t.Errorf("RuntimeDefault: %q, want Seccomp: 2", out)
	}
	if out := logs("seccomp-unconfined"); out != "Seccomp: 0" {
		t.Errorf("Unconfined: %q, want Seccomp: 0", out)
	}
	if out := logs("seccomp-none"); out != "Seccomp: 2" {
		t.Errorf("no profile under --seccomp-default: %q, want Seccomp: 2", out)
	}
	// mkdir's complaint goes to stdout: the log's order of two streams
	// written at once is not defined.
	if out := logs("seccomp-localhost"); !strings.HasPrefix(out, "Seccomp: 2") || !strings.HasSuffix(out, "Operation not permitted mkdir-refused") {
		t.Errorf("Localhost profile denying mkdir: %q", out)
	}
	testkit.Eventually(t, 60*time.Second, "missing profile: CreateContainerError naming it", func() bool {
		w := field("seccomp-missing", "{.status.containerStatuses[0].state.waiting.reason} {.status.containerStatuses[0].state.waiting.message}")
		return strings.HasPrefix(w, "CreateContainerError ") && strings.Contains(w, "profiles/none.json")
	})
	testkit.Eventually(t, 60*time.Second, "AppArmor refused", func() bool {
		return field("apparmor", "{.status.phase} {.status.reason}") == "Failed AppArmor"
	})
	if msg := field("apparmor", "{.status.message}"); !strings.Contains(msg, "Cannot enforce AppArmor") {
		t.Errorf("AppArmor refusal message %q", msg)
	}

	cp.mustStdin(securityPods, "delete", "-f", "-", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(t, node)
}
