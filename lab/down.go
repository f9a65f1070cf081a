package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Down removes everything of the lab: processes, containers, mounts,
// cgroups, namespaces and directories. It works from the state file and,
// where that is missing or incomplete (a crash during Up), from the lab's
// naming rules, so it is safe to run at any time, and twice. It fails when
// Leftovers still finds anything at the end, naming it.
func Down(ctx context.Context, cfg Config) error {
	if err := cfg.complete(false); err != nil {
		return err
	}
	st, err := Load(cfg.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		cfg.logf("warning: %v; removing what the lab's names find", err)
	}
	st = completeState(&cfg, st)
	cfg.logf("removing lab %s (%d node(s), %s)", st.Name, len(st.Nodes), st.Dir)
	var errs []error
	// The nodelets first: SIGTERM leaves the pods running, and no nodelet
	// restarts a container that the cleanup below removes.
	for _, n := range st.Nodes {
		errs = append(errs, stopProcess("the nodelet of "+n.Name, n.NodeletPID, n.NodeletArgs, 30*time.Second))
	}
	errs = append(errs, stopStrayNodelets(st.Name, st.Dir))
	for i := range st.Nodes {
		errs = append(errs, removeContainers(ctx, &cfg, &st.Nodes[i]))
	}
	errs = append(errs,
		stopProcess("the forwarder", st.ForwarderPID, st.ForwarderArgs, 10*time.Second),
		stopProcess("the control plane", st.ControlPlane.PID, st.ControlPlane.Args, 30*time.Second),
		killStrays(st.Name, st.Dir))
	for _, cg := range labCgroups(st.Name) {
		errs = append(errs, killCgroup(cg))
	}
	errs = append(errs, unmountUnder(st.Dir, st.RunDir))
	for _, cg := range labCgroups(st.Name) {
		errs = append(errs, removeCgroup(cg))
	}
	for _, ns := range labNetnses(st.Name) {
		errs = append(errs, deleteNetns(ns))
	}
	errs = append(errs, deleteHostLinks(st.Name), removeDirs(st.Dir, st.RunDir))
	if left := Leftovers(st.Name, st.Dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("lab %s: left after down: %s", st.Name, strings.Join(left, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	cfg.logf("lab %s removed", st.Name)
	return nil
}

// completeState returns the recorded state with every node the lab's
// names reveal (namespaces, cgroups, directories) added, planned from the
// naming rules. Those have no PIDs: the stray sweep finds their processes.
func completeState(cfg *Config, st *State) *State {
	t, _ := lookTools() // best effort: only restarting containerd needs them
	if st == nil {
		st = plan(&Config{Name: cfg.Name, Dir: cfg.Dir}, t)
	}
	for _, i := range discoverNodes(st.Name, st.Dir) {
		if _, err := st.node(NodeName(i)); err != nil {
			st.Nodes = append(st.Nodes, planNode(&Config{Name: st.Name, Dir: st.Dir}, t, st, i))
		}
	}
	return st
}

// discoverNodes lists the node numbers that any namespace, cgroup or
// directory of the lab carries.
func discoverNodes(name, dir string) []int {
	var found []int
	add := func(re *regexp.Regexp, s string) {
		if m := re.FindStringSubmatch(s); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil && !slices.Contains(found, i) {
				found = append(found, i)
			}
		}
	}
	nsRE := regexp.MustCompile(`^` + regexp.QuoteMeta(LabNetNS(name)) + `-n([0-9]+)$`)
	for _, ns := range labNetnses(name) {
		add(nsRE, ns)
	}
	cgRE := regexp.MustCompile(`-n([0-9]+)$`)
	for _, cg := range labCgroups(name) {
		add(cgRE, cg)
	}
	nodeRE, runRE := regexp.MustCompile(`^node([0-9]+)$`), regexp.MustCompile(`^n([0-9]+)$`)
	for _, d := range []struct {
		path string
		re   *regexp.Regexp
	}{{dir, nodeRE}, {RunDir(name), runRE}} {
		entries, _ := os.ReadDir(d.path)
		for _, e := range entries {
			add(d.re, e.Name())
		}
	}
	slices.Sort(found)
	return found
}

// removeContainers removes every container of the node through its
// containerd, then stops containerd and any shim that outlived it. A
// containerd that was killed (KillNode, a crash) is started again first
// when it left tasks behind: only containerd removes runc's state (outside
// the lab's directories) and the rootfs mounts cleanly.
func removeContainers(ctx context.Context, cfg *Config, n *Node) error {
	sock := n.ContainerdAddress
	if !running(n.ContainerdPID, n.ContainerdArgs) {
		adoptContainerd(n)
	}
	if !running(n.ContainerdPID, n.ContainerdArgs) && hasTasks(n) && len(n.ContainerdArgs) > 0 {
		cfg.logf("starting containerd of %s again to remove its containers", n.Name)
		err := startContainerd(n)
		if err == nil {
			err = waitContainerd(ctx, n)
		}
		if err != nil {
			cfg.logf("warning: %v; killing its containers instead", err)
		}
	}
	var errs []error
	if running(n.ContainerdPID, n.ContainerdArgs) {
		errs = append(errs, cleanupContainerd(ctx, sock),
			stopProcess("containerd of "+n.Name, n.ContainerdPID, n.ContainerdArgs, 10*time.Second))
	}
	killShims(sock)
	return errors.Join(errs...)
}

// adoptContainerd finds a containerd serving the node's socket that the
// state file does not know (it was lost), so that it is used and stopped
// rather than a second one started on the same root.
func adoptContainerd(n *Node) {
	for _, pid := range pids() {
		argv := cmdline(pid)
		if len(argv) == 0 || filepath.Base(argv[0]) != "containerd" {
			continue
		}
		if i := slices.Index(argv, "--address"); i >= 0 && i+1 < len(argv) && argv[i+1] == n.ContainerdAddress {
			n.ContainerdPID, n.ContainerdArgs = pid, argv
			return
		}
	}
}

// hasTasks tells whether a node's containerd left tasks: shims still
// serving its socket, or task bundles in its state directory.
func hasTasks(n *Node) bool {
	if len(shimsOf(n.ContainerdAddress)) > 0 {
		return true
	}
	bundles, _ := filepath.Glob(filepath.Join(n.ContainerdState, "io.containerd.runtime.v2.task", "*", "*"))
	return len(bundles) > 0
}

// isLabProgram tells whether argv0 is a program the lab runs; a stray one
// (from a crashed Up, say) is killed. Anything else that uses the lab's
// files (a user's `tail -f` of a log) is only reported.
func isLabProgram(argv0 string) bool {
	switch base := filepath.Base(argv0); base {
	case "nsenter", "containerd", "nodelet", "nodelet-logger", "controlplane", "nodelet-lab", "runc", "pause":
		return true
	default:
		return strings.HasPrefix(base, "containerd-shim")
	}
}

// killStrays SIGKILLs the lab's processes that the state file does not
// know (or no longer matches).
func killStrays(name, dir string) error {
	var errs []error
	for _, p := range labProcesses(name, dir) {
		if !isLabProgram(p.argv[0]) {
			continue // Leftovers reports it
		}
		errs = append(errs, killProcess(fmt.Sprintf("stray process %s", filepath.Base(p.argv[0])), p.pid, p.argv))
	}
	return errors.Join(errs...)
}

// stopStrayNodelets stops nodelets the state file does not know (it was
// lost, or a crash came between a start and its record) before their
// containers are removed, so none of them starts a container again. The
// node's container logger runs the nodelet binary too (container-logger);
// it ends once its containers are gone, or killStrays kills it.
func stopStrayNodelets(name, dir string) error {
	var errs []error
	for _, p := range labProcesses(name, dir) {
		if filepath.Base(p.argv[0]) == "nodelet" && slices.Contains(p.argv, "--kubeconfig") {
			errs = append(errs, stopProcess(fmt.Sprintf("stray nodelet (pid %d)", p.pid), p.pid, p.argv, 30*time.Second))
		}
	}
	return errors.Join(errs...)
}

// removeDirs removes the lab's directories, but never while something is
// mounted below: RemoveAll would descend into the mount (a hostPath
// volume, say) and delete files that are not the lab's.
func removeDirs(dirs ...string) error {
	mounts, err := mountsUnder(dirs...)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("not removing %s: still mounted: %s", strings.Join(dirs, ", "), strings.Join(mounts, ", "))
	}
	var errs []error
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
