package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/hosttools"
)

// TestStatusCodes sends wrong requests over HTTPS and checks that each
// gets a metav1.Status with the right code and reason.
func TestStatusCodes(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	client, err := rest.HTTPClientFor(cp.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", cp.port)
	big := bytes.Repeat([]byte("x"), 4<<20)
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1"}}`
	cases := []struct {
		name, method, path, ctype, body string
		raw                             []byte
		code                            int
		reason                          metav1.StatusReason
	}{
		{"bad json", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":`, nil, 400, metav1.StatusReasonBadRequest},
		{"bad yaml", "POST", "/api/v1/namespaces/default/configmaps", "application/yaml", "metadata: [unclosed", nil, 400, metav1.StatusReasonBadRequest},
		{"unknown resource", "GET", "/api/v1/namespaces/default/widgets", "", "", nil, 404, metav1.StatusReasonNotFound},
		{"unknown group", "GET", "/apis/example.com/v1/things", "", "", nil, 404, metav1.StatusReasonNotFound},
		{"missing object", "GET", "/api/v1/namespaces/default/configmaps/none", "", "", nil, 404, metav1.StatusReasonNotFound},
		{"too large", "POST", "/api/v1/namespaces/default/configmaps", "application/json", "", big, 413, metav1.StatusReasonRequestEntityTooLarge},
		{"wrong content type", "POST", "/api/v1/namespaces/default/configmaps", "text/plain", cm, nil, 415, metav1.StatusReasonUnsupportedMediaType},
		{"apply without a field manager", "PATCH", "/api/v1/namespaces/default/configmaps/c1", "application/apply-patch+yaml", cm, nil, 422, metav1.StatusReasonInvalid},
		{"unknown patch type", "PATCH", "/api/v1/namespaces/default/configmaps/c1", "application/x-nonsense-patch", cm, nil, 415, metav1.StatusReasonUnsupportedMediaType},
		{"wrong kind", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`, nil, 400, metav1.StatusReasonBadRequest},
		{"invalid", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"name":"UPPER"}}`, nil, 422, metav1.StatusReasonInvalid},
		{"bad selector", "GET", "/api/v1/pods?labelSelector=a%20in%20(", "", "", nil, 400, metav1.StatusReasonBadRequest},
		{"bad field selector", "GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx", "", "", nil, 400, metav1.StatusReasonBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.raw
			if body == nil {
				body = []byte(c.body)
			}
			req, _ := http.NewRequest(c.method, base+c.path, bytes.NewReader(body))
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			expectStatus(t, client, req, c.code, c.reason)
		})
	}

	// Optimistic concurrency: a stale resourceVersion is a 409 Conflict.
	cs := cp.clientset()
	ctx := context.Background()
	obj, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occ"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := obj.DeepCopy()
	obj.Data["v"] = "2"
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Data["v"] = "3"
	_, err = cs.CoreV1().ConfigMaps("default").Update(ctx, stale, metav1.UpdateOptions{})
	if se, ok := err.(interface{ Status() metav1.Status }); !ok || se.Status().Code != 409 {
		t.Fatalf("stale update: %v, want 409", err)
	}
	// Already exists.
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occ"}}, metav1.CreateOptions{})
	if se, ok := err.(interface{ Status() metav1.Status }); !ok || se.Status().Reason != metav1.StatusReasonAlreadyExists {
		t.Fatalf("duplicate create: %v, want AlreadyExists", err)
	}

	// Anonymous requests get 401; health endpoints stay open.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", base+"/api/v1/namespaces", nil)
	expectStatus(t, anon, req, 401, metav1.StatusReasonUnauthorized)
	req, _ = http.NewRequest("GET", base+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	expectStatus(t, anon, req, 401, metav1.StatusReasonUnauthorized)
	resp, err := anon.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func expectStatus(t *testing.T, client *http.Client, req *http.Request, code int, reason metav1.StatusReason) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("%s %s: not a Status (%v): %s", req.Method, req.URL.Path, err, data)
	}
	if resp.StatusCode != code || int(st.Code) != code || st.Reason != reason {
		t.Fatalf("%s %s: HTTP %d, status %d %s; want %d %s: %s", req.Method, req.URL.Path, resp.StatusCode, st.Code, st.Reason, code, reason, st.Message)
	}
}

// TestCrashKeepsAcknowledgedWrites kills the control plane with SIGKILL
// right after a burst of acknowledged writes and checks all of them are
// there after a restart.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	cp := startControlPlane(t, dir, port)
	cs := cp.clientset()
	ctx := context.Background()
	const n = 200
	errs := make(chan error, n)
	for w := 0; w < 8; w++ {
		go func() {
			for i := w; i < n; i += 8 {
				_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{})
				errs <- err
			}
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	before, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.kill()
	cp2 := startControlPlane(t, dir, port)
	after, err := cp2.clientset().CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (kube-root-ca.crt is there too, published by the control plane)
	if got := countPrefixed(after.Items, "cm-"); got != n || after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("after crash: %d of the configmaps at rv %s, want %d at rv %s", got, after.ResourceVersion, n, before.ResourceVersion)
	}
	out := cp2.must("get", "configmap", "cm-123", "-o", "jsonpath={.data.i}")
	if strings.TrimSpace(out) != "123" {
		t.Fatalf("cm-123 data after restart: %q", out)
	}
}

