package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// StateFile is the name of the state file inside the lab directory.
const StateFile = "lab.json"

// State is everything a lab makes: Up writes it with every name and path
// before it makes anything, and again as each process starts, so Down
// finds all of it even after a partial Up. A PID of 0 means the process
// is not running (never started, or killed by KillNode).
type State struct {
	Name       string
	Dir        string // state directory (absolute)
	RunDir     string // sockets and pod netns files
	NetNS      string // the lab namespace (bridge and control plane), under /run/netns
	Bridge     string // the bridge inside NetNS
	Subnet     string // the lab's subnet, e.g. 10.240.0.0/24
	ImageDir   string // image archives every nodelet imports
	Kubeconfig string // admin (system:masters) kubeconfig for use on the host

	ControlPlane ControlPlane
	// The forwarder carries 127.0.0.1:ControlPlane.Port on the host to
	// the API server inside the lab namespace.
	ForwarderPID  int
	ForwarderArgs []string
	ForwarderLog  string

	Nodes []Node

	// What AddNode plans a node with, as Up planned the first ones: the
	// directory of the binaries and the extra nodelet flags.
	BinDir      string
	NodeletArgs []string
}

// ControlPlane is the controlplane process inside the lab namespace.
type ControlPlane struct {
	NetNS   string // same as State.NetNS
	PID     int
	Args    []string // full argv, including the nsenter prefix
	DataDir string
	URL     string // inside the lab: https://10.240.0.1:6443
	// Port is the host port of the forwarder: HostURL is
	// https://127.0.0.1:Port and reaches the API server from the host.
	Port    int
	HostURL string
	Log     string
}

// Node is one node: its namespace, containerd and nodelet.
type Node struct {
	Name  string // node1, node2, ...
	NetNS string // under /run/netns
	IP    string // address of eth0 inside NetNS
	Link  string // lab-side end of the node's veth (in the lab namespace)
	Dir   string // DIR/nodeI: everything of the node on disk

	ContainerdAddress string
	ContainerdPID     int
	ContainerdArgs    []string // full argv, including the nsenter prefix
	ContainerdRoot    string
	ContainerdState   string
	ContainerdLog     string

	NodeletPID  int
	NodeletArgs []string // full argv, including the nsenter prefix
	NodeletLog  string
	Kubeconfig  string // the node's own identity, system:node:NAME

	RootDir    string // the nodelet's --root-dir
	PodLogDir  string // the nodelet's --pod-log-dir
	NetNSDir   string // the pods' netns files
	CgroupRoot string // the nodelet's --cgroup-root, in every hierarchy
	LogDir     string // holds containerd.log and nodelet.log
}

// Load reads DIR/lab.json.
func Load(dir string) (*State, error) {
	path := filepath.Join(dir, StateFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read lab state %s: %w", path, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("parse lab state %s: %w", path, err)
	}
	return &st, nil
}

// save writes the state file atomically, so a crash leaves the old one.
func (st *State) save() error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	path := filepath.Join(st.Dir, StateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write lab state %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lab state %s: %w", path, err)
	}
	return nil
}

// node returns the node called name.
func (st *State) node(name string) (*Node, error) {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return &st.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("lab %s has no node %q", st.Name, name)
}

// tools are the host programs the lab's command lines start with.
type tools struct {
	nsenter    string
	containerd string
}

