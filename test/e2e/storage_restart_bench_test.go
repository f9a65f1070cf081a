package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

const (
	restartPods          = 10
	restartVolumesPerPod = 5 // 50 claim volumes in all
	restartRuns          = 3
)

// BenchmarkNodeletRestartWithVolumes measures what a nodelet restart costs
// on a node whose pods have 50 mounted claim volumes (10 pods with 5
// local-path claims each): the time from starting the nodelet again to
// its Summary API listing every one of the 50 volumes, which it does only
// once it has synced each pod (set its volumes up again, finding them in
// place) and measured them (--volume-stats-agg-period=1s). No container
// may restart. p50 and the slowest of 3 restarts. Run with -benchtime 1x.
func BenchmarkNodeletRestartWithVolumes(b *testing.B) {
	cp := startControlPlane(b, b.TempDir(), freePort(b))
	node := startRealNode(b, cp, "node-restart-bench", "--volume-stats-agg-period=1s")
	testkit.Eventually(b, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	testkit.Eventually(b, 30*time.Second, "the default class", func() bool {
		out, _, _ := cp.kubectl("get", "storageclass", "local-path", "-o", "name")
		return strings.TrimSpace(out) != ""
	})
	var manifest strings.Builder
	for p := range restartPods {
		fmt.Fprintf(&manifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: vols-%d}\nspec:\n  terminationGracePeriodSeconds: 1\n"+
			"  containers:\n  - name: main\n    image: busybox:1.36\n    command: [sleep, \"3600\"]\n    volumeMounts:\n", p)
		for v := range restartVolumesPerPod {
			fmt.Fprintf(&manifest, "    - {name: v%d, mountPath: /v%d}\n", v, v)
		}
		manifest.WriteString("  volumes:\n")
		for v := range restartVolumesPerPod {
			fmt.Fprintf(&manifest, "  - {name: v%d, persistentVolumeClaim: {claimName: vols-%d-%d}}\n", v, p, v)
		}
		manifest.WriteString("---\n")
		for v := range restartVolumesPerPod {
			fmt.Fprintf(&manifest, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: vols-%d-%d}\nspec:\n"+
				"  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n---\n", p, v)
		}
	}
	if out, errOut, err := cp.kubectlStdin(manifest.String(), "apply", "-f", "-"); err != nil {
		b.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(b, 5*time.Minute, "every pod Running", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "jsonpath={.items[*].status.phase}")
		return strings.Count(out, "Running") == restartPods
	})
	cs := cp.clientset()
	summary := "/api/v1/nodes/" + node.name + "/proxy/stats/summary"
	volumes := func() int {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath(summary).DoRaw(context.Background())
		if err != nil {
			return -1
		}
		var s struct {
			Pods []struct {
				VolumeStats []struct{ PVCRef *struct{ Name string } } `json:"volume"`
			}
		}
		if json.Unmarshal(raw, &s) != nil {
			return -1
		}
		n := 0
		for _, p := range s.Pods {
			for _, v := range p.VolumeStats {
				if v.PVCRef != nil {
					n++
				}
			}
		}
		return n
	}
	want := restartPods * restartVolumesPerPod
	testkit.Eventually(b, 60*time.Second, "all volumes reported", func() bool { return volumes() == want })
	containers := func() string {
		return cp.must("get", "pods", "-o", "jsonpath={range .items[*]}{.status.containerStatuses[0].containerID} {end}")
	}
	before := containers()
	for i := 0; i < b.N; i++ {
		var took []time.Duration
		for range restartRuns {
			node.stop()
			start := time.Now()
			node.start()
			for volumes() != want {
				if time.Since(start) > 2*time.Minute {
					b.Fatalf("the restarted node reports %d volumes, want %d", volumes(), want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(a, c int) bool { return took[a] < took[c] })
		b.ReportMetric(ms(took[len(took)/2]), "restart-to-50-volumes-p50-ms")
		b.ReportMetric(ms(took[len(took)-1]), "restart-to-50-volumes-max-ms")
	}
	b.StopTimer()
	if after := containers(); after != before {
		b.Errorf("containers across the restarts:\n%s\nthen\n%s", before, after)
	}
	cp.must("delete", "pods", "--all", "--wait=false")
	cp.must("delete", "pvc", "--all", "--wait=false")
	testkit.Eventually(b, 180*time.Second, "no pods, claims or volumes", func() bool {
		out, _, _ := cp.kubectl("get", "pods,pvc,pv", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(b, node)
}