// TestBearerTokens starts the control plane with a static token file: the
// real kubectl authenticates with a token (alice, whose group devs is
// bound to view), a wrong one gets 401.
func TestBearerTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := dir + "/tokens.csv"
	if err := os.WriteFile(tokens, []byte("s3cret-token,alice,1001,\"devs,ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, dir, freePort(t), "--token-auth-file", tokens)
	cp.must("create", "clusterrolebinding", "devs-view", "--clusterrole=view", "--group=devs")
	cp.must("create", "clusterrole", "namespace-reader", "--verb=list", "--resource=namespaces")
	cp.must("create", "clusterrolebinding", "devs-namespaces", "--clusterrole=namespace-reader", "--group=devs")
	server := fmt.Sprintf("https://127.0.0.1:%d", cp.port)
	run := func(token string) (string, error) {
		cmd := hosttools.Command("kubectl", "--kubeconfig", "/dev/null", "--server", server,
			"--certificate-authority", dir+"/ca.crt", "--token", token, "get", "namespaces", "-o", "name")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("s3cret-token"); err != nil || !strings.Contains(out, "namespace/default") {
		t.Fatalf("valid token: %v\n%s", err, out)
	}
	if out, err := run("wrong"); err == nil || !strings.Contains(out, "Unauthorized") {
		t.Fatalf("wrong token: %v\n%s", err, out)
	}
}

// TestKubeconfigCommand: `controlplane kubeconfig` writes the URL the
// control plane serves on (here a random port, not 6443), and --server
// overrides it for other machines.
func TestKubeconfigCommand(t *testing.T) {
	dir := t.TempDir()
	cp := startControlPlane(t, dir, freePort(t))
	bin := filepath.Join(binDir, "controlplane")
	kc, err := exec.Command(bin, "kubeconfig", "--data-dir", dir, "--user", "carol", "--group", "system:masters").Output()
	if err != nil {
		t.Fatalf("controlplane kubeconfig: %v", err)
	}
	file := filepath.Join(dir, "carol.kubeconfig")
	if err := os.WriteFile(file, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("server: https://127.0.0.1:%d", cp.port); !strings.Contains(string(kc), want) {
		t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
	}
	if out, err := hosttools.Command("kubectl", "--kubeconfig", file, "get", "namespaces", "-o", "name").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "namespace/default") {
		t.Errorf("kubectl with the written kubeconfig: %v\n%s", err, out)
	}
	// kubectl auth whoami names the certificate's user and groups.
	out, err := hosttools.Command("kubectl", "--kubeconfig", file, "auth", "whoami", "-o",
		"jsonpath={.status.userInfo.username} {.status.userInfo.groups}").CombinedOutput()
	if err != nil || string(out) != `carol ["system:masters","system:authenticated"]` {
		t.Errorf("kubectl auth whoami: %v: %s", err, out)
	}
	// --as and --as-group act as someone else (carol, in system:masters,
	// may impersonate).
	out, err = hosttools.Command("kubectl", "--kubeconfig", file, "--as", "dave", "--as-group", "devs", "auth", "whoami", "-o",
		"jsonpath={.status.userInfo.username} {.status.userInfo.groups}").CombinedOutput()
	if err != nil || string(out) != `dave ["devs","system:authenticated"]` {
		t.Errorf("kubectl --as dave --as-group devs auth whoami: %v: %s", err, out)
	}

	// kubectl auth can-i asks the API server's authorizer.
	if out, err := hosttools.Command("kubectl", "--kubeconfig", file, "auth", "can-i", "create", "pods").CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "yes" {
		t.Errorf("kubectl auth can-i create pods: %v: %s", err, out)
	}

	// kubectl create token: the token alone (no client certificate)
	// authenticates as the ServiceAccount.
	cp.must("create", "serviceaccount", "robot")
	token := strings.TrimSpace(cp.must("create", "token", "robot", "--duration=10m"))
	empty := filepath.Join(dir, "empty.kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = hosttools.Command("kubectl", "--kubeconfig", empty, "--server", fmt.Sprintf("https://127.0.0.1:%d", cp.port),
		"--certificate-authority", filepath.Join(dir, "ca.crt"), "--token", token, "auth", "whoami", "-o",
		"jsonpath={.status.userInfo.username} {.status.userInfo.groups}").CombinedOutput()
	if err != nil || string(out) != `system:serviceaccount:default:robot ["system:serviceaccounts","system:serviceaccounts:default","system:authenticated"]` {
		t.Errorf("kubectl auth whoami with a token of kubectl create token: %v: %s", err, out)
	}
	kc, err = exec.Command(bin, "kubeconfig", "--data-dir", dir, "--user", "carol", "--server", "https://10.240.0.1:6443").Output()
	if err != nil || !strings.Contains(string(kc), "server: https://10.240.0.1:6443") {
		t.Errorf("kubeconfig --server: %v\n%s", err, kc)
	}
}

// countPrefixed counts the ConfigMaps whose name starts with prefix.
func countPrefixed(items []corev1.ConfigMap, prefix string) int {
	n := 0
	for _, cm := range items {
		if strings.HasPrefix(cm.Name, prefix) {
			n++
		}
	}
	return n
}
