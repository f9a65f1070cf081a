package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/storage/etcd/etcdtest"
	"github.com/nodelet/nodelet/hosttools"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestEtcdStorage: the control plane with --etcd-servers keeps its objects
// in a real etcd (under --etcd-prefix, nothing in bbolt), serves kubectl's
// create, get, watch and delete from it, pages lists at one revision,
// finds the same objects, at the same resourceVersions, after a restart,
// and is not ready once etcd is gone.
func TestEtcdStorage(t *testing.T) {
	srv := etcdtest.Start(t)
	dir, port := t.TempDir(), freePort(t)
	args := []string{"--etcd-servers", srv.Endpoint, "--etcd-prefix", "/nodelet-e2e", "--no-leader-elect"}
	cp := startControlPlane(t, dir, port, args...)
	if _, err := os.Stat(filepath.Join(dir, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("state.db in the data directory with --etcd-servers: %v", err)
	}
	cp.must("create", "namespace", "etcd")
	cp.must("create", "-n", "etcd", "configmap", "gone", "--from-literal=a=1")
	cp.must("create", "-n", "etcd", "deployment", "web", "--image=busybox:1.36", "--replicas=2")

	lines := watchConfigMaps(t, cp)
	waitLine(t, lines, "ADDED", "gone") // the list before the watch
	cp.must("create", "-n", "etcd", "configmap", "kept", "--from-literal=a=2")
	waitLine(t, lines, "ADDED", "kept")
	cp.must("delete", "-n", "etcd", "configmap", "gone")
	waitLine(t, lines, "DELETED", "gone")

	// The objects are etcd's, under the prefix, at etcd's revisions.
	rv := cp.must("get", "-n", "etcd", "configmap", "kept", "-o", "jsonpath={.metadata.resourceVersion}")
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/nodelet-e2e/configmaps/etcd/kept")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("configmap in etcd: %v %v", resp, err)
	}
	if got := resp.Kvs[0].ModRevision; rv != strconv.FormatInt(got, 10) {
		t.Fatalf("resourceVersion %s, etcd's mod_revision %d", rv, got)
	}

	testConsistentPages(t, cp, c)

	cp.stop()
	cp = startControlPlane(t, dir, port, args...)
	if got := cp.must("get", "-n", "etcd", "configmap", "kept", "-o", "jsonpath={.metadata.resourceVersion} {.data.a}"); got != rv+" 2" {
		t.Fatalf("after restart: %q, want %q", got, rv+" 2")
	}
	if _, errOut, err := cp.kubectl("get", "-n", "etcd", "configmap", "gone"); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Fatalf("deleted configmap after restart: %v %s", err, errOut)
	}
	if got := cp.must("get", "-n", "etcd", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "2" {
		t.Fatalf("deployment after restart: replicas %q", got)
	}
	cp.must("delete", "namespace", "etcd", "--wait=false")

	// The storage check of /readyz is etcd's: it fails once etcd is gone.
	srv.Stop()
	testkit.Eventually(t, 30*time.Second, "/readyz failing without etcd", func() bool {
		out, _, err := cp.kubectl("get", "--raw", "/readyz?verbose")
		return err != nil && !strings.Contains(out, "[+]storage ok")
	})
}

// testConsistentPages: the pages of a list are one snapshot at the first
// page's resourceVersion; once etcd compacted it, continuing gets 410
// Expired with a token that continues at the latest revision.
func testConsistentPages(t *testing.T, cp *controlPlane, c *clientv3.Client) {
	for _, n := range []string{"page-a", "page-b", "page-c"} {
		cp.must("create", "-n", "etcd", "configmap", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cms := cp.clientset().CoreV1().ConfigMaps("etcd")
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(first.Items) != 1 || first.Items[0].Name != "kept" || first.Continue == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	cp.must("create", "-n", "etcd", "configmap", "page-0")
	cp.must("delete", "-n", "etcd", "configmap", "page-c")
	rest, err := cms.List(ctx, metav1.ListOptions{Limit: 100, Continue: first.Continue})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range rest.Items {
		names = append(names, cm.Name)
	}
	if strings.Join(names, " ") != "kube-root-ca.crt page-a page-b page-c" || rest.ResourceVersion != first.ResourceVersion {
		t.Fatalf("second page at %s: %v, want the snapshot of %s (kube-root-ca.crt page-a page-b page-c)", rest.ResourceVersion, names, first.ResourceVersion)
	}
	now, err := c.Get(ctx, "compact-now")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, now.Header.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 100, Continue: first.Continue})
	var status *apierrors.StatusError
	if !apierrors.IsResourceExpired(err) || !errors.As(err, &status) || status.ErrStatus.ListMeta.Continue == "" {
		t.Fatalf("continue after compaction: %v, want 410 Expired with a new token", err)
	}
	latest, err := cms.List(ctx, metav1.ListOptions{Limit: 100, Continue: status.ErrStatus.ListMeta.Continue})
	if err != nil || len(latest.Items) != 4 { // kube-root-ca.crt page-0 page-a page-b
		t.Fatalf("continue at the latest: %v %v", latest, err)
	}
}

// watchConfigMaps runs `kubectl get -w --output-watch-events` in namespace
// etcd and returns its lines: EVENT NAME DATA AGE.
func watchConfigMaps(t *testing.T, cp *controlPlane) <-chan string {
	cmd := hosttools.Command("kubectl", "--kubeconfig", cp.kubeconfig, "get", "-n", "etcd", "configmaps",
		"-w", "--output-watch-events", "--no-headers", "--request-timeout=0")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &prefixWriter{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl get -w: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// waitLine waits for a line that begins with words.
func waitLine(t *testing.T, lines <-chan string, words ...string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended before %v; printed %q", words, seen)
			}
			seen = append(seen, l)
			if f := strings.Fields(l); len(f) >= len(words) && strings.Join(f[:len(words)], " ") == strings.Join(words, " ") {
				return
			}
		case <-deadline:
			t.Fatalf("kubectl get -w never printed %v; printed %q", words, seen)
		}
	}
}

// prefixWriter logs what kubectl writes to stderr.
type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.t.Logf("kubectl: %s", p)
	return len(p), nil
}
