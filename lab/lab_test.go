package lab

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, name := range []string{"lab", "t1", "abcdefghij"} {
		if err := validName(name); err != nil {
			t.Errorf("validName(%q): %v", name, err)
		}
	}
	// '-' would let one lab's namespace names prefix another's; 11 chars
	// would overflow the 15-byte interface name NAME-n100.
	for _, name := range []string{"", "1lab", "Lab", "my-lab", "a_b", "abcdefghijk"} {
		if err := validName(name); err == nil {
			t.Errorf("validName(%q) = nil, want an error", name)
		}
	}
	if got := len(labLink("abcdefghij", MaxNodes)); got > 15 {
		t.Errorf("longest link name has %d bytes, Linux allows 15", got)
	}
}

func TestNames(t *testing.T) {
	if got := DefaultDir("lab"); got != filepath.Join("_output", "lab") {
		t.Errorf("DefaultDir(lab) = %s", got)
	}
	if got := DefaultDir("t1"); got != filepath.Join("_output", "lab-t1") {
		t.Errorf("DefaultDir(t1) = %s", got)
	}
	checks := map[string]string{
		RunDir("t1"): "/run/nodelet-lab-t1", LabNetNS("t1"): "nlab-t1", nodeNetNS("t1", 2): "nlab-t1-n2",
		NodeName(3): "node3", NodeIP(1): "10.240.0.11", NodeIP(MaxNodes): "10.240.0.110",
		cgroupRoot("t1", 2): "/nodelet-lab-t1-n2", labLink("t1", 2): "t1-n2",
	}
	for got, want := range checks {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	for _, bad := range []string{"node0", "node", "nodex", "node01", "n1", "node1x"} {
		if _, err := nodeIndex(bad); err == nil {
			t.Errorf("nodeIndex(%q) = nil error", bad)
		}
	}
	if i, err := nodeIndex("node12"); err != nil || i != 12 {
		t.Errorf("nodeIndex(node12) = %d, %v", i, err)
	}
}

func testPlan(t *testing.T) *State {
	t.Helper()
	cfg := Config{Name: "t1", Dir: "/tmp/labdir", BinDir: "/opt/bin", Nodes: 2, Port: 7443,
		ControlPlaneArgs: []string{"--node-monitor-grace-period=10s"}, NodeletArgs: []string{"--log-level=debug"}}
	if err := cfg.complete(true); err != nil {
		t.Fatal(err)
	}
	return plan(&cfg, tools{nsenter: "/usr/bin/nsenter", containerd: "/usr/bin/containerd"})
}

func TestPlan(t *testing.T) {
	st := testPlan(t)
	cp := st.ControlPlane
	wantCP := []string{"/usr/bin/nsenter", "--net=/run/netns/nlab-t1", "/opt/bin/controlplane",
		"--data-dir", "/tmp/labdir/controlplane", "--bind-address", "0.0.0.0", "--secure-port", "6443",
		"--advertise-address", "10.240.0.1", "--tls-san", "10.240.0.1", "--node-monitor-grace-period=10s"}
	if !reflect.DeepEqual(cp.Args, wantCP) {
		t.Errorf("control plane argv:\n got %q\nwant %q", cp.Args, wantCP)
	}
	if cp.URL != "https://10.240.0.1:6443" || cp.HostURL != "https://127.0.0.1:7443" || cp.Port != 7443 {
		t.Errorf("control plane URLs: %s, %s, %d", cp.URL, cp.HostURL, cp.Port)
	}
	wantFwd := []string{"/opt/bin/nodelet-lab", "forward", "--listen", "127.0.0.1:7443",
		"--netns", "/run/netns/nlab-t1", "--to", "10.240.0.1:6443"}
	if !reflect.DeepEqual(st.ForwarderArgs, wantFwd) {
		t.Errorf("forwarder argv:\n got %q\nwant %q", st.ForwarderArgs, wantFwd)
	}
	if len(st.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(st.Nodes))
	}
	n := st.Nodes[1]
	if n.Name != "node2" || n.NetNS != "nlab-t1-n2" || n.IP != "10.240.0.12" || n.CgroupRoot != "/nodelet-lab-t1-n2" {
		t.Errorf("node2: %+v", n)
	}
	if got := n.NodeletArgs[:3]; !reflect.DeepEqual(got, []string{"/usr/bin/nsenter", "--net=/run/netns/nlab-t1-n2", "/opt/bin/nodelet"}) {
		t.Errorf("nodelet argv starts %q", got)
	}
	if got := n.ContainerdArgs[:3]; !reflect.DeepEqual(got, []string{"/usr/bin/nsenter", "--net=/run/netns/nlab-t1-n2", "/usr/bin/containerd"}) {
		t.Errorf("containerd argv starts %q", got)
	}
	for flag, want := range map[string]string{
		"--node-name": "node2", "--kubeconfig": "/tmp/labdir/node2/kubeconfig", "--containerd-address": n.ContainerdAddress,
		"--cgroup-root": "/nodelet-lab-t1-n2", "--cgroup-driver": "cgroupfs", "--netns-dir": "/run/nodelet-lab-t1/n2/netns",
		"--image-dir": "/tmp/labdir/images", "--pause-binary": "/opt/bin/pause", "--cni-bin-dir": "/usr/lib/cni:/opt/cni/bin",
	} {
		if got := flagValue(n.NodeletArgs, flag); got != want {
			t.Errorf("nodelet %s = %q, want %q", flag, got, want)
		}
	}
	if slices.Contains(n.NodeletArgs, "--node-ip") {
		t.Errorf("nodelet argv has --node-ip; the nodelet must find its address by the route: %q", n.NodeletArgs)
	}
	if last := n.NodeletArgs[len(n.NodeletArgs)-1]; last != "--log-level=debug" {
		t.Errorf("extra nodelet args not appended last: %q", last)
	}
	// Unix socket paths must fit in 108 bytes, the ttrpc one included.
	if l := len(RunDir("abcdefghij") + "/n100/containerd.sock.ttrpc"); l >= 108 {
		t.Errorf("longest socket path has %d bytes", l)
	}
}

