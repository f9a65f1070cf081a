package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A running lab gains and loses nodes as a cluster gains and loses
// machines: AddNode makes one more node as Up makes each, RemoveNode
// takes one out for good.

// AddNode adds a node to the running lab, numbered after the highest the
// lab has or has left traces of, with the binaries and extra nodelet
// flags Up was given. It returns the node once it is Ready. On failure it
// removes what it made.
func AddNode(ctx context.Context, cfg Config) (_ *Node, retErr error) {
	if err := cfg.complete(false); err != nil {
		return nil, err
	}
	st, err := Load(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if st.BinDir == "" {
		return nil, fmt.Errorf("lab %s was made before nodes could be added (no BinDir in %s); make it again", st.Name, StateFile)
	}
	t, err := lookTools()
	if err != nil {
		return nil, err
	}
	i, err := nextNodeIndex(st, discoverNodes(st.Name, st.Dir))
	if err != nil {
		return nil, err
	}
	c := Config{Name: st.Name, Dir: st.Dir, BinDir: st.BinDir, NodeletArgs: st.NodeletArgs, Out: cfg.Out}
	st.Nodes = append(st.Nodes, planNode(&c, t, st, i))
	n := &st.Nodes[len(st.Nodes)-1]
	if err := st.save(); err != nil { // before anything is made: Down finds it
		return nil, err
	}
	defer func() {
		if retErr == nil {
			return
		}
		cfg.logf("adding %s failed; removing what was made", n.Name)
		rmCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := RemoveNode(rmCtx, cfg, n.Name); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("cleaning up after the failed add: %w", err))
		}
	}()
	if err := makeNodeNetwork(st, n); err != nil {
		return nil, err
	}
	if err := startNode(ctx, &c, st, n); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, &c, st, []Node{*n}); err != nil {
		return nil, err
	}
	return n, nil
}

// nextNodeIndex is one more than the highest node number in the state or
// among the lab's traces (a node removed by hand, a crashed add), so that
// a new node never meets the remains of an old one.
func nextNodeIndex(st *State, traces []int) (int, error) {
	highest := slices.Max(append([]int{0}, traces...))
	for _, n := range st.Nodes {
		if i, err := nodeIndex(n.Name); err == nil {
			highest = max(highest, i)
		}
	}
	if highest >= MaxNodes {
		return 0, fmt.Errorf("lab %s has node%d: no more than %d nodes", st.Name, highest, MaxNodes)
	}
	return highest + 1, nil
}

// RemoveNode takes a node out of the lab for good, as a machine leaves a
// cluster: it stops the nodelet, deletes the Node object, removes the
// node's containers, containerd, processes, mounts, cgroups, namespace
// and directories, and drops it from the state file. Its pods' API objects
// are the cluster's to handle (drain or taint the node first); the other
// nodes drop their routes to it once the Node is gone. It fails naming
// whatever of the node is left, and the node then stays in the state file
// for Down.
func RemoveNode(ctx context.Context, cfg Config, node string) error {
	st, n, err := loadNode(&cfg, node)
	if err != nil {
		return err
	}
	cfg.logf("removing %s", n.Name)
	errs := []error{stopProcess("the nodelet of "+n.Name, n.NodeletPID, n.NodeletArgs, 30*time.Second)}
	errs = append(errs, deleteNodeObject(ctx, st, n.Name), removeContainers(ctx, &cfg, n))
	for _, p := range nodeProcesses(n) {
		if isLabProgram(p.argv[0]) {
			errs = append(errs, killProcess(fmt.Sprintf("stray process %s of %s", filepath.Base(p.argv[0]), n.Name), p.pid, p.argv))
		}
	}
	cgs := nodeCgroups(n)
	for _, cg := range cgs {
		errs = append(errs, killCgroup(cg))
	}
	errs = append(errs, unmountUnder(n.Dir, n.runDir()))
	for _, cg := range cgs {
		errs = append(errs, removeCgroup(cg))
	}
	errs = append(errs, deleteNetns(n.NetNS), removeDirs(n.Dir, n.runDir()))
	if left := nodeLeftovers(n); len(left) > 0 {
		errs = append(errs, fmt.Errorf("%s: left after its removal: %s", n.Name, strings.Join(left, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove %s: %w", n.Name, err)
	}
	st.Nodes = slices.DeleteFunc(st.Nodes, func(m Node) bool { return m.Name == n.Name })
	if err := st.save(); err != nil {
		return err
	}
	cfg.logf("%s removed", node)
	return nil
}

// deleteNodeObject deletes the Node called name; one already gone is fine.
func deleteNodeObject(ctx context.Context, st *State, name string) error {
	cs, err := clientFor(st.Kubeconfig)
	if err != nil {
		return err
	}
	err = cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Node %s: %w", name, err)
	}
	return nil
}

// runDir holds the node's containerd socket, its state and its pods'
// netns files.
func (n *Node) runDir() string { return filepath.Dir(n.ContainerdAddress) }

// nodeCgroups lists the node's cgroup root in every hierarchy where it
// exists.
func nodeCgroups(n *Node) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		if p := filepath.Join(h, n.CgroupRoot); n.CgroupRoot != "" && exists(p) {
			out = append(out, p)
		}
	}
	return out
}

// nodeProcesses lists the processes whose argv mentions the node's
// directories or its namespace as a whole path (node1's must not match
// node10's), leaving out the caller and its parents.
func nodeProcesses(n *Node) []process {
	paths := regexp.QuoteMeta(n.Dir) + "|" + regexp.QuoteMeta(n.runDir()) + "|" + regexp.QuoteMeta(netnsPath(n.NetNS))
	re := regexp.MustCompile(`(?:` + paths + `)(?:[^A-Za-z0-9._-]|$)`)
	skip := ancestors()
	var out []process
	for _, pid := range pids() {
		if skip[pid] {
			continue
		}
		argv := cmdline(pid)
		if slices.ContainsFunc(argv, re.MatchString) {
			out = append(out, process{pid, argv})
		}
	}
	return out
}

// nodeLeftovers lists whatever of the node still exists, as Leftovers
// does for a whole lab: its namespace, its link on the host, mounts,
// cgroups, processes and directories.
func nodeLeftovers(n *Node) []string {
	var out []string
	if netnsExists(n.NetNS) {
		out = append(out, "network namespace "+n.NetNS)
	}
	if _, err := net.InterfaceByName(n.Link); err == nil {
		out = append(out, "host link "+n.Link)
	}
	mounts, err := mountsUnder(n.Dir, n.runDir())
	if err != nil {
		out = append(out, err.Error())
	}
	for _, m := range mounts {
		out = append(out, "mount "+m)
	}
	for _, cg := range nodeCgroups(n) {
		out = append(out, "cgroup "+cg)
	}
	for _, p := range nodeProcesses(n) {
		out = append(out, fmt.Sprintf("process %d: %s", p.pid, strings.Join(p.argv, " ")))
	}
	for _, d := range []string{n.Dir, n.runDir()} {
		if exists(d) {
			out = append(out, "directory "+d)
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