// plan computes the lab's names, paths and command lines from the
// configuration; nothing is made yet and no PID is set.
func plan(c *Config, t tools) *State {
	st := &State{
		Name: c.Name, Dir: c.Dir, RunDir: RunDir(c.Name), NetNS: LabNetNS(c.Name), Bridge: BridgeName,
		Subnet:     subnetPrefix + "0/" + strconv.Itoa(subnetBits),
		ImageDir:   filepath.Join(c.Dir, "images"),
		Kubeconfig: filepath.Join(c.Dir, "kubeconfig"),
		BinDir:     c.BinDir, NodeletArgs: c.NodeletArgs,
	}
	cp := &st.ControlPlane
	cp.NetNS, cp.DataDir = st.NetNS, filepath.Join(c.Dir, "controlplane")
	cp.URL = fmt.Sprintf("https://%s:%d", ControlPlaneIP, APIPort)
	cp.Port, cp.HostURL = c.Port, fmt.Sprintf("https://127.0.0.1:%d", c.Port)
	cp.Log = filepath.Join(c.Dir, "controlplane.log")
	cp.Args = append([]string{t.nsenter, "--net=" + netnsPath(st.NetNS), filepath.Join(c.BinDir, "controlplane"),
		"--data-dir", cp.DataDir, "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(APIPort),
		"--advertise-address", ControlPlaneIP, "--tls-san", ControlPlaneIP}, c.ControlPlaneArgs...)
	st.ForwarderLog = filepath.Join(c.Dir, "forwarder.log")
	st.ForwarderArgs = []string{c.LabBinary, "forward", "--listen", fmt.Sprintf("127.0.0.1:%d", c.Port),
		"--netns", netnsPath(st.NetNS), "--to", fmt.Sprintf("%s:%d", ControlPlaneIP, APIPort)}
	for i := 1; i <= c.Nodes; i++ {
		st.Nodes = append(st.Nodes, planNode(c, t, st, i))
	}
	return st
}

func planNode(c *Config, t tools, st *State, i int) Node {
	dir := filepath.Join(c.Dir, NodeName(i))
	run := nodeRunDir(st.RunDir, i)
	n := Node{
		Name: NodeName(i), NetNS: nodeNetNS(c.Name, i), IP: NodeIP(i), Link: labLink(c.Name, i), Dir: dir,
		ContainerdAddress: filepath.Join(run, "containerd.sock"),
		ContainerdRoot:    filepath.Join(dir, "containerd"), ContainerdState: filepath.Join(run, "state"),
		ContainerdLog: filepath.Join(dir, "containerd.log"), NodeletLog: filepath.Join(dir, "nodelet.log"),
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		RootDir:    filepath.Join(dir, "root"), PodLogDir: filepath.Join(dir, "pods"),
		NetNSDir: filepath.Join(run, "netns"), CgroupRoot: cgroupRoot(c.Name, i), LogDir: dir,
	}
	// nsenter enters only the network namespace: `ip netns exec` would
	// also make a mount namespace that hides the cgroup mounts from runc.
	enter := []string{t.nsenter, "--net=" + netnsPath(n.NetNS)}
	n.ContainerdArgs = slices.Concat(enter, []string{t.containerd, "--config", filepath.Join(dir, "containerd.toml"),
		"--root", n.ContainerdRoot, "--state", n.ContainerdState, "--address", n.ContainerdAddress})
	n.NodeletArgs = slices.Concat(enter, []string{filepath.Join(c.BinDir, "nodelet"),
		"--kubeconfig", n.Kubeconfig, "--node-name", n.Name,
		"--root-dir", n.RootDir, "--pod-log-dir", n.PodLogDir,
		"--containerd-address", n.ContainerdAddress,
		"--cni-conf-dir", filepath.Join(dir, "net.d"), "--cni-bin-dir", "/usr/lib/cni:/opt/cni/bin",
		"--netns-dir", n.NetNSDir, "--cgroup-driver", "cgroupfs", "--cgroup-root", n.CgroupRoot,
		"--image-dir", st.ImageDir, "--pause-binary", filepath.Join(c.BinDir, "pause"),
		"--tls-cert-file", filepath.Join(dir, "serving.crt"), "--tls-private-key-file", filepath.Join(dir, "serving.key"),
		"--cluster-dns", "10.96.0.10", "--resolv-conf", filepath.Join(dir, "resolv.conf")})
	n.NodeletArgs = append(n.NodeletArgs, c.NodeletArgs...)
	return n
}

// containerdConfig is a minimal containerd configuration, as
// runtime/runtimetest uses: no CRI plugin (the nodelet talks to
// containerd's own API), private sockets, the opt directory in the root.
func containerdConfig(n *Node) string {
	return fmt.Sprintf(`version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
oom_score = 0

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, n.ContainerdAddress, n.ContainerdAddress+".ttrpc", filepath.Join(n.ContainerdRoot, "opt"))
}
