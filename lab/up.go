package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/images"
)

// Up makes the lab and returns its state once the API server answers
// through the forwarder and every node is Ready. Everything keeps running
// after the caller exits. On failure, Up removes what it made (Down) and
// returns the error.
func Up(ctx context.Context, cfg Config) (_ *State, retErr error) {
	if err := cfg.complete(true); err != nil {
		return nil, err
	}
	if err := checkFree(cfg); err != nil {
		return nil, err
	}
	if err := cfg.checkBinaries(); err != nil {
		return nil, err
	}
	t, err := lookTools()
	if err != nil {
		return nil, err
	}
	if cfg.Port == 0 {
		if cfg.Port, err = freePort(); err != nil {
			return nil, err
		}
	} else if err := portFree(cfg.Port); err != nil {
		return nil, err
	}
	st := plan(&cfg, t)
	defer func() {
		if retErr == nil {
			return
		}
		cfg.logf("up failed; removing what was made")
		// A fresh context: ctx may be the reason Up failed (Ctrl-C).
		downCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := Down(downCtx, Config{Name: cfg.Name, Dir: cfg.Dir, Out: cfg.Out}); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("cleaning up after the failed up: %w", err))
		}
	}()
	if err := upSteps(ctx, &cfg, st); err != nil {
		return nil, err
	}
	return st, nil
}

// upSteps makes the lab in order. The state file is written first, with
// every name and path planned, and again as soon as each process has a
// PID, so Down always knows what to remove.
func upSteps(ctx context.Context, cfg *Config, st *State) error {
	for _, d := range []string{st.Dir, st.RunDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := st.save(); err != nil {
		return err
	}
	cfg.logf("building images into %s", st.ImageDir)
	if err := buildImages(st.ImageDir); err != nil {
		return err
	}
	cfg.logf("creating namespace %s with bridge %s (%s)", st.NetNS, st.Bridge, st.Subnet)
	if err := makeLabNetwork(st); err != nil {
		return err
	}
	for i := range st.Nodes {
		if err := makeNodeNetwork(st, &st.Nodes[i]); err != nil {
			return err
		}
	}
	if err := startControlPlane(ctx, cfg, st); err != nil {
		return err
	}
	for i := range st.Nodes {
		if err := startNode(ctx, cfg, st, &st.Nodes[i]); err != nil {
			return err
		}
	}
	return waitNodesReady(ctx, cfg, st)
}

// checkFree refuses to make a lab over one that exists, or over the
// leftovers of one that was not removed.
func checkFree(cfg Config) error {
	if _, err := os.Stat(filepath.Join(cfg.Dir, StateFile)); err == nil {
		return fmt.Errorf("lab %s is already up (state in %s); remove it first with: nodelet-lab down --name %s",
			cfg.Name, filepath.Join(cfg.Dir, StateFile), cfg.Name)
	}
	if left := Leftovers(cfg.Name, cfg.Dir); len(left) > 0 {
		return fmt.Errorf("lab %s still has leftovers of an earlier run (%s); remove them with: nodelet-lab down --name %s",
			cfg.Name, strings.Join(left, "; "), cfg.Name)
	}
	return nil
}

func lookTools() (tools, error) {
	var t tools
	var errs []error
	for _, p := range []struct {
		name string
		dst  *string
	}{{"nsenter", &t.nsenter}, {"containerd", &t.containerd}, {"runc", new(string)}, {"ip", new(string)}} {
		path, err := hosttools.Path(p.name)
		if err != nil {
			errs = append(errs, err)
		}
		*p.dst = path
	}
	return t, errors.Join(errs...)
}

// freePort asks the kernel for a free port on loopback. Another process
// could take it before the forwarder binds it; the forwarder then fails
// and Up says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is taken (another cluster?); pass --port 0 to pick a free one: %w", port, err)
	}
	return ln.Close()
}

// buildImages writes the nginx and busybox images, built from the host's
// binaries (no registry is needed); each nodelet imports them at start.
func buildImages(dir string) error {
	if _, _, err := images.Busybox(dir); err != nil {
		return fmt.Errorf("build busybox image into %s: %w", dir, err)
	}
	if _, _, err := images.Nginx(dir); err != nil {
		return fmt.Errorf("build nginx image into %s: %w", dir, err)
	}
	return nil
}

