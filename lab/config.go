// Package lab runs a multi-node cluster on one machine: the control plane
// inside a network namespace of its own (the "lab" namespace, which holds a
// Linux bridge), and per node a network namespace wired to that bridge with
// a veth pair, a private containerd and a nodelet. Nothing gets an address
// on the host: the host reaches the API server through a small forwarder
// process that listens on 127.0.0.1 and dials into the lab namespace.
//
// Everything the lab makes is recorded in DIR/lab.json (see State), so Down
// can remove it all, even after a partial Up or a crash, and tests can read
// it. Leftovers lists whatever of a lab still exists.
package lab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// Defaults of Config.
const (
	DefaultName  = "lab"
	DefaultNodes = 3
	DefaultPort  = 6443
	// MaxNodes keeps node addresses inside the /24 and interface names
	// short; two cores do not run more anyway.
	MaxNodes = 100
)

// Addresses inside the lab. The /24 exists only inside the lab's
// namespaces, so traffic to it never leaves the machine.
const (
	BridgeName     = "lab0"
	ControlPlaneIP = "10.240.0.1"
	subnetPrefix   = "10.240.0."
	subnetBits     = 24
	// APIPort is the control plane's port inside the lab namespace.
	APIPort = 6443
)

// Config describes a lab. Up uses all of it; Down, KillNode and StartNode
// need only Name and Dir (and Out): the rest comes from the state file.
type Config struct {
	Name   string // short: it goes into interface, netns and cgroup names
	Dir    string // state directory; DefaultDir(Name) made absolute when empty
	BinDir string // holds controlplane, nodelet and pause
	// LabBinary is the nodelet-lab executable that runs the forwarder
	// (BinDir/nodelet-lab when empty).
	LabBinary string
	Nodes     int // number of nodes (node1..nodeN)
	// Port is the host port (on 127.0.0.1) of the forwarder to the API
	// server; 0 picks a free one.
	Port int
	// Extra flags appended to every controlplane and nodelet command line,
	// e.g. "--node-monitor-grace-period=10s".
	ControlPlaneArgs []string
	NodeletArgs      []string
	Out              io.Writer // progress lines; nothing when nil
}

// validName keeps names short enough for Linux interface names (the lab
// side of a node's veth is NAME-nI, at most 15 bytes) and free of '-', so
// that one lab's namespace names never prefix another's.
func validName(name string) error {
	if !regexp.MustCompile(`^[a-z][a-z0-9]{0,9}$`).MatchString(name) {
		return fmt.Errorf("lab name %q: use 1 to 10 lowercase letters and digits, starting with a letter", name)
	}
	return nil
}

// DefaultDir is the state directory of a lab (relative to the working
// directory): _output/lab, or _output/lab-NAME for another name.
func DefaultDir(name string) string {
	if name == DefaultName || name == "" {
		return filepath.Join("_output", "lab")
	}
	return filepath.Join("_output", "lab-"+name)
}

// RunDir holds the lab's sockets and the pods' netns files. It stays short
// because unix socket paths must be under 108 bytes.
func RunDir(name string) string { return "/run/nodelet-lab-" + name }

// LabNetNS is the name (under /run/netns) of the namespace that holds the
// bridge and the control plane.
func LabNetNS(name string) string { return "nlab-" + name }

// NodeName is the name of the i-th node (from 1).
func NodeName(i int) string { return fmt.Sprintf("node%d", i) }

// NodeIP is the i-th node's address on the lab bridge.
func NodeIP(i int) string { return fmt.Sprintf("%s%d", subnetPrefix, 10+i) }

func nodeNetNS(name string, i int) string    { return fmt.Sprintf("nlab-%s-n%d", name, i) }
func nodeRunDir(runDir string, i int) string { return filepath.Join(runDir, fmt.Sprintf("n%d", i)) }
func cgroupRoot(name string, i int) string   { return fmt.Sprintf("/nodelet-lab-%s-n%d", name, i) }

// labLink is the lab-side end of node i's veth, enslaved to the bridge.
// It is unique per lab, so a copy on the host would be recognisable.
func labLink(name string, i int) string { return fmt.Sprintf("%s-n%d", name, i) }

func netnsPath(ns string) string { return filepath.Join("/run/netns", ns) }

// nodeIndex parses "nodeI".
func nodeIndex(node string) (int, error) {
	var i int
	if _, err := fmt.Sscanf(node, "node%d", &i); err != nil || NodeName(i) != node || i < 1 {
		return 0, fmt.Errorf("%q is not a node name (node1, node2, ...)", node)
	}
	return i, nil
}

// complete fills in defaults and checks the configuration. needNodes is
// false for the commands that read the rest from the state file.
func (c *Config) complete(needNodes bool) error {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if err := validName(c.Name); err != nil {
		return err
	}
	if c.Dir == "" {
		c.Dir = DefaultDir(c.Name)
	}
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("lab directory %s: %w", c.Dir, err)
	}
	c.Dir = abs
	if c.Out == nil {
		c.Out = io.Discard
	}
	if !needNodes {
		return nil
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return fmt.Errorf("--nodes %d: want 1 to %d", c.Nodes, MaxNodes)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("--port %d: want 0 to 65535", c.Port)
	}
	if c.BinDir == "" {
		return errors.New("the directory of the controlplane, nodelet and pause binaries is required")
	}
	if c.BinDir, err = filepath.Abs(c.BinDir); err != nil {
		return fmt.Errorf("bin directory %s: %w", c.BinDir, err)
	}
	if c.LabBinary == "" {
		c.LabBinary = filepath.Join(c.BinDir, "nodelet-lab")
	}
	return nil
}

func (c *Config) logf(format string, args ...any) {
	fmt.Fprintf(c.Out, "nodelet-lab: "+format+"\n", args...)
}

// checkBinaries fails early, naming what is missing, rather than halfway
// through Up.
func (c *Config) checkBinaries() error {
	var missing []error
	for _, p := range []string{filepath.Join(c.BinDir, "controlplane"), filepath.Join(c.BinDir, "nodelet"),
		filepath.Join(c.BinDir, "nodelet-logger"), filepath.Join(c.BinDir, "pause"), c.LabBinary} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, fmt.Errorf("binary %s: %w (run make build)", p, err))
		}
	}
	return errors.Join(missing...)
}
