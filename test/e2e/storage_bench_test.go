package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

const claimRuns = 10

// BenchmarkLocalPathClaim measures, on a real node, the time from creating
// a claim of the default class (local-path) and a pod using it, through
// kubectl, to the pod Ready: the scheduler's node choice, the provisioner's
// volume, the binder's binding, the pod's start with the directory made
// on first use. p50 and the slowest of 10, one pair at a time.
// Run with -benchtime 1x.
func BenchmarkLocalPathClaim(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-claim-bench")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	testkit.Eventually(b, 30*time.Second, "the default class", func() bool {
		out, _, _ := cp.kubectl("get", "storageclass", "local-path", "-o", "name")
		return strings.TrimSpace(out) != ""
	})
	ready := watchReady(b, cp.clientset())
	for i := 0; i < b.N; i++ {
		took := claimsToReady(b, cp, ready, i, "")
		b.ReportMetric(ms(took[len(took)/2]), "claim-to-ready-p50-ms")
		b.ReportMetric(ms(took[len(took)-1]), "claim-to-ready-max-ms")
	}
	b.StopTimer()
	cp.must("delete", "pods", "--all", "--wait=false")
	cp.must("delete", "pvc", "--all", "--wait=false")
	testkit.Eventually(b, 120*time.Second, "no pods, claims or volumes", func() bool {
		out, _, _ := cp.kubectl("get", "pods,pvc,pv", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(b, node)
}

// claimsToReady applies claimRuns pairs of a claim (of class, "" for the
// default one) and a pod using it, one pair at a time, and returns the
// times from each apply to the pod Ready as ready saw it, sorted.
func claimsToReady(b *testing.B, cp *controlPlane, ready *readyTimes, run int, class string) []time.Duration {
	b.Helper()
	classLine := ""
	if class != "" {
		classLine = "  storageClassName: " + class + "\n"
	}
	var took []time.Duration
	for j := range claimRuns {
		name := fmt.Sprintf("claim-%d-%d", run, j)
		manifest := fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: %s}\nspec:\n%s"+
			"  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n---\n", name, classLine) +
			strings.Replace(storagePod(name, name, "touch /data/x; sleep 3600"), "metadata:\n  name: "+name,
				"metadata:\n  name: "+name+"\n  labels: {bench: startup}", 1) // what watchReady follows
		start := time.Now()
		if out, errOut, err := cp.kubectlStdin(manifest, "apply", "-f", "-"); err != nil {
			b.Fatalf("apply: %v\n%s%s", err, out, errOut)
		}
		took = append(took, ready.wait(b, name).Sub(start))
	}
	sort.Slice(took, func(a, c int) bool { return took[a] < took[c] })
	return took
}