func flagValue(argv []string, flag string) string {
	if i := slices.Index(argv, flag); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

func TestStateRoundTrip(t *testing.T) {
	st := testPlan(t)
	st.Dir = t.TempDir()
	st.Nodes[0].NodeletPID = 1234
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("Load after save:\n got %+v\nwant %+v", got, st)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
}

func TestContainerdConfig(t *testing.T) {
	n := testPlan(t).Nodes[0]
	conf := containerdConfig(&n)
	for _, want := range []string{`disabled_plugins = ["io.containerd.grpc.v1.cri"]`,
		`address = "/run/nodelet-lab-t1/n1/containerd.sock"`, `address = "/run/nodelet-lab-t1/n1/containerd.sock.ttrpc"`,
		`path = "/tmp/labdir/node1/containerd/opt"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, conf)
		}
	}
}

func TestMatchesArgv(t *testing.T) {
	argv := []string{"/usr/bin/nsenter", "--net=/run/netns/x", "/bin/nodelet", "--a"}
	cases := []struct {
		cmd  []string
		want bool
	}{
		{argv, true},                             // before nsenter execs
		{[]string{"/bin/nodelet", "--a"}, true},  // after
		{[]string{"/bin/nodelet", "--b"}, false}, // a reused PID
		{nil, false},                             // gone, or a zombie
		{[]string{"--net=/run/netns/x", "/bin/nodelet", "--a"}, false},
	}
	for _, c := range cases {
		if got := matchesArgv(c.cmd, argv); got != c.want {
			t.Errorf("matchesArgv(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
	plain := []string{"/bin/nodelet-lab", "forward"}
	if matchesArgv([]string{"forward"}, plain) {
		t.Error("a command without the nsenter prefix matched its tail")
	}
}

func TestLabPathRE(t *testing.T) {
	re := labPathRE("t1", "/w/_output/lab-t1")
	for _, arg := range []string{"/w/_output/lab-t1", "--root=/w/_output/lab-t1/node1/root", "/run/nodelet-lab-t1/n1/containerd.sock",
		"--net=/run/netns/nlab-t1", "--net=/run/netns/nlab-t1-n12", "/run/netns/nlab-t1/"} {
		if !re.MatchString(arg) {
			t.Errorf("%q does not match", arg)
		}
	}
	// Other labs' paths: t10, and the default lab's directory next to ours.
	for _, arg := range []string{"/w/_output/lab-t10", "/run/nodelet-lab-t10/n1/containerd.sock", "--net=/run/netns/nlab-t10",
		"--net=/run/netns/nlab-t1-n1x", "/w/_output/lab", "nodelet"} {
		if re.MatchString(arg) {
			t.Errorf("%q matches", arg)
		}
	}
}

func TestDeepestFirst(t *testing.T) {
	in := []string{"/r/a", "/r/a/b/c", "/r/a/b", "/r/x", "/r/a/b"}
	want := []string{"/r/a/b/c", "/r/a/b", "/r/a/b", "/r/x", "/r/a"}
	if got := deepestFirst(in); !reflect.DeepEqual(got, want) {
		t.Errorf("deepestFirst = %q, want %q", got, want)
	}
}

func TestLeftoversOfNothing(t *testing.T) {
	// A lab that never existed leaves nothing (this reads /proc, /run/netns,
	// the cgroup hierarchies and mountinfo, and changes nothing).
	if left := Leftovers("zzneverup", filepath.Join(t.TempDir(), "none")); len(left) > 0 {
		t.Errorf("Leftovers of a lab never made: %q", left)
	}
}

func TestNextNodeIndex(t *testing.T) {
	st := testPlan(t) // node1, node2
	if st.BinDir != "/opt/bin" || !reflect.DeepEqual(st.NodeletArgs, []string{"--log-level=debug"}) {
		t.Errorf("the plan does not record what AddNode needs: BinDir %q, NodeletArgs %q", st.BinDir, st.NodeletArgs)
	}
	for _, c := range []struct {
		nodes  []string
		traces []int
		want   int
	}{
		{[]string{"node1", "node2"}, nil, 3},
		{[]string{"node1", "node2"}, []int{1, 2}, 3},
		{[]string{"node1", "node3"}, []int{1, 3}, 4}, // node2 removed: never reused while node3 exists
		{[]string{"node1"}, []int{1, 5}, 6},          // node5's remains: not met by the new node
		{nil, nil, 1},
	} {
		st.Nodes = nil
		for _, name := range c.nodes {
			st.Nodes = append(st.Nodes, Node{Name: name})
		}
		if got, err := nextNodeIndex(st, c.traces); err != nil || got != c.want {
			t.Errorf("nodes %v, traces %v: next %d (%v), want %d", c.nodes, c.traces, got, err, c.want)
		}
	}
	st.Nodes = []Node{{Name: NodeName(MaxNodes)}}
	if i, err := nextNodeIndex(st, nil); err == nil {
		t.Errorf("next after node%d = %d, want an error", MaxNodes, i)
	}
}
