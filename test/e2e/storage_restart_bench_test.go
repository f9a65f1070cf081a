package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	claim := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: %s}\nspec:\n"+
			"  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n---\n", name)
	}
	cs := cp.clientset()
	summary := func() ([]byte, error) {
		return cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node.name + "/proxy/stats/summary").DoRaw(context.Background())
	}
	benchRestartWithVolumes(b, cp, summary, claim, node.stop, node.start)
	cp.must("delete", "pods", "--all", "--wait=false")
	cp.must("delete", "pvc", "--all", "--wait=false")
	testkit.Eventually(b, 180*time.Second, "no pods, claims or volumes", func() bool {
		out, _, _ := cp.kubectl("get", "pods,pvc,pv", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	waitNoLeftovers(b, node)
}

// BenchmarkUpstreamKubeletRestartWithVolumes is
// BenchmarkNodeletRestartWithVolumes against upstream (see
// upstream_workloads_bench_test.go): the kubelet with
// volumeStatsAggPeriod 1s, its 50 claims bound to local PersistentVolumes
// made beforehand (upstream has no built-in provisioner; the node side is
// the same kind of volume). Skipped unless run through
// scripts/bench-upstream.sh.
func BenchmarkUpstreamKubeletRestartWithVolumes(b *testing.B) {
	u := startUpstreamControlPlane(b)
	n := startUpstreamNodeWith(b, u, "upstream-restart-bench", "volumeStatsAggPeriod: 1s\n")
	dirs := b.TempDir()
	claim := func(name string) string {
		dir := filepath.Join(dirs, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		return fmt.Sprintf("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: %[1]s}\nspec:\n"+
			"  capacity: {storage: 10Mi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n"+
			"  local: {path: %[2]s}\n  claimRef: {namespace: default, name: %[1]s}\n"+
			"  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%[3]s]}]}]}}\n---\n"+
			"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: %[1]s}\nspec:\n  storageClassName: \"\"\n  volumeName: %[1]s\n"+
			"  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 10Mi}}\n---\n", name, dir, n.name)
	}
	// Read straight from the kubelet at its address in the test's
	// namespace (anonymous, AlwaysAllow): kube-apiserver's nodes/proxy
	// would dial the node's Hostname address first, which nothing resolves.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	summary := func() ([]byte, error) {
		resp, err := client.Get("https://" + net.JoinHostPort(n.ip, "10250") + "/stats/summary")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /stats/summary: %s", resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	benchRestartWithVolumes(b, u.controlPlane, summary, claim, func() { n.kubelet.stop(b) }, func() { n.startKubelet(b) })
	u.must("delete", "pods", "--all", "--wait=false")
	// The pods are gone from the API once the kubelet has unmounted
	// their volumes.
	testkit.Eventually(b, 3*time.Minute, "no pods", func() bool {
		out, _, _ := u.kubectl("get", "pods", "-o", "name")
		return strings.TrimSpace(out) == ""
	})
	testkit.Eventually(b, 2*time.Minute, "no running container on the upstream node", func() bool { return n.runningTasks(b) == 0 })
}

// benchRestartWithVolumes runs 10 pods of 5 claims each (claim gives the
// manifest of one claim, and of its volume if it needs one), then
// stops and starts the node agent restartRuns times, timing from each
// start to the Summary API listing all 50 volumes; no container may
// restart.
func benchRestartWithVolumes(b *testing.B, kubectl *controlPlane, summary func() ([]byte, error),
	claim func(name string) string, stop, start func()) {
	b.Helper()
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
			manifest.WriteString(claim(fmt.Sprintf("vols-%d-%d", p, v)))
		}
	}
	if out, errOut, err := kubectl.kubectlStdin(manifest.String(), "apply", "-f", "-"); err != nil {
		b.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	testkit.Eventually(b, 5*time.Minute, "every pod Running", func() bool {
		out, _, _ := kubectl.kubectl("get", "pods", "-o", "jsonpath={.items[*].status.phase}")
		return strings.Count(out, "Running") == restartPods
	})
	want := restartPods * restartVolumesPerPod
	var lastErr error
	volumes := func() int {
		n, err := summaryClaimVolumes(summary)
		lastErr = err
		return n
	}
	defer func() {
		if b.Failed() {
			b.Logf("the last read of the Summary API: %v", lastErr)
		}
	}()
	testkit.Eventually(b, 2*time.Minute, "all volumes reported", func() bool { return volumes() == want })
	containers := func() string {
		return kubectl.must("get", "pods", "-o", "jsonpath={range .items[*]}{.status.containerStatuses[0].containerID} {end}")
	}
	before := containers()
	for i := 0; i < b.N; i++ {
		var took []time.Duration
		for range restartRuns {
			stop()
			began := time.Now()
			start()
			for volumes() != want {
				if time.Since(began) > 3*time.Minute {
					b.Fatalf("the restarted node reports %d volumes, want %d", volumes(), want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = append(took, time.Since(began))
		}
		sort.Slice(took, func(a, c int) bool { return took[a] < took[c] })
		b.ReportMetric(ms(took[len(took)/2]), "restart-to-50-volumes-p50-ms")
		b.ReportMetric(ms(took[len(took)-1]), "restart-to-50-volumes-max-ms")
	}
	b.StopTimer()
	if after := containers(); after != before {
		b.Errorf("containers across the restarts:\n%s\nthen\n%s", before, after)
	}
}

// summaryClaimVolumes counts the claim volumes in the node's Summary API
// as summary reads it.
func summaryClaimVolumes(summary func() ([]byte, error)) (int, error) {
	raw, err := summary()
	if err != nil {
		return -1, err
	}
	var s struct {
		Pods []struct {
			VolumeStats []struct{ PVCRef *struct{ Name string } } `json:"volume"`
		}
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return -1, err
	}
	n := 0
	for _, p := range s.Pods {
		for _, v := range p.VolumeStats {
			if v.PVCRef != nil {
				n++
			}
		}
	}
	return n, fmt.Errorf("%d claim volumes in %.300s", n, raw)
}
