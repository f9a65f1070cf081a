package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

// testNodeFailure kills node3 (nodelet and containerd, as a machine that
// dies: its containers keep running in their shims), waits for its pods to
// be replaced on nodes 1 and 2, brings it back and checks that it removed
// everything of the evicted pods and reports the pod that tolerated the
// outage as it is, and the DaemonSet's pod running on it again.
func testNodeFailure(t *testing.T, e *labEnv, cs kubernetes.Interface, evicted []corev1.Pod) {
	survivor := getPod(t, cs, "survivor")
	e.killNode("node3")
	testkit.Eventually(t, 90*time.Second, "node3 not Ready", func() bool { return e.readyStatus("node3") != "True" })
	testkit.Eventually(t, 3*time.Minute, "6 spread pods Ready on node1 and node2", func() bool {
		pods := livePodsByNode(t, cs, "spread")
		ready := 0
		for _, n := range []string{"node1", "node2"} {
			for _, p := range pods[n] {
				if podReady(&p) {
					ready++
				}
			}
		}
		return ready == 6 && len(pods["node3"]) == 0
	})

	e.startNode("node3")
	testkit.Eventually(t, 2*time.Minute, "node3 Ready again", func() bool { return e.readyStatus("node3") == "True" })
	testkit.Eventually(t, 2*time.Minute, "the evicted pods gone from the API", func() bool {
		for _, p := range evicted {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err == nil && got.UID == p.UID || err != nil && !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	files := e.files("node3")
	testkit.Eventually(t, time.Minute, "nothing of the evicted pods on node3", func() bool {
		for _, p := range evicted {
			if left := files.podRemains(t, p.UID); len(left) > 0 {
				t.Logf("%s still has: %v", p.Name, left)
				return false
			}
		}
		return true
	})
	// What is left is the survivor's and the DaemonSet's (it tolerates
	// the outage), one sandbox's worth each.
	if n := countEntries(files.netnsDir); n != 2 {
		t.Errorf("node3 has %d pod netns, want 2 (the survivor's and the DaemonSet's)", n)
	}
	waitDaemonOnEveryNode(t, cs, "node3")

	testkit.Eventually(t, time.Minute, "the survivor reported Ready again", func() bool { return podReady(getPod(t, cs, "survivor")) })
	after := getPod(t, cs, "survivor")
	if b, a := survivor.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("survivor's container %s (restarts %d) became %s (restarts %d): it should have run through the outage",
			b.ContainerID, b.RestartCount, a.ContainerID, a.RestartCount)
	}

	e.cp.must("delete", "pod/survivor", "daemonset/every", "--wait=true", "--timeout=60s")
	testkit.Eventually(t, time.Minute, "node3 empty", func() bool { return len(files.leftovers(t)) == 0 })
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func countEntries(dir string) int {
	entries, _ := os.ReadDir(dir)
	return len(entries)
}

// podRemains lists what the node still holds of the pod uid: containers
// labelled with it, its pod cgroup, its volume directory, its log
// directory.
func (f nodeFiles) podRemains(t testing.TB, uid types.UID) []string {
	t.Helper()
	var out []string
	filter := fmt.Sprintf("labels.%q==%s", runtime.LabelPodUID, uid)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := hosttools.CommandContext(ctx, "ctr", "--address", f.ctdAddr, "-n", f.ctdNamespace, "containers", "list", "-q", filter).Output()
	if err != nil {
		return []string{fmt.Sprintf("ctr containers list: %v", err)}
	}
	if s := strings.TrimSpace(string(list)); s != "" {
		out = append(out, "containers "+strings.ReplaceAll(s, "\n", " "))
	}
	for _, h := range testkit.CgroupHierarchies(t) {
		for _, qos := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			if p := filepath.Join(h, f.cgroupRoot, qos, "pod"+string(uid)); exists(p) {
				out = append(out, p)
			}
		}
	}
	if p := filepath.Join(f.rootDir, "pods", string(uid)); exists(p) {
		out = append(out, p)
	}
	logs, _ := filepath.Glob(filepath.Join(f.podLogDir, "*_"+string(uid)))
	return append(out, logs...)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