// startControlPlane starts the control plane inside the lab namespace and
// the forwarder to it, writes the host's admin kubeconfig and waits for
// /readyz through the forwarder, then for the default ServiceAccount.
func startControlPlane(ctx context.Context, cfg *Config, st *State) error {
	cp := &st.ControlPlane
	cfg.logf("starting the control plane in %s (log %s)", st.NetNS, cp.Log)
	pid, err := startDetached(cp.Args, cp.Log)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	cp.PID = pid
	if err := st.save(); err != nil {
		return err
	}
	cpProc := watched{what: "the control plane", pid: cp.PID, argv: cp.Args, log: cp.Log}
	admin := filepath.Join(cp.DataDir, pki.AdminKubeconfigName)
	if err := waitFor(ctx, "the control plane's certificate authority", time.Minute, []watched{cpProc},
		func(context.Context) (bool, error) { _, err := os.Stat(admin); return err == nil, err }); err != nil {
		return err
	}
	if st.ForwarderPID, err = startDetached(st.ForwarderArgs, st.ForwarderLog); err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	if err := st.save(); err != nil {
		return err
	}
	if err := writeKubeconfig(cfg, st.Kubeconfig, "lab-admin", "system:masters", cp.HostURL); err != nil {
		return err
	}
	cs, err := clientFor(st.Kubeconfig)
	if err != nil {
		return err
	}
	fwd := watched{what: "the forwarder", pid: st.ForwarderPID, argv: st.ForwarderArgs, log: st.ForwarderLog}
	if err := waitFor(ctx, "the API server's /readyz at "+cp.HostURL, 2*time.Minute, []watched{cpProc, fwd}, apiReady(cs)); err != nil {
		return err
	}
	return waitFor(ctx, "the default ServiceAccount", time.Minute, []watched{cpProc, fwd}, defaultAccountReady(cs))
}

// writeKubeconfig has the control plane sign a client certificate for
// user in group and writes a kubeconfig for server.
func writeKubeconfig(cfg *Config, path, user, group, server string) error {
	cmd := exec.Command(filepath.Join(cfg.BinDir, "controlplane"), "kubeconfig", "--data-dir",
		filepath.Join(cfg.Dir, "controlplane"), "--user", user, "--group", group, "--server", server)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubeconfig for %s: controlplane kubeconfig: %w: %s", user, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("kubeconfig for %s: %w", user, err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return fmt.Errorf("kubeconfig for %s: write %s: %w", user, path, err)
	}
	return nil
}

// waitNodesReady waits until every node is Ready, giving up early when one
// of the lab's processes exits.
func waitNodesReady(ctx context.Context, cfg *Config, st *State) error {
	return waitReady(ctx, cfg, st, st.Nodes)
}

// waitReady waits until nodes are Ready, giving up early when the control
// plane, the forwarder or one of their processes exits.
func waitReady(ctx context.Context, cfg *Config, st *State, nodes []Node) error {
	cfg.logf("waiting for %d node(s) to be Ready", len(nodes))
	cs, err := clientFor(st.Kubeconfig)
	if err != nil {
		return err
	}
	procs := []watched{
		{what: "the control plane", pid: st.ControlPlane.PID, argv: st.ControlPlane.Args, log: st.ControlPlane.Log},
		{what: "the forwarder", pid: st.ForwarderPID, argv: st.ForwarderArgs, log: st.ForwarderLog},
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		procs = append(procs, watched{what: "containerd of " + n.Name, pid: n.ContainerdPID, argv: n.ContainerdArgs, log: n.ContainerdLog},
			watched{what: "the nodelet of " + n.Name, pid: n.NodeletPID, argv: n.NodeletArgs, log: n.NodeletLog})
	}
	timeout := 2*time.Minute + time.Duration(len(nodes))*30*time.Second
	return waitFor(ctx, "every node to be Ready", timeout, procs, nodesReady(cs, names))
}
