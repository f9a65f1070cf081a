package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkLab measures the multi-node lab: `nodelet-lab up` from nothing
// (images built, namespaces, containerds, control plane) to every node
// Ready, then a 30-replica nginx Deployment from apply to all 30 pods
// Ready, on 1 and on 3 nodes of this one machine.
func BenchmarkLab(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				start := time.Now()
				e := startLab(b, nodes)
				up := time.Since(start)

				manifest := strings.Replace(spreadDeployment, "replicas: 6", "replicas: 30", 1)
				manifest = strings.Replace(manifest, "whenUnsatisfiable: DoNotSchedule", "whenUnsatisfiable: ScheduleAnyway", 1)
				start = time.Now()
				e.cp.mustStdin(manifest, "apply", "-f", "-")
				e.cp.must("rollout", "status", "deployment/spread", "--timeout=600s")
				deploy := time.Since(start)

				b.ReportMetric(up.Seconds(), "lab-up-s")
				b.ReportMetric(deploy.Seconds(), "deploy30-ready-s")
				e.cp.must("delete", "deployment/spread", "--wait=true")
				e.down()
			}
		})
	}
}
