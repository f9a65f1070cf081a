package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// BenchmarkExternalProvisionerClaim is BenchmarkLocalPathClaim with
// rancher's local-path-provisioner (built from the module proxy, running
// as a pod with in-cluster configuration) instead of the built-in one:
// the time from creating a claim of its class and a pod using it, through
// kubectl, to the pod Ready, which takes in the provisioner's helper pod
// making the directory (it polls that pod once a second). p50, p90 and
// the slowest of 10, one pair at a time. Run with -benchtime 1x.
func BenchmarkExternalProvisionerClaim(b *testing.B) {
	cp, node := startInClusterNode(b, "node-ext-claim-bench", localPathProvisionerImage)
	manifest := deployLocalPathProvisioner(b, cp, filepath.Join(b.TempDir(), "local-path-provisioner"))
	ready := watchReady(b, cp.clientset())
	for i := 0; i < b.N; i++ {
		took := claimsToReady(b, cp, ready, i, "local-path-external")
		b.ReportMetric(ms(took[len(took)/2]), "claim-to-ready-p50-ms")
		b.ReportMetric(ms(took[(len(took)*9+9)/10-1]), "claim-to-ready-p90-ms") // nearest rank
		b.ReportMetric(ms(took[len(took)-1]), "claim-to-ready-max-ms")
	}
	b.StopTimer()
	cp.must("delete", "pods", "--all", "--wait=false")
	cp.must("delete", "pvc", "--all", "--wait=false")
	testkit.Eventually(b, 180*time.Second, "no claims or volumes (the provisioner's teardown helper pods done)", func() bool {
		out, _, _ := cp.kubectl("get", "pvc,pv", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	removeLocalPathProvisioner(b, cp, manifest)
	waitNoLeftovers(b, node)
}
