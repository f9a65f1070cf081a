package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestDeploymentLifecycle drives controllers and scheduler with the real
// kubectl: a Deployment becomes a ReplicaSet and pods spread over three
// nodes, rolls out, rolls back, scales, survives a node failure, and leaves
// nothing behind when deleted. The nodes are API objects kept alive by
// fakeNode.
func TestDeploymentLifecycle(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t),
		"--node-monitor-grace-period=6s", "--default-unreachable-toleration-seconds=2", "--default-not-ready-toleration-seconds=2")
	cs := cp.clientset()
	nodes := map[string]*fakeNode{}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = startFakeNode(t, cs, name, i)
	}
	out := cp.must("apply", "-f", "testdata/nginx-deployment.yaml")
	if !strings.Contains(out, "created") {
		t.Fatalf("apply: %s", out)
	}
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
	assertSpread(t, cp, 3, 3)
	if out := cp.must("get", "rs", "-o", "name"); strings.Count(out, "replicaset") != 1 {
		t.Fatalf("want one ReplicaSet:\n%s", out)
	}
	if out := cp.must("get", "events"); !strings.Contains(out, "ScalingReplicaSet") || !strings.Contains(out, "SuccessfulCreate") || !strings.Contains(out, "Scheduled") {
		t.Fatalf("events lack controller and scheduler reasons:\n%s", out)
	}
	if out := cp.must("get", "nodes", "-o", "jsonpath={.items[*].spec.podCIDR}"); len(strings.Fields(out)) != 3 {
		t.Fatalf("nodes lack pod CIDRs: %q", out)
	}

	// Roll to a new image, then back.
	cp.must("set", "image", "deployment/nginx-deployment", "nginx=nginx:1.23")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
	if out := cp.must("rollout", "history", "deployment/nginx-deployment"); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
		t.Fatalf("rollout history:\n%s", out)
	}
	cp.must("rollout", "undo", "deployment/nginx-deployment")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
	if out := cp.must("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); out != "nginx:1.22" {
		t.Fatalf("image after undo: %q", out)
	}
	if out := cp.must("get", "rs", "-o", "name"); strings.Count(out, "replicaset") != 2 {
		t.Fatalf("undo should reuse the first ReplicaSet, have:\n%s", out)
	}

	cp.must("scale", "deployment/nginx-deployment", "--replicas=5")
	cp.must("rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
	assertSpread(t, cp, 5, 3)

	// A node stops heartbeating: it is tainted and its pods are replaced elsewhere.
	nodes["node-0"].stop()
	testkit.Eventually(t, 60*time.Second, "node-0 tainted unreachable", func() bool {
		out, _, _ := cp.kubectl("get", "node", "node-0", "-o", "jsonpath={.spec.taints[*].key}")
		return strings.Contains(out, "node.kubernetes.io/unreachable")
	})
	testkit.Eventually(t, 90*time.Second, "pods replaced off node-0", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != "node-0" && p.Status.Phase == corev1.PodRunning {
				ready++
			}
		}
		return ready == 5
	})

	cp.must("delete", "deployment/nginx-deployment")
	testkit.Eventually(t, 60*time.Second, "ReplicaSets and live pods gone", func() bool {
		rs, _, _ := cp.kubectl("get", "rs", "-o", "name")
		pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil || strings.TrimSpace(rs) != "" {
			return false
		}
		for _, p := range pods.Items {
			// Pods on the dead node stay Terminating until it returns, as upstream.
			if p.Spec.NodeName != "node-0" {
				return false
			}
		}
		return true
	})
}

// assertSpread checks that want running pods exist across nodes distinct nodes.
func assertSpread(t *testing.T, cp *controlPlane, want, nodes int) {
	t.Helper()
	out := cp.must("get", "pods", "-o", "wide", "--no-headers", "--field-selector=status.phase=Running")
	seen := map[string]int{}
	count := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[2] == "Terminating" {
			continue
		}
		count++
		seen[f[6]]++
	}
	if count != want || len(seen) != nodes {
		t.Fatalf("want %d running pods over %d nodes, got %d over %v:\n%s", want, nodes, count, seen, out)
	}
}
