package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodelet/nodelet/test/testkit"
)

// dnsManifest: busybox httpd pods behind a ClusterIP Service (named port)
// and a headless one, a pod with hostname + subdomain of the headless
// Service, an ExternalName Service, and a client pod.
const dnsManifest = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: httpd
        image: busybox:1.36
        command: ["sh", "-c", "mkdir -p /www && exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-headless}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec:
  type: ExternalName
  externalName: www.example.test
---
apiVersion: v1
kind: Pod
metadata: {name: named, labels: {app: web}}
spec:
  hostname: named
  subdomain: web-headless
  terminationGracePeriodSeconds: 0
  containers:
  - name: httpd
    image: busybox:1.36
    command: ["sh", "-c", "mkdir -p /www && exec httpd -f -p 8080 -h /www"]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox:1.36
    command: ["sleep", "3600"]
`

// stsManifest: in namespace sts, a headless Service web and a StatefulSet
// web governed by it (the controller sets each pod's hostname and
// subdomain), as in upstream's StatefulSet tutorial.
const stsManifest = `
apiVersion: v1
kind: Namespace
metadata: {name: sts}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: sts}
spec:
  clusterIP: None
  selector: {app: sts-web}
  ports: [{name: web, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: sts}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: sts-web}}
  template:
    metadata: {labels: {app: sts-web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: box
        image: busybox:1.36
        command: ["sleep", "3600"]
`

// TestClusterDNSOnRealNode: the nodelet serves the cluster DNS on
// 10.96.0.10 in the node's namespace. From a busybox pod: kubernetes.default
// through the search path, a Service's name to its ClusterIP, a headless
// Service to its pods, a pod's hostname.subdomain, a StatefulSet's pods
// by their stable names (web-0.web.sts.svc.cluster.local), SRV, PTR, a
// pod's A record, NXDOMAIN, an ExternalName (CNAME, chased), and a name forwarded
// to a resolver the test runs on the node's loopback (the harness's --resolv-conf names 127.0.0.1). DNS comes
// back at once after a nodelet restart (the address stays), and `nodelet
// cleanup-network` removes the address.
func TestClusterDNSOnRealNode(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	node := startRealNode(t, cp, "node-dns")
	upstream := startUpstreamInNetns(t, "/run/netns/"+node.netns)
	testkit.Eventually(t, 60*time.Second, "node Ready", func() bool {
		out, _, _ := cp.kubectl("get", "node", node.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	if out := cp.must("get", "svc", "-n", "kube-system", "kube-dns", "-o", "jsonpath={.spec.clusterIP}"); out != "10.96.0.10" {
		t.Fatalf("kube-system/kube-dns clusterIP %q, want 10.96.0.10", out)
	}
	cp.mustStdin(dnsManifest, "apply", "-f", "-")
	cp.mustStdin(stsManifest, "apply", "-f", "-")
	cp.must("rollout", "status", "deployment/web", "--timeout=120s")
	cp.must("wait", "--for=condition=Ready", "pod/client", "pod/named", "--timeout=60s")
	webIP := cp.must("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
	podIPs := strings.Fields(cp.must("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.podIP}"))
	namedIP := cp.must("get", "pod", "named", "-o", "jsonpath={.status.podIP}")
	clientIP := cp.must("get", "pod", "client", "-o", "jsonpath={.status.podIP}")
	if len(podIPs) != 3 {
		t.Fatalf("pods of app=web: %q", podIPs)
	}
	if out := cp.must("exec", "client", "--", "cat", "/etc/resolv.conf"); !strings.Contains(out, "nameserver 10.96.0.10") {
		t.Fatalf("the pod's resolv.conf:\n%s", out)
	}

	lookup := func(args ...string) (string, error) {
		out, errOut, err := cp.kubectl(append([]string{"exec", "client", "--", "nslookup"}, args...)...)
		return out + errOut, err
	}
	// expect retries a lookup until its output holds every want (the
	// endpoints controller and the informers may lag a moment).
	expect := func(what string, want []string, args ...string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, _ := lookup(args...)
			missing := slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(out, w) })
			if !missing {
				t.Logf("nslookup %s:\n%s", strings.Join(args, " "), out)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nslookup %s, want %q:\n%s", what, strings.Join(args, " "), want, out)
			}
		}
	}
	// busybox's nslookup applies the search list to names without a dot;
	// the C library's resolver (ping's) to names with fewer than ndots:5.
	expect("kubernetes through the search path", []string{"Address: 10.96.0.1"}, "kubernetes")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, errOut, _ := cp.kubectl("exec", "client", "--", "ping", "-c", "1", "-W", "1", "kubernetes.default")
		if strings.Contains(out+errOut, "PING kubernetes.default (10.96.0.1)") {
			t.Logf("ping kubernetes.default: %s", strings.SplitN(out, "\n", 2)[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubernetes.default through the search path (libc): %s%s", out, errOut)
		}
	}
	expect("a Service's name", []string{"Address: " + webIP}, "web.default.svc.cluster.local")
	expect("a Service's short name", []string{"Address: " + webIP}, "web")
	var headless []string
	for _, ip := range podIPs {
		headless = append(headless, "Address: "+ip)
	}
	expect("a headless Service", headless, "web-headless.default.svc.cluster.local")
	expect("a pod's hostname.subdomain", []string{"Address: " + namedIP}, "named.web-headless.default.svc.cluster.local")
	// A StatefulSet's pods by their stable names, each to its own IP only
	// (an answer line ends after the address: 10.0.0.1 is not 10.0.0.12).
	cp.must("-n", "sts", "rollout", "status", "statefulset/web", "--timeout=120s")
	stsIPs := map[string]string{}
	for _, pod := range []string{"web-0", "web-1"} {
		if stsIPs[pod] = cp.must("-n", "sts", "get", "pod", pod, "-o", "jsonpath={.status.podIP}"); stsIPs[pod] == "" {
			t.Fatalf("sts/%s has no pod IP", pod)
		}
	}
	for pod, other := range map[string]string{"web-0": "web-1", "web-1": "web-0"} {
		name := pod + ".web.sts.svc.cluster.local"
		expect("a StatefulSet pod's stable name", []string{"Address: " + stsIPs[pod] + "\n"}, name)
		if out, _ := lookup(name); strings.Contains(out, "Address: "+stsIPs[other]+"\n") {
			t.Errorf("%s also answers %s's address %s:\n%s", name, other, stsIPs[other], out)
		}
	}
	expect("the StatefulSet's headless Service", []string{"Address: " + stsIPs["web-0"] + "\n", "Address: " + stsIPs["web-1"] + "\n"},
		"web.sts.svc.cluster.local")
	expect("SRV of a named port", []string{"web.default.svc.cluster.local", " 80 "}, "-type=srv", "_http._tcp.web.default.svc.cluster.local")
	expect("SRV of a headless Service", []string{" 8080 named.web-headless.default.svc.cluster.local"},
		"-type=srv", "_http._tcp.web-headless.default.svc.cluster.local")
	expect("PTR of a ClusterIP", []string{"web.default.svc.cluster.local"}, webIP)
	expect("PTR of a headless endpoint", []string{"named.web-headless.default.svc.cluster.local"}, namedIP)
	podName := strings.ReplaceAll(clientIP, ".", "-") + ".default.pod.cluster.local"
	expect("a pod's A record", []string{"Address: " + clientIP}, podName)
	if out, err := lookup("nope.default.svc.cluster.local"); err == nil || !strings.Contains(out, "NXDOMAIN") {
		t.Errorf("a missing Service: %v\n%s", err, out)
	}
	// Forwarded: through the nodelet to the test's resolver on the node's
	// loopback.
	expect("a forwarded name", []string{"Address: 192.0.2.80"}, "www.example.test")
	expect("an ExternalName Service", []string{"canonical name = www.example.test", "Address: 192.0.2.80"}, "ext.default.svc.cluster.local")
	if upstream.queries.Load() == 0 {
		t.Errorf("the upstream resolver was never asked")
	}

	// A restart: the address stays on the node while the nodelet is down,
	// and DNS answers again as soon as the new one has synced.
	node.stop()
	if out, err := node.inNetns(context.Background(), "ip", "-4", "addr", "show"); err != nil || !strings.Contains(out, "10.96.0.10/32") {
		t.Errorf("the cluster DNS address is gone while the nodelet is down: %v\n%s", err, out)
	}
	restarted := time.Now()
	node.start()
	expect("DNS after a restart", []string{"Address: " + webIP}, "web.default.svc.cluster.local")
	t.Logf("DNS answered %s after the nodelet was started again", time.Since(restarted).Round(100*time.Millisecond))

	cp.must("delete", "deployment/web", "pod/named", "pod/client", "svc/web", "svc/web-headless", "svc/ext", "--wait=false")
	cp.must("-n", "sts", "delete", "statefulset/web", "svc/web", "--wait=false")
	testkit.Eventually(t, 90*time.Second, "no pods", func() bool {
		out, _, _ := cp.kubectl("get", "pods", "-o", "name")
		sts, _, _ := cp.kubectl("-n", "sts", "get", "pods", "-o", "name")
		return strings.TrimSpace(out+sts) == ""
	})
	waitNoLeftovers(t, node)
	node.stop()
	if out, err := node.inNetns(context.Background(), filepath.Join(binDir, "nodelet"), "cleanup-network"); err != nil {
		t.Fatalf("nodelet cleanup-network: %v: %s", err, out)
	}
	if out, _ := node.inNetns(context.Background(), "ip", "addr", "show"); strings.Contains(out, "10.96.0.10") || strings.Contains(out, "nodelet-dns") {
		t.Errorf("the cluster DNS address is left after cleanup-network:\n%s", out)
	}
}

// fakeResolver answers *.example.test. A 192.0.2.80 and NXDOMAIN for the
// rest, on 127.0.0.1:53 (UDP and TCP) inside a namespace the test made.
type fakeResolver struct{ queries atomic.Int64 }

func startUpstreamInNetns(t *testing.T, nsPath string) *fakeResolver {
	t.Helper()
	r := &fakeResolver{}
	pc, err := listenPacketInNetns(nsPath, "127.0.0.1:53")
	if err != nil {
		t.Fatalf("listen on 127.0.0.1:53/udp in %s: %v", nsPath, err)
	}
	ln, err := listenInNetns(nsPath, "127.0.0.1:53")
	if err != nil {
		pc.Close()
		t.Fatalf("listen on 127.0.0.1:53/tcp in %s: %v", nsPath, err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		m.RecursionAvailable = true
		q := req.Question[0]
		switch {
		case strings.HasSuffix(strings.ToLower(q.Name), "example.test.") && q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
				A: net.IPv4(192, 0, 2, 80)}}
		case strings.HasSuffix(strings.ToLower(q.Name), "example.test."):
		default:
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // runs after the Shutdowns registered below
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() { s.ActivateAndServe() })
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return r
}

// listenPacketInNetns opens a UDP socket inside the namespace at nsPath
// (the thread that entered it is never unlocked, so Go ends it).
func listenPacketInNetns(nsPath, addr string) (pc net.PacketConn, err error) {
	err = inNetns(nsPath, func() error { pc, err = net.ListenPacket("udp", addr); return err })
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return pc, nil
}
