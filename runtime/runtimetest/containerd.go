// Package runtimetest starts a private containerd for tests: its own root,
// state, socket and configuration under the test's temporary directory,
// and a cleanup that leaves no task, container, shim or mount behind.
package runtimetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// configTemplate is a minimal containerd configuration: a private socket,
// the opt directory inside the root; the first verb is the line that
// disables the CRI plugin (empty when Options.CRI enables it), and the
// CRI plugin's own tables are appended after the template.
const configTemplate = `version = 2
%soom_score = 0

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`

// StartContainerd starts containerd as root with everything under
// temporary directories and returns its socket address once it answers.
// The test fails (not skips) when it is not root or containerd is not
// installed. Cleanup kills and deletes every task and container in every
// namespace, stops containerd and unmounts anything left under its root
// and state directories; leftover mounts fail the test.
func StartContainerd(t testing.TB) string {
	t.Helper()
	return StartContainerdWith(t, Options{})
}

// Options change the containerd that StartContainerdWith starts.
type Options struct {
	// NetNS is the path of a network namespace (/run/netns/NAME) to run
	// containerd in, through nsenter: the CRI plugin calls CNI in its own
	// namespace. Empty: the test's namespace.
	NetNS string
	// CRI enables the CRI plugin with this TOML (the
	// [plugins."io.containerd.grpc.v1.cri"] table and its subtables).
	// Empty: the plugin is disabled.
	CRI string
}

// StartContainerdWith is StartContainerd with opts; the cleanup is the same.
// With the CRI plugin, tear the pod sandboxes down through CRI before the
// cleanup runs: it deletes containers but knows nothing of their networks.
func StartContainerdWith(t testing.TB, opts Options) string {
	t.Helper()
	testkit.RequireRoot(t, "a real containerd")
	bin, err := hosttools.Path("containerd")
	if err != nil {
		t.Fatalf("runtimetest: containerd is not installed (apt-get install containerd runc): %v", err)
	}
	if _, err := hosttools.Path("runc"); err != nil {
		t.Fatalf("runtimetest: runc is not installed: %v", err)
	}
	dir := t.TempDir()
	// The socket path must stay short (108 bytes): keep it out of the
	// test's directory, whose name grows with the test name.
	sockDir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatalf("runtimetest: socket directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	root, state := filepath.Join(dir, "root"), filepath.Join(dir, "state")
	sock := filepath.Join(sockDir, "c.sock")
	cfg := filepath.Join(dir, "config.toml")
	disabled := "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
	if opts.CRI != "" {
		disabled = ""
	}
	conf := fmt.Sprintf(configTemplate, disabled, sock, sock+".ttrpc", filepath.Join(root, "opt")) + opts.CRI
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatalf("runtimetest: write config: %v", err)
	}
	logPath := filepath.Join(dir, "containerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("runtimetest: log file: %v", err)
	}
	cmd := exec.Command(bin, "--root", root, "--state", state, "--address", sock, "--config", cfg)
	if opts.NetNS != "" {
		cmd = hosttools.Command("nsenter", "--net="+opts.NetNS, bin, "--root", root, "--state", state, "--address", sock, "--config", cfg)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// No Pdeathsig: it fires when the OS thread that started containerd
	// exits, and Go ends threads that a goroutine locked and left (as
	// network's netns creation does), which killed containerd mid-test.
	// The cleanup below stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("runtimetest: start containerd: %v", err)
	}
	// exited is closed, not sent on, when containerd exits, so that both
	// waitReady and the cleanup's stopProcess see it; waitErr is set first.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		cleanupContainerd(t, sock)
		stopProcess(t, cmd, exited)
		killStrayShims(t, sock)
		unmountUnder(t, root, state)
		if t.Failed() {
			logTail(t, logPath)
		}
	})
	waitReady(t, sock, exited, &waitErr)
	return sock
}

// waitReady polls containerd until it answers, and fails the test when it
// exits (*waitErr says how, once exited is closed) or 20 s pass. The
// cleanup of StartContainerdWith logs the tail of containerd's log then.
func waitReady(t testing.TB, sock string, exited <-chan struct{}, waitErr *error) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "the test containerd at "+sock+" to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("runtimetest: containerd exited at start: %v", *waitErr)
		default:
		}
		_, err := os.Stat(sock)
		return err == nil && answers(sock)
	})
}

// answers tells whether containerd at sock replies to a version call, as
// containerd.New checks when it connects; runtime/containerd's own tests
// import this package, so it does not import runtime/containerd.
func answers(sock string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		return false
	}
	defer client.Close()
	_, err = client.Version(ctx)
	return err == nil
}

// cleanupContainerd kills every task and deletes every container (with its
// snapshot) in every namespace, then the images' snapshots go with the
// root directory.
func cleanupContainerd(t testing.TB, sock string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := containerd.New(sock, containerd.WithTimeout(5*time.Second))
	if err != nil {
		t.Errorf("runtimetest cleanup: connect: %v", err)
		return
	}
	defer client.Close()
	nss, err := client.NamespaceService().List(ctx)
	if err != nil {
		t.Errorf("runtimetest cleanup: list namespaces: %v", err)
		return
	}
	for _, ns := range nss {
		nsCtx := namespaces.WithNamespace(ctx, ns)
		containers, err := client.Containers(nsCtx)
		if err != nil {
			t.Errorf("runtimetest cleanup: list containers in %s: %v", ns, err)
			continue
		}
		for _, c := range containers {
			if err := deleteContainer(nsCtx, c); err != nil {
				t.Errorf("runtimetest cleanup: %s/%s: %v", ns, c.ID(), err)
			}
		}
	}
}

func deleteContainer(ctx context.Context, c containerd.Container) error {
	task, err := c.Task(ctx, nil)
	if err == nil {
		if _, err := task.Delete(ctx, containerd.WithProcessKill); err != nil {
			return fmt.Errorf("delete task: %w", err)
		}
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		return fmt.Errorf("delete container: %w", err)
	}
	return nil
}

// stopProcess stops containerd with SIGTERM, then SIGKILL after 10 s.
func stopProcess(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(10 * time.Second):
	}
	t.Errorf("runtimetest: containerd did not stop on SIGTERM within 10s; killing it")
	_ = cmd.Process.Kill()
	<-exited
}

// killStrayShims kills shims of this containerd that outlived it. A shim
// whose task was deleted while containerd stopped can stay behind, serving
// nothing (seen once in 20 benchmark runs); it is logged, not failed, as
// the cleanup above already removed every container and task.
func killStrayShims(t testing.TB, sock string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if !strings.Contains(args[0], "containerd-shim") || !slices.Contains(args, sock) {
			continue
		}
		t.Logf("runtimetest: killing stray shim %d: %s", pid, strings.Join(args, " "))
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// unmountUnder unmounts every mount below the given directories, deepest
// first, and fails the test when there was any: the code under test left
// it behind.
func unmountUnder(t testing.TB, dirs ...string) {
	mounts, err := mountsUnder(dirs...)
	if err != nil {
		t.Errorf("runtimetest: %v", err)
		return
	}
	if len(mounts) == 0 {
		return
	}
	t.Errorf("runtimetest: mounts left under containerd's directories: %s", strings.Join(mounts, ", "))
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			t.Errorf("runtimetest: unmount %s: %v", mounts[i], err)
		}
	}
}

// mountsUnder lists the mount points under dirs, in mountinfo order.
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func logTail(t testing.TB, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("containerd log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}
