package e2e

// The multi-node lab as the tests use it: bin/nodelet-lab (what `make lab`
// runs) starts a control plane and nodes in network namespaces the test
// owns; its stop must leave nothing behind.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/lab"
	"github.com/nodelet/nodelet/test/testkit"
)

// labEnv is a running lab and a kubectl for it.
type labEnv struct {
	t     testing.TB
	name  string
	dir   string
	state *lab.State
	cp    *controlPlane // kubectl through the lab's host kubeconfig
	gone  bool
}

// startLab runs `nodelet-lab up` with nodes nodes and extra control plane
// flags. Cleanup runs `nodelet-lab down` and fails the test on anything of
// the lab that survives it.
func startLab(t testing.TB, nodes int, cpArgs ...string) *labEnv {
	t.Helper()
	testkit.RequireRoot(t, "nodelet-lab up makes network namespaces and runs containerd and nodelets")
	e := &labEnv{t: t, name: "e" + randomSuffix()[:6], dir: filepath.Join(t.TempDir(), "lab")}
	t.Cleanup(e.down)
	args := []string{"up", "--name", e.name, "--dir", e.dir, "--nodes", fmt.Sprint(nodes), "--port", "0", "--bin-dir", binDir}
	for _, a := range cpArgs {
		args = append(args, "--controlplane-arg="+a)
	}
	if out, err := e.labCmd(10*time.Minute, args...); err != nil {
		t.Fatalf("nodelet-lab up: %v\n%s", err, out)
	}
	st, err := lab.Load(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.state = st
	e.cp = &controlPlane{t: t, dataDir: e.dir, kubeconfig: st.Kubeconfig}
	return e
}

func (e *labEnv) labCmd(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "nodelet-lab"), args...).CombinedOutput()
	return string(out), err
}

// node is the lab's record of node name.
func (e *labEnv) node(name string) lab.Node {
	e.t.Helper()
	st, err := lab.Load(e.dir) // kill-node and start-node rewrite it
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Name == name {
			return n
		}
	}
	e.t.Fatalf("the lab has no node %s", name)
	return lab.Node{}
}

func (e *labEnv) killNode(name string) {
	e.t.Helper()
	if out, err := e.labCmd(time.Minute, "kill-node", "--name", e.name, "--dir", e.dir, name); err != nil {
		e.t.Fatalf("nodelet-lab kill-node %s: %v\n%s", name, err, out)
	}
}

func (e *labEnv) startNode(name string) {
	e.t.Helper()
	if out, err := e.labCmd(2*time.Minute, "start-node", "--name", e.name, "--dir", e.dir, name); err != nil {
		e.t.Fatalf("nodelet-lab start-node %s: %v\n%s", name, err, out)
	}
}

// addNode runs `nodelet-lab add-node` and returns the new node's name
// once it is Ready.
func (e *labEnv) addNode() string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "nodelet-lab"), "add-node", "--name", e.name, "--dir", e.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("nodelet-lab add-node: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func (e *labEnv) removeNode(name string) {
	e.t.Helper()
	if out, err := e.labCmd(5*time.Minute, "remove-node", "--name", e.name, "--dir", e.dir, name); err != nil {
		e.t.Fatalf("nodelet-lab remove-node %s: %v\n%s", name, err, out)
	}
}

// files is where node name keeps its pods' state.
func (e *labEnv) files(name string) nodeFiles {
	n := e.node(name)
	return nodeFiles{ctdAddr: n.ContainerdAddress, ctdNamespace: "nodelet", rootDir: n.RootDir,
		podLogDir: n.PodLogDir, netnsDir: n.NetNSDir, cgroupRoot: n.CgroupRoot}
}

// inNode runs a command in node name's network namespace.
func (e *labEnv) inNode(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := hosttools.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + e.node(name).NetNS}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// down stops the lab (once) and fails the test on anything it leaves.
func (e *labEnv) down() {
	t := e.t
	if e.gone {
		return
	}
	e.gone = true
	if t.Failed() && e.state != nil {
		for _, n := range e.state.Nodes {
			if out, err := hosttools.Command("tail", "-n", "60", n.NodeletLog).Output(); err == nil {
				t.Logf("%s nodelet log (tail):\n%s", n.Name, out)
			}
		}
	}
	if out, err := e.labCmd(5*time.Minute, "down", "--name", e.name, "--dir", e.dir); err != nil {
		t.Errorf("nodelet-lab down: %v\n%s", err, out)
	}
	if left := lab.Leftovers(e.name, e.dir); len(left) > 0 {
		t.Errorf("the lab left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// readyStatus is node name's Ready condition status ("" if unknown).
func (e *labEnv) readyStatus(name string) string {
	out, _, _ := e.cp.kubectl("get", "node", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	return strings.TrimSpace(out)
}
