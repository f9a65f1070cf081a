package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

const testPodCIDR = "10.244.7.0/24"

func testPod(id string, ports ...PortMapping) PodNetwork {
	return PodNetwork{ID: id, Namespace: "default", Name: "pod-" + id, UID: "uid-" + id, PortMappings: ports}
}

func setupTestNetwork(t *testing.T, base, podCIDR string) *Network {
	t.Helper()
	n := newTestNetwork(t, base)
	if err := n.EnsureConfig(podCIDR); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustSetup(t *testing.T, n *Network, p PodNetwork) Result {
	t.Helper()
	res, err := n.SetupPod(context.Background(), p)
	if err != nil {
		t.Fatalf("SetupPod(%s): %v", p.ID, err)
	}
	t.Cleanup(func() { _ = n.TeardownPod(context.Background(), p) })
	return res
}

// reservedIPs maps the addresses host-local holds to their sandbox.
func reservedIPs(t *testing.T, n *Network) map[string]string {
	t.Helper()
	rs, err := reservations(n.cfg.IPAMDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[r.IP.String()] = r.ContainerID
	}
	return out
}

func cacheEntries(t *testing.T, n *Network, id string) int {
	t.Helper()
	atts, err := n.cni.GetCachedAttachments(id)
	if err != nil {
		t.Fatal(err)
	}
	return len(atts)
}

func natRules(t *testing.T) string {
	t.Helper()
	out, err := hosttools.Command("iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -t nat -S: %v\n%s", err, out)
	}
	return string(out)
}

// assertGone checks that nothing of sandbox id is left.
func assertGone(t *testing.T, n *Network, id, ip string) {
	t.Helper()
	if owner, ok := reservedIPs(t, n)[ip]; ok {
		t.Errorf("IP %s still reserved for %s after teardown of %s", ip, owner, id)
	}
	if _, err := os.Lstat(n.NetNSPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns of %s still there: %v", id, err)
	}
	if c := cacheEntries(t, n, id); c != 0 {
		t.Errorf("%d CNI cache entries left for %s", c, id)
	}
}

func TestPodNetworkLifecycle(t *testing.T) {
	requireRootNetTools(t)
	testkit.InNodeNetns(t, func(t *testing.T, base string) {
		ctx := context.Background()
		n := setupTestNetwork(t, base, testPodCIDR)
		prefix := netip.MustParsePrefix(testPodCIDR)
		gateway := prefix.Addr().Next().String()

		a := testPod("aaaa1111", PortMapping{HostPort: 18080, ContainerPort: 80, Protocol: "TCP"})
		b := testPod("bbbb2222")
		resA, resB := mustSetup(t, n, a), mustSetup(t, n, b)
		for _, r := range []Result{resA, resB} {
			if !prefix.Contains(r.IP) || r.IP.String() == gateway {
				t.Errorf("pod IP %s not a pod address of %s", r.IP, testPodCIDR)
			}
		}
		if resA.IP == resB.IP {
			t.Fatalf("both pods got %s", resA.IP)
		}
		if resA.NetNSPath != n.NetNSPath(a.ID) || !isNetNS(resA.NetNSPath) {
			t.Errorf("netns %s is not a live netns at the expected path", resA.NetNSPath)
		}
		if _, err := netlink.LinkByName("nlt0"); err != nil {
			t.Errorf("bridge nlt0 not in the node netns: %v", err)
		}
		held := reservedIPs(t, n)
		if held[resA.IP.String()] != a.ID || held[resB.IP.String()] != b.ID {
			t.Errorf("host-local reservations = %v", held)
		}

		ping(t, resA.NetNSPath, resB.IP.String())
		ping(t, resB.NetNSPath, resA.IP.String())
		ping(t, resA.NetNSPath, gateway)
		ping(t, resA.NetNSPath, "127.0.0.1") // lo is up

		if rules := natRules(t); !strings.Contains(rules, "--dport 18080") {
			t.Errorf("no portmap DNAT rule for hostPort 18080:\n%s", rules)
		}
		again, err := n.SetupPod(ctx, a)
		if err != nil || again.IP != resA.IP {
			t.Errorf("second SetupPod(a) = %v, %v; want the same IP %s", again.IP, err, resA.IP)
		}

		for i := range 2 { // teardown is idempotent
			if err := n.TeardownPod(ctx, a); err != nil {
				t.Fatalf("TeardownPod(a) #%d: %v", i+1, err)
			}
		}
		assertGone(t, n, a.ID, resA.IP.String())
		if rules := natRules(t); strings.Contains(rules, "--dport 18080") {
			t.Errorf("portmap rule for hostPort 18080 survived teardown:\n%s", rules)
		}

		// The netns vanishes under us (deleted by hand, or a reboot):
		// teardown still releases the address.
		if err := removeNetNS(resB.NetNSPath); err != nil {
			t.Fatal(err)
		}
		if err := n.TeardownPod(ctx, b); err != nil {
			t.Fatalf("TeardownPod(b) without its netns: %v", err)
		}
		assertGone(t, n, b.ID, resB.IP.String())
		if left := reservedIPs(t, n); len(left) != 0 {
			t.Errorf("reservations left: %v", left)
		}
	})
}

