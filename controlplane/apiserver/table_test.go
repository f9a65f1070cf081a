package apiserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func testService(name, clusterIP string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterIP,
			Selector:  map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// rawDo sends one request with the test client's credentials.
func rawDo(t *testing.T, env *testEnv, method, path, contentType, accept string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, env.config.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

func TestPodTable(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	pods := cs.CoreV1().Pods("default")
	for _, p := range []*corev1.Pod{testPod("alpha", "node-1"), testPod("beta", ""), testPod("gamma", "node-1")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods.Delete(ctx, "gamma", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	code, hdr, body := rawDo(t, env, "GET", "/api/v1/namespaces/default/pods", "", tableAccept, nil)
	if code != 200 {
		t.Fatalf("table list: HTTP %d: %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if table.Kind != "Table" || table.APIVersion != "meta.k8s.io/v1" {
		t.Errorf("kind %q apiVersion %q", table.Kind, table.APIVersion)
	}
	wantCols := []struct {
		name     string
		priority int32
	}{{"Name", 0}, {"Ready", 0}, {"Status", 0}, {"Restarts", 0}, {"Age", 0}, {"IP", 1}, {"Node", 1}}
	if len(table.ColumnDefinitions) < len(wantCols) {
		t.Fatalf("columns %+v", table.ColumnDefinitions)
	}
	col := map[string]int{}
	for i, w := range wantCols {
		c := table.ColumnDefinitions[i]
		if c.Name != w.name || c.Priority != w.priority {
			t.Errorf("column %d = %s (priority %d), want %s (priority %d)", i, c.Name, c.Priority, w.name, w.priority)
		}
		col[w.name] = i
	}
	if len(table.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(table.Rows))
	}
	rows := map[string][]any{}
	for _, r := range table.Rows {
		if len(r.Cells) != len(table.ColumnDefinitions) {
			t.Errorf("row has %d cells for %d columns", len(r.Cells), len(table.ColumnDefinitions))
		}
		name, _ := r.Cells[0].(string)
		rows[name] = r.Cells
		// The default includeObject is Metadata.
		var pm metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.Object.Raw, &pm); err != nil || pm.Kind != "PartialObjectMetadata" || pm.Name != name {
			t.Errorf("row object for %s: %s (%v)", name, r.Object.Raw, err)
		}
	}
	for name, want := range map[string]struct{ status, node string }{
		"alpha": {"Pending", "node-1"},
		"beta":  {"Pending", "<none>"},
		"gamma": {"Terminating", "node-1"},
	} {
		cells := rows[name]
		if cells == nil {
			t.Errorf("no row for %s", name)
			continue
		}
		if cells[col["Ready"]] != "0/1" {
			t.Errorf("%s Ready = %v, want 0/1", name, cells[col["Ready"]])
		}
		if cells[col["Status"]] != want.status {
			t.Errorf("%s Status = %v, want %s", name, cells[col["Status"]], want.status)
		}
		if cells[col["Restarts"]] != "0" {
			t.Errorf("%s Restarts = %v, want 0", name, cells[col["Restarts"]])
		}
		if cells[col["Node"]] != want.node {
			t.Errorf("%s Node = %v, want %s", name, cells[col["Node"]], want.node)
		}
		if cells[col["IP"]] != "<none>" {
			t.Errorf("%s IP = %v, want <none>", name, cells[col["IP"]])
		}
	}

	// One object as a table, and includeObject=Object.
	code, _, body = rawDo(t, env, "GET", "/api/v1/namespaces/default/pods/alpha?includeObject=Object", "", tableAccept, nil)
	if code != 200 {
		t.Fatalf("table get: HTTP %d: %s", code, body)
	}
	table = metav1.Table{}
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("single-object table has %d rows", len(table.Rows))
	}
	var pod corev1.Pod
	if err := json.Unmarshal(table.Rows[0].Object.Raw, &pod); err != nil || pod.Kind != "Pod" || pod.Spec.NodeName != "node-1" {
		t.Errorf("includeObject=Object row object: %s (%v)", table.Rows[0].Object.Raw, err)
	}
}

func TestServiceClusterIPs(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	svcs := cs.CoreV1().Services("default")
	cidr := netip.MustParsePrefix("10.96.0.0/12")

	a, err := svcs.Create(ctx, testService("a", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ipA, err := netip.ParseAddr(a.Spec.ClusterIP)
	if err != nil || !cidr.Contains(ipA) {
		t.Fatalf("clusterIP %q not in %s", a.Spec.ClusterIP, cidr)
	}
	if len(a.Spec.ClusterIPs) != 1 || a.Spec.ClusterIPs[0] != a.Spec.ClusterIP {
		t.Errorf("clusterIPs = %v, want [%s]", a.Spec.ClusterIPs, a.Spec.ClusterIP)
	}
	if a.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("type = %q, want ClusterIP", a.Spec.Type)
	}
	b, err := svcs.Create(ctx, testService("b", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterIP == a.Spec.ClusterIP {
		t.Errorf("two services got the same clusterIP %s", a.Spec.ClusterIP)
	}
	if ip, err := netip.ParseAddr(b.Spec.ClusterIP); err != nil || !cidr.Contains(ip) {
		t.Errorf("clusterIP %q not in %s", b.Spec.ClusterIP, cidr)
	}

	_, err = svcs.Create(ctx, testService("taken", a.Spec.ClusterIP), metav1.CreateOptions{})
	wantStatus(t, "service with a clusterIP in use", err, 422)
	_, err = svcs.Create(ctx, testService("outside", "192.168.0.10"), metav1.CreateOptions{})
	wantStatus(t, "service with a clusterIP outside the range", err, 422)

	h, err := svcs.Create(ctx, testService("headless", corev1.ClusterIPNone), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless clusterIP = %q, want None", h.Spec.ClusterIP)
	}

	// The clusterIP is immutable.
	a.Spec.ClusterIP = "10.96.100.100"
	a.Spec.ClusterIPs = []string{"10.96.100.100"}
	_, err = svcs.Update(ctx, a, metav1.UpdateOptions{})
	wantStatus(t, "changing a service's clusterIP", err, 422)

	// Deleting a service frees its address.
	if err := svcs.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := svcs.Create(ctx, testService("c", ipA.String()), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("reusing the freed clusterIP %s: %v", ipA, err)
	}
	if c.Spec.ClusterIP != ipA.String() {
		t.Errorf("clusterIP = %s, want the requested %s", c.Spec.ClusterIP, ipA)
	}
}

// recordRT records the Content-Type of every request with a body.
type recordRT struct {
	rt  http.RoundTripper
	mu  *sync.Mutex
	cts *[]string
}

func (r recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		r.mu.Lock()
		*r.cts = append(*r.cts, req.Method+" "+req.Header.Get("Content-Type"))
		r.mu.Unlock()
	}
	return r.rt.RoundTrip(req)
}

func TestBodyEncodings(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	ctx := testCtx(t)
	var mu sync.Mutex
	var cts []string
	cfg := *env.config
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordRT{rt, &mu, &cts} }
	cs := newClientset(t, &cfg)

	// Typed clients speak protobuf.
	cm := testConfigMap("pb", map[string]string{"enc": "protobuf"})
	cm.Data = map[string]string{"k": "v"}
	created, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Data["k"] != "v" || created.Labels["enc"] != "protobuf" {
		t.Errorf("protobuf create returned %+v", created)
	}
	created.Data["k2"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments("default").Create(ctx, testDeployment("pb-dep"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 || d.Spec.Template.Spec.Containers[0].Env[0].Value != "1" {
		t.Errorf("protobuf deployment round trip: %+v", d.Spec.Template.Spec.Containers)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "pb", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, ct := range cts {
		if !strings.HasSuffix(ct, "application/vnd.kubernetes.protobuf") {
			t.Errorf("typed client request %q was not protobuf", ct)
		}
	}
	if len(cts) < 4 {
		t.Errorf("recorded %d writes, want 4: %v", len(cts), cts)
	}
	mu.Unlock()

	// JSON body.
	code, _, body := rawDo(t, env, "POST", "/api/v1/namespaces/default/configmaps", "application/json", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-json"},"data":{"fmt":"json"}}`))
	if code != 201 {
		t.Fatalf("JSON create: HTTP %d: %s", code, body)
	}
	var got corev1.ConfigMap
	if err := json.Unmarshal(body, &got); err != nil || got.Data["fmt"] != "json" || got.UID == "" {
		t.Errorf("JSON create response %s (%v)", body, err)
	}

	// YAML body, YAML response.
	yamlBody := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  labels:\n    fmt: yaml\ndata:\n  fmt: yaml\n"
	code, hdr, body := rawDo(t, env, "POST", "/api/v1/namespaces/default/configmaps", "application/yaml", "application/yaml", []byte(yamlBody))
	if code != 201 {
		t.Fatalf("YAML create: HTTP %d: %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("YAML response Content-Type = %q", ct)
	}
	got = corev1.ConfigMap{}
	if err := yaml.Unmarshal(body, &got); err != nil || got.Data["fmt"] != "yaml" || got.Labels["fmt"] != "yaml" {
		t.Errorf("YAML create response %s (%v)", body, err)
	}
	stored, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "from-yaml", metav1.GetOptions{})
	if err != nil || stored.Data["fmt"] != "yaml" {
		t.Errorf("YAML-created object: %+v, %v", stored, err)
	}

	// YAML update via PUT.
	stored.Data["fmt"] = "yaml2"
	js, _ := json.Marshal(stored)
	y, _ := yaml.JSONToYAML(js)
	code, _, body = rawDo(t, env, "PUT", "/api/v1/namespaces/default/configmaps/from-yaml", "application/yaml", "", y)
	if code != 200 {
		t.Fatalf("YAML update: HTTP %d: %s", code, body)
	}

	// Wrong kind in the body is 400; an unknown content type is 415.
	code, _, body = rawDo(t, env, "POST", "/api/v1/namespaces/default/configmaps", "application/json", "",
		[]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"wrong"}}`))
	if code != 400 {
		t.Errorf("wrong kind: HTTP %d: %s", code, body)
	}
	code, _, body = rawDo(t, env, "POST", "/api/v1/namespaces/default/configmaps", "text/plain", "", []byte("hello"))
	if code != 415 {
		t.Errorf("text/plain body: HTTP %d: %s", code, body)
	}
	// Malformed JSON is 400.
	code, _, body = rawDo(t, env, "POST", "/api/v1/namespaces/default/configmaps", "application/json", "", []byte(`{"metadata":`))
	if code != 400 {
		t.Errorf("malformed JSON: HTTP %d: %s", code, body)
	}

	// Errors come back as a Status.
	code, _, body = rawDo(t, env, "GET", "/api/v1/namespaces/default/configmaps/nope", "", "application/json", nil)
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || code != 404 || st.Kind != "Status" || st.Reason != metav1.StatusReasonNotFound || st.Code != 404 {
		t.Errorf("404 body %s (%v)", body, err)
	}
	if st.Details == nil || st.Details.Name != "nope" || st.Details.Kind != "configmaps" {
		t.Errorf("404 details %+v", st.Details)
	}
}
