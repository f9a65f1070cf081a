package podlifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHostNetworkPodFiles: a host-network pod's containers get the host's
// hosts file with the pod's hostAliases, and the host's resolv.conf under
// dnsPolicy ClusterFirst (upstream's conformance "should write entries to
// /etc/hosts" for hostNetwork pods; busybox has no /etc/hosts of its own).
func TestHostNetworkPodFiles(t *testing.T) {
	f := newFakeSyncer(t)
	dir := t.TempDir()
	f.s.cfg.PodFilesDir = filepath.Join(dir, "pod-files")
	f.s.cfg.HostHostsFile = filepath.Join(dir, "hosts")
	f.s.cfg.HostResolvConf = []byte("nameserver 192.0.2.53\nsearch example.test\n")
	f.s.cfg.ClusterDNS = []string{"10.96.0.10"}
	if err := os.WriteFile(f.s.cfg.HostHostsFile, []byte("127.0.0.1\tlocalhost\n127.0.1.1\tthe-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod()
	pod.Spec.HostNetwork = true
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "192.0.2.7", Hostnames: []string{"foo.local", "bar.local"}}}
	pc := podContext{pod: pod}
	if err := f.s.writePodFiles(&pc); err != nil {
		t.Fatal(err)
	}
	hosts, err := os.ReadFile(pc.hosts)
	if err != nil {
		t.Fatalf("hosts file of the host-network pod: %v", err)
	}
	for _, want := range []string{"127.0.1.1\tthe-host\n", "# Entries added by HostAliases.\n192.0.2.7\tfoo.local\tbar.local\n"} {
		if !strings.Contains(string(hosts), want) {
			t.Errorf("hosts file:\n%s\nlacks %q", hosts, want)
		}
	}
	resolv, err := os.ReadFile(pc.resolv)
	if err != nil || !strings.Contains(string(resolv), "nameserver 192.0.2.53") || strings.Contains(string(resolv), "10.96.0.10") {
		t.Errorf("resolv.conf of a host-network ClusterFirst pod: %q, %v; want the host's", resolv, err)
	}

	f.s.cfg.HostHostsFile = filepath.Join(dir, "missing")
	if err := f.s.writePodFiles(&podContext{pod: pod}); err == nil || !strings.Contains(err.Error(), "hosts file") {
		t.Errorf("missing host hosts file: %v, want an error naming it", err)
	}
}

// TestPodFilesModes: a pod's files directory and its termination-log
// directory are 0750 (as upstream's pod directories), a termination-log
// file 0660 (the runtime gives it to the container's user), even over an
// old file of 0666 left by an earlier attempt of the same number.
func TestPodFilesModes(t *testing.T) {
	f := newFakeSyncer(t)
	dir := t.TempDir()
	f.s.cfg.PodFilesDir = filepath.Join(dir, "pod-files")
	f.s.cfg.HostResolvConf = []byte("nameserver 192.0.2.53\n")
	pod := busyboxPod()
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	if err := f.s.writePodFiles(&podContext{pod: pod}); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(f.s.cfg.PodFilesDir, string(pod.UID))
	old := filepath.Join(podDir, "termination-log", c.Name+"-0")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("stale"), 0o666); err != nil {
		t.Fatal(err)
	}
	p, err := f.s.terminationLogFile(pod, c, 0)
	if err != nil || p != old {
		t.Fatalf("terminationLogFile = %q, %v; want %s", p, err, old)
	}
	for path, want := range map[string]os.FileMode{f.s.cfg.PodFilesDir: 0o750, podDir: 0o750,
		filepath.Dir(p): 0o750, p: TerminationLogPerm} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Errorf("termination log not emptied: %q", b)
	}
}