func TestTeardownWithoutCNIRecord(t *testing.T) {
	requireRootNetTools(t)
	testkit.InNodeNetns(t, func(t *testing.T, base string) {
		n := setupTestNetwork(t, base, testPodCIDR)
		p := testPod("cccc3333")
		res := mustSetup(t, n, p)
		// A crash between the plugins' ADD and libcni's record leaves an
		// address and a netns but no cache entry.
		if err := os.RemoveAll(filepath.Join(n.cfg.CacheDir, "results")); err != nil {
			t.Fatal(err)
		}
		if err := n.TeardownPod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		assertGone(t, n, p.ID, res.IP.String())
	})
}

func TestSetupPodRollsBackOnFailure(t *testing.T) {
	requireRootNetTools(t)
	testkit.InNodeNetns(t, func(t *testing.T, base string) {
		// A /30 holds the gateway and a single pod: the second ADD fails.
		n := setupTestNetwork(t, base, "10.244.9.0/30")
		first := mustSetup(t, n, testPod("dddd4444"))
		p := testPod("eeee5555")
		if _, err := n.SetupPod(context.Background(), p); err == nil {
			t.Fatalf("SetupPod in a full /30 succeeded")
		}
		assertGone(t, n, p.ID, "")
		if held := reservedIPs(t, n); len(held) != 1 || held[first.IP.String()] != "dddd4444" {
			t.Errorf("reservations after the failed ADD = %v", held)
		}
		if ports := bridgePorts(t, "nlt0"); len(ports) != 1 {
			t.Errorf("bridge ports after the failed ADD = %v, want only the first pod's", ports)
		}
	})
}

func bridgePorts(t *testing.T, bridge string) []string {
	t.Helper()
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		t.Fatal(err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			ports = append(ports, l.Attrs().Name)
		}
	}
	return ports
}

func TestReconcileReleasesLeaks(t *testing.T) {
	requireRootNetTools(t)
	testkit.InNodeNetns(t, func(t *testing.T, base string) {
		ctx := context.Background()
		n := setupTestNetwork(t, base, testPodCIDR)
		leaked, live := testPod("ffff6666"), testPod("99997777")
		resLeaked, resLive := mustSetup(t, n, leaked), mustSetup(t, n, live)
		// An address whose owner left no other trace (host-local's file only).
		stray := filepath.Join(n.cfg.IPAMDir, "nodelet-test", "10.244.7.200")
		if err := os.WriteFile(stray, []byte("deadbeef\r\neth0"), 0o644); err != nil {
			t.Fatal(err)
		}
		liveSet := map[string]bool{live.ID: true}

		// The same Network spares what it set up a moment ago ...
		if err := n.Reconcile(ctx, liveSet); err != nil {
			t.Fatal(err)
		}
		if !isNetNS(resLeaked.NetNSPath) {
			t.Fatalf("Reconcile tore down a pod set up a moment ago")
		}
		if _, ok := reservedIPs(t, n)["10.244.7.200"]; ok {
			t.Errorf("stray reservation survived Reconcile")
		}

		// ... a restarted nodelet does not know it and cleans up.
		restarted := newTestNetwork(t, base)
		if err := restarted.Reconcile(ctx, liveSet); err != nil {
			t.Fatal(err)
		}
		assertGone(t, n, leaked.ID, resLeaked.IP.String())
		if !isNetNS(resLive.NetNSPath) || reservedIPs(t, n)[resLive.IP.String()] != live.ID {
			t.Fatalf("Reconcile touched the live pod")
		}
		ping(t, resLive.NetNSPath, "10.244.7.1")
		if err := restarted.TeardownPod(ctx, live); err != nil {
			t.Fatal(err)
		}
		assertGone(t, n, live.ID, resLive.IP.String())
		entries, _ := os.ReadDir(n.cfg.NetNSDir)
		if len(entries) != 0 {
			t.Errorf("netns dir not empty: %v", fmt.Sprint(entries))
		}
	})
}

func TestConcurrentPodsAndRestartReconcile(t *testing.T) {
	requireRootNetTools(t)
	testkit.InNodeNetns(t, func(t *testing.T, base string) {
		ctx := context.Background()
		n := setupTestNetwork(t, base, testPodCIDR)
		const pods = 12
		results := make([]Result, pods)
		errs := make([]error, pods)
		var wg sync.WaitGroup
		for i := range pods {
			wg.Go(func() {
				results[i], errs[i] = n.SetupPod(ctx, testPod(fmt.Sprintf("conc%04d", i)))
			})
		}
		wg.Wait()
		seen := map[netip.Addr]bool{}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("SetupPod #%d: %v", i, err)
			}
			if seen[results[i].IP] {
				t.Errorf("IP %s handed out twice", results[i].IP)
			}
			seen[results[i].IP] = true
		}
		ping(t, results[0].NetNSPath, results[pods-1].IP.String())

		// After a "crash", nothing is live any more.
		if err := newTestNetwork(t, base).Reconcile(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			assertGone(t, n, fmt.Sprintf("conc%04d", i), r.IP.String())
		}
		if ports := bridgePorts(t, "nlt0"); len(ports) != 0 {
			t.Errorf("bridge ports left after Reconcile: %v", ports)
		}
	})
}
