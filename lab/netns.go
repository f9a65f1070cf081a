package lab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/nodelet/nodelet/hosttools"
)

// The lab's network is made with iproute2's `ip`, the commands one would
// type to build it by hand (see the comments for what each step gives).

func ip(args ...string) error {
	out, err := hosttools.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func netnsExists(ns string) bool {
	_, err := os.Stat(netnsPath(ns))
	return err == nil
}

// makeLabNetwork creates the lab namespace with the bridge that every
// node's veth joins. The bridge has the control plane's address, which
// exists only inside this namespace.
func makeLabNetwork(st *State) error {
	ns := st.NetNS
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", st.Bridge, "type", "bridge"},
		{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", ControlPlaneIP, subnetBits), "dev", st.Bridge},
		{"-n", ns, "link", "set", st.Bridge, "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("lab namespace %s: %w", ns, err)
		}
	}
	return nil
}

// makeNodeNetwork creates the node's namespace and its veth pair. Both
// ends are created directly in their namespaces (eth0 in the node's, the
// peer in the lab's), so no link ever exists on the host, not even for a
// moment. No default route: the nodelet finds its address by the route to
// the control plane, which the /24 on eth0 gives.
func makeNodeNetwork(st *State, n *Node) error {
	steps := [][]string{
		{"netns", "add", n.NetNS},
		{"-n", n.NetNS, "link", "set", "lo", "up"},
		{"link", "add", "eth0", "netns", n.NetNS, "type", "veth", "peer", "name", n.Link, "netns", st.NetNS},
		{"-n", st.NetNS, "link", "set", n.Link, "master", st.Bridge, "up"},
		{"-n", n.NetNS, "addr", "add", fmt.Sprintf("%s/%d", n.IP, subnetBits), "dev", "eth0"},
		{"-n", n.NetNS, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("node %s namespace %s: %w", n.Name, n.NetNS, err)
		}
	}
	return nil
}

// deleteNetns removes a namespace's name. The namespace (and the veth ends
// and bridge in it) goes once no process is left inside.
func deleteNetns(ns string) error {
	if !netnsExists(ns) {
		return nil
	}
	if err := ip("netns", "del", ns); err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}

// labNetnses lists the namespaces of the lab by name: nlab-NAME and
// nlab-NAME-nI.
func labNetnses(name string) []string {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(LabNetNS(name)) + `(-n[0-9]+)?$`)
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if re.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// hostLabLinks lists links on the host that carry one of the lab's own
// link names (NAME-nI): the lab never makes any there, so one is a leak.
func hostLabLinks(name string) ([]string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list host links: %w", err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-n[0-9]+$`)
	var out []string
	for _, i := range ifaces {
		if re.MatchString(i.Name) {
			out = append(out, i.Name)
		}
	}
	return out, nil
}

// deleteHostLinks removes lab links found on the host.
func deleteHostLinks(name string) error {
	links, err := hostLabLinks(name)
	var errs []error
	for _, l := range links {
		errs = append(errs, ip("link", "del", l))
	}
	return errors.Join(append(errs, err)...)
}
