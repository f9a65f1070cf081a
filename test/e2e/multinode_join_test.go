package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/lab"
	"github.com/nodelet/nodelet/network"
	"github.com/nodelet/nodelet/test/testkit"
)

// testDaemonSetNewNode adds a fourth node to the lab after the every
// DaemonSet exists: the DaemonSet's pod appears there Running and Ready
// and its status counts four, the pods on the other nodes are left as
// they were, and node1 routes the new node's pod CIDR. The node then
// leaves as a machine is decommissioned: a NoExecute taint that the
// DaemonSet does not tolerate makes its controller delete the pod there,
// which the node's nodelet tears down completely; then the lab removes the
// node (nodelet, Node object, containerd, namespace, cgroups, directories)
// and the DaemonSet counts three again with the same pods, and node1's
// route to the node is gone.
func testDaemonSetNewNode(t *testing.T, e *labEnv, cs kubernetes.Interface) {
	three := []string{"node1", "node2", "node3"}
	before := waitDaemonOnNodes(t, cs, three, "")
	name := e.addNode()
	if name != "node4" {
		t.Fatalf("nodelet-lab add-node made %q, want node4", name)
	}
	n := e.node(name)
	files := e.files(name)
	after := waitDaemonOnNodes(t, cs, append(slices.Clone(three), name), "")
	samePods(t, before, after, three)
	node, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route := fmt.Sprintf("%s via %s", node.Spec.PodCIDR, n.IP)
	testkit.Eventually(t, 30*time.Second, "node1's route to "+route, func() bool { return strings.Contains(nodeRoutes(t, e, "node1"), route) })

	e.cp.must("taint", "node", name, "e2e/leaving=true:NoExecute")
	testkit.Eventually(t, time.Minute, "no every pod on "+name, func() bool {
		list, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=every", FieldSelector: "spec.nodeName=" + name})
		return err == nil && len(list.Items) == 0
	})
	samePods(t, before, waitDaemonOnNodes(t, cs, three, ""), three)
	testkit.Eventually(t, time.Minute, "nothing of the pod left on "+name, func() bool { return len(files.leftovers(t)) == 0 })

	e.removeNode(name)
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s after its removal: err %v, want NotFound", name, err)
	}
	if st, err := lab.Load(e.dir); err != nil || slices.ContainsFunc(st.Nodes, func(m lab.Node) bool { return m.Name == name }) {
		t.Errorf("the lab's state still lists %s (%v)", name, err)
	}
	for _, p := range []string{"/run/netns/" + n.NetNS, n.Dir, filepath.Dir(n.ContainerdAddress)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s remains after removing %s", p, name)
		}
	}
	for _, h := range testkit.CgroupHierarchies(t) {
		if p := filepath.Join(h, n.CgroupRoot); exists(p) {
			t.Errorf("cgroup %s remains after removing %s", p, name)
		}
	}
	testkit.Eventually(t, 30*time.Second, "node1 without a route to "+route, func() bool { return !strings.Contains(nodeRoutes(t, e, "node1"), node.Spec.PodCIDR+" ") })
	samePods(t, before, waitDaemonOnNodes(t, cs, three, ""), three)
}

// nodeRoutes are the routes the nodelet of node set.
func nodeRoutes(t *testing.T, e *labEnv, node string) string {
	out, err := e.inNode(node, "ip", "-4", "route", "show", "proto", fmt.Sprint(int(network.RouteProtocol)))
	if err != nil {
		t.Fatalf("ip route in %s: %v\n%s", node, err, out)
	}
	return out
}

// samePods fails unless the DaemonSet's pod on each of nodes is the one it
// had before.
func samePods(t *testing.T, before, now map[string][]corev1.Pod, nodes []string) {
	t.Helper()
	for _, n := range nodes {
		if len(before[n]) != 1 || len(now[n]) != 1 || before[n][0].UID != now[n][0].UID {
			t.Errorf("the DaemonSet's pod on %s changed: %v -> %v", n, podNames(before), podNames(now))
		}
	}
}
