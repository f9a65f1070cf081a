package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/nodelet/nodelet/controlplane/pki"
	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
	"github.com/nodelet/nodelet/hosttools"
)

// fakeMetrics is a MetricsSource with fixed answers.
type fakeMetrics struct {
	nodes []metricsv1beta1.NodeMetrics
	pods  []metricsv1beta1.PodMetrics

	mu         sync.Mutex
	err        error
	namespaces []string // PodMetrics calls, in order
}

func (f *fakeMetrics) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeMetrics) NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return append([]metricsv1beta1.NodeMetrics(nil), f.nodes...), nil
}

func (f *fakeMetrics) PodMetrics(ctx context.Context, namespace string) ([]metricsv1beta1.PodMetrics, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.namespaces = append(f.namespaces, namespace)
	if f.err != nil {
		return nil, f.err
	}
	var out []metricsv1beta1.PodMetrics
	for _, p := range f.pods {
		if namespace == "" || p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out, nil
}

// usage is cpu in millicores and memory in MiB, in metrics-server's formats.
func usage(milliCores, mib int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewScaledQuantity(milliCores*1_000_000, resource.Nano),
		corev1.ResourceMemory: *resource.NewQuantity(mib<<20, resource.BinarySI),
	}
}

var metricsTime = time.Now().Add(-3 * time.Second).Truncate(time.Second)

func nodeMetric(name string, labels map[string]string, milliCores, mib int64) metricsv1beta1.NodeMetrics {
	return metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(metricsTime),
		Window:     metav1.Duration{Duration: 10 * time.Second},
		Usage:      usage(milliCores, mib),
	}
}

func podMetric(ns, name string, labels map[string]string, containers ...metricsv1beta1.ContainerMetrics) metricsv1beta1.PodMetrics {
	return metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, CreationTimestamp: metav1.Now()},
		Timestamp:  metav1.NewTime(metricsTime),
		Window:     metav1.Duration{Duration: 10 * time.Second},
		Containers: containers,
	}
}

func containerMetric(name string, milliCores, mib int64) metricsv1beta1.ContainerMetrics {
	return metricsv1beta1.ContainerMetrics{Name: name, Usage: usage(milliCores, mib)}
}

func testMetrics() *fakeMetrics {
	return &fakeMetrics{
		nodes: []metricsv1beta1.NodeMetrics{
			nodeMetric("node-a", map[string]string{"zone": "z1"}, 250, 512),
			nodeMetric("node-b", map[string]string{"zone": "z2"}, 1500, 2048),
		},
		pods: []metricsv1beta1.PodMetrics{
			podMetric("default", "db", map[string]string{"app": "db"}, containerMetric("postgres", 120, 300)),
			podMetric("default", "web", map[string]string{"app": "web"}, containerMetric("nginx", 50, 20), containerMetric("sidecar", 5, 8)),
			podMetric("kube-system", "dns", map[string]string{"app": "dns"}, containerMetric("coredns", 3, 15)),
		},
	}
}

// recordingAuthz allows everything and records the attributes of
// metrics.k8s.io requests.
type recordingAuthz struct {
	mu    sync.Mutex
	attrs []authorizer.AttributesRecord
}

func (a *recordingAuthz) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetAPIGroup() != metricsGV.Group {
		return authorizer.DecisionAllow, "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.attrs = append(a.attrs, *attrs.(*authorizer.AttributesRecord))
	if attrs.GetName() == "forbidden" {
		return authorizer.DecisionDeny, "not this one", nil
	}
	return authorizer.DecisionAllow, "", nil
}

func (a *recordingAuthz) last() authorizer.AttributesRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.attrs) == 0 {
		return authorizer.AttributesRecord{}
	}
	return a.attrs[len(a.attrs)-1]
}

// newMetricsEnv is newTestEnv with a metrics source and an authorizer.
func newMetricsEnv(tb testing.TB, src MetricsSource, authz authorizer.Authorizer) *testEnv {
	tb.Helper()
	dir := tb.TempDir()
	bundle, err := pki.Ensure(pki.Config{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	store, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, "state.db"), Hub: storage.HubOptions{}})
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := New(Config{Store: store, Resources: registry.All(),
		Authn: testAuthn(), Authz: authz, Log: log, Metrics: src})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.EnsureDefaults(ctx); err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.TLS = testTLS(tb, bundle)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	certPEM, keyPEM, err := bundle.SignClientCert("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	env := &testEnv{srv: srv, store: store, ts: ts, config: &rest.Config{
		Host: ts.URL, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: bundle.CAPEM(), CertData: certPEM, KeyData: keyPEM},
	}}
	tb.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		store.Close()
	})
	return env
}

func metricsClients(t *testing.T, env *testEnv) map[string]metricsclient.Interface {
	out := map[string]metricsclient.Interface{}
	for name, ct := range map[string]string{"json": "", "protobuf": "application/vnd.kubernetes.protobuf"} {
		cfg := rest.CopyConfig(env.config)
		cfg.ContentType = ct // kubectl top sets protobuf
		mc, err := metricsclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = mc
	}
	return out
}

func nodeMetricNames(items []metricsv1beta1.NodeMetrics) string {
	var out []string
	for _, m := range items {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

func podMetricNames(items []metricsv1beta1.PodMetrics) string {
	var out []string
	for _, m := range items {
		out = append(out, m.Namespace+"/"+m.Name)
	}
	return strings.Join(out, ",")
}

func TestMetricsAPI(t *testing.T) {
	src := testMetrics()
	env := newMetricsEnv(t, src, AllowAuthenticated)
	ctx := testCtx(t)

	for name, mc := range metricsClients(t, env) {
		t.Run(name, func(t *testing.T) {
			nodes := mc.MetricsV1beta1().NodeMetricses()
			pods := mc.MetricsV1beta1().PodMetricses

			list, err := nodes.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := nodeMetricNames(list.Items); got != "node-a,node-b" {
				t.Errorf("nodes: got %s", got)
			}
			a := list.Items[0]
			if cpu, mem := a.Usage[corev1.ResourceCPU], a.Usage[corev1.ResourceMemory]; cpu.MilliValue() != 250 || mem.Value() != 512<<20 {
				t.Errorf("node-a usage = %s cpu, %s memory", cpu.String(), mem.String())
			}
			if !a.Timestamp.Time.Equal(metricsTime) || a.Window.Duration != 10*time.Second || a.Labels["zone"] != "z1" {
				t.Errorf("node-a = %+v", a)
			}

			for sel, want := range map[string]string{"zone=z2": "node-b", "zone in (z1,z2)": "node-a,node-b", "zone=z3": ""} {
				list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: sel})
				if err != nil {
					t.Fatalf("labelSelector %q: %v", sel, err)
				}
				if got := nodeMetricNames(list.Items); got != want {
					t.Errorf("labelSelector %q: got %q, want %q", sel, got, want)
				}
			}
			list, err = nodes.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-a"})
			if err != nil || nodeMetricNames(list.Items) != "node-a" {
				t.Errorf("fieldSelector metadata.name=node-a: %v, %v", nodeMetricNames(list.Items), err)
			}
			_, err = nodes.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=x"})
			wantStatus(t, "unsupported field selector", err, http.StatusBadRequest)

			b, err := nodes.Get(ctx, "node-b", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cpu := b.Usage[corev1.ResourceCPU]; b.Name != "node-b" || cpu.MilliValue() != 1500 {
				t.Errorf("get node-b = %+v", b)
			}
			_, err = nodes.Get(ctx, "missing", metav1.GetOptions{})
			wantStatus(t, "get a missing node", err, http.StatusNotFound)
			if want := `nodemetrics.metrics.k8s.io "missing" not found`; err.Error() != want {
				t.Errorf("error = %q, want %q", err.Error(), want)
			}

			all, err := pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := podMetricNames(all.Items); got != "default/db,default/web,kube-system/dns" {
				t.Errorf("pods in all namespaces: got %s", got)
			}
			def, err := pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app!=db"})
			if err != nil {
				t.Fatal(err)
			}
			if got := podMetricNames(def.Items); got != "default/web" {
				t.Errorf("default pods app!=db: got %s", got)
			}
			web := def.Items[0]
			if len(web.Containers) != 2 || web.Containers[1].Name != "sidecar" {
				t.Errorf("web containers = %+v", web.Containers)
			}
			sys, err := pods("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=kube-system"})
			if err != nil || podMetricNames(sys.Items) != "kube-system/dns" {
				t.Errorf("fieldSelector metadata.namespace: %s, %v", podMetricNames(sys.Items), err)
			}

			dns, err := pods("kube-system").Get(ctx, "dns", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if dns.Namespace != "kube-system" || dns.Containers[0].Name != "coredns" {
				t.Errorf("get dns = %+v", dns)
			}
			_, err = pods("default").Get(ctx, "dns", metav1.GetOptions{})
			wantStatus(t, "get a pod of another namespace", err, http.StatusNotFound)
			if want := `podmetrics.metrics.k8s.io "default/dns" not found`; err.Error() != want {
				t.Errorf("error = %q, want %q", err.Error(), want)
			}

			_, err = pods("default").Watch(ctx, metav1.ListOptions{})
			wantStatus(t, "watch", err, http.StatusMethodNotAllowed)
		})
	}
}

func TestMetricsAPIRaw(t *testing.T) {
	src := testMetrics()
	env := newMetricsEnv(t, src, AllowAuthenticated)

	code, hdr, body := rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", "", "application/json", nil)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("list nodes: %d %s: %s", code, hdr.Get("Content-Type"), body)
	}
	var raw struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Usage      map[string]string `json:"usage"`
			Window     string            `json:"window"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.APIVersion != "metrics.k8s.io/v1beta1" || raw.Kind != "NodeMetricsList" || len(raw.Items) != 2 {
		t.Fatalf("list = %s", body)
	}
	if u := raw.Items[0].Usage; u["cpu"] != "250m" || u["memory"] != "512Mi" || raw.Items[0].Window != "10s" {
		t.Errorf("item = %+v", raw.Items[0])
	}

	code, _, body = rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", "", "", nil)
	if code != 200 || !strings.Contains(string(body), `"kind":"PodMetrics","apiVersion":"metrics.k8s.io/v1beta1"`) {
		t.Errorf("get pod: %d %s", code, body)
	}

	// An empty list has items [], not null.
	code, _, body = rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/empty/pods", "", "", nil)
	if code != 200 || !strings.Contains(string(body), `"items":[]`) {
		t.Errorf("empty list: %d %s", code, body)
	}

	for _, tc := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
	}{
		{"POST", "/apis/metrics.k8s.io/v1beta1/nodes", 405, metav1.StatusReasonMethodNotAllowed},
		{"DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/node-a", 405, metav1.StatusReasonMethodNotAllowed},
		{"PUT", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", 405, metav1.StatusReasonMethodNotAllowed},
		{"PATCH", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", 405, metav1.StatusReasonMethodNotAllowed},
		{"DELETE", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", 405, metav1.StatusReasonMethodNotAllowed},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes?watch=true", 405, metav1.StatusReasonMethodNotAllowed},
		{"GET", "/apis/metrics.k8s.io/v1beta1/services", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/nodes", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/metrics.k8s.io/v1beta1/pods/web", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes/node-a/status", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope", 404, metav1.StatusReasonNotFound},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=a%3D%3D%3Db", 400, metav1.StatusReasonBadRequest},
		{"GET", "/apis/metrics.k8s.io/v2/nodes", 404, metav1.StatusReasonNotFound},
	} {
		code, _, body := rawDo(t, env, tc.method, tc.path, "application/json", "", []byte("{}"))
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Errorf("%s %s: %d, not a Status: %s", tc.method, tc.path, code, body)
			continue
		}
		if code != tc.code || st.Kind != "Status" || st.Reason != tc.reason {
			t.Errorf("%s %s: %d %s %s, want %d %s", tc.method, tc.path, code, st.Kind, st.Reason, tc.code, tc.reason)
		}
	}

	// A failing source is an internal error.
	src.setErr(errors.New("boom"))
	code, _, body = rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", "", "", nil)
	if code != 500 || !strings.Contains(string(body), "boom") {
		t.Errorf("failing source: %d %s", code, body)
	}
}

func TestMetricsTable(t *testing.T) {
	env := newMetricsEnv(t, testMetrics(), AllowAuthenticated)
	code, _, body := rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "", tableAccept, nil)
	if code != 200 {
		t.Fatalf("table: %d %s", code, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,CPU,Memory,Window" {
		t.Errorf("columns = %v", cols)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("rows = %+v", table.Rows)
	}
	// The pod's usage is the sum of its containers'.
	if got, want := table.Rows[1].Cells, []interface{}{"web", "55m", "28Mi", "10s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("web row = %v, want %v", got, want)
	}
}

func TestMetricsDiscovery(t *testing.T) {
	env := newMetricsEnv(t, testMetrics(), AllowAuthenticated)
	dc := env.clientset(t).Discovery()
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var found *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == "metrics.k8s.io" {
			found = &groups.Groups[i]
		}
	}
	if found == nil || found.PreferredVersion.GroupVersion != "metrics.k8s.io/v1beta1" || len(found.Versions) != 1 {
		t.Fatalf("metrics.k8s.io in /apis = %+v", found)
	}
	code, _, body := rawDo(t, env, "GET", "/apis/metrics.k8s.io", "", "", nil)
	if code != 200 || !strings.Contains(string(body), `"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}`) {
		t.Errorf("/apis/metrics.k8s.io: %d %s", code, body)
	}
	rl, err := dc.ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	want := []metav1.APIResource{
		{Name: "nodes", Namespaced: false, Kind: "NodeMetrics", Verbs: metav1.Verbs{"get", "list"}},
		{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: metav1.Verbs{"get", "list"}},
	}
	if !reflect.DeepEqual(rl.APIResources, want) {
		t.Errorf("resources = %+v, want %+v", rl.APIResources, want)
	}

	// Without a source the group is not served at all.
	plain := newTestEnv(t, storage.HubOptions{}, nil)
	groups, err = plain.clientset(t).Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "metrics.k8s.io" {
			t.Error("metrics.k8s.io listed without a metrics source")
		}
	}
	for _, p := range []string{"/apis/metrics.k8s.io", "/apis/metrics.k8s.io/v1beta1", "/apis/metrics.k8s.io/v1beta1/nodes"} {
		if code, _, body := rawDo(t, plain, "GET", p, "", "", nil); code != 404 {
			t.Errorf("%s without a metrics source: %d %s", p, code, body)
		}
	}
}

func TestMetricsAuthorization(t *testing.T) {
	authz := &recordingAuthz{}
	env := newMetricsEnv(t, testMetrics(), authorizer.AuthorizerFunc(authz.Authorize))
	for _, tc := range []struct {
		method, path string
		want         authorizer.AttributesRecord
	}{
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes", authorizer.AttributesRecord{Verb: "list", Resource: "nodes"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes/node-a", authorizer.AttributesRecord{Verb: "get", Resource: "nodes", Name: "node-a"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/pods", authorizer.AttributesRecord{Verb: "list", Resource: "pods"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", authorizer.AttributesRecord{Verb: "list", Resource: "pods", Namespace: "default"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", authorizer.AttributesRecord{Verb: "get", Resource: "pods", Namespace: "default", Name: "web"}},
		{"GET", "/apis/metrics.k8s.io/v1beta1/nodes?watch=1", authorizer.AttributesRecord{Verb: "watch", Resource: "nodes"}},
	} {
		rawDo(t, env, tc.method, tc.path, "", "", nil)
		got := authz.last()
		if got.User == nil || got.User.GetName() != "admin" || !got.ResourceRequest || got.APIGroup != "metrics.k8s.io" || got.APIVersion != "v1beta1" {
			t.Errorf("%s: attributes = %+v", tc.path, got)
		}
		if got.Verb != tc.want.Verb || got.Resource != tc.want.Resource || got.Namespace != tc.want.Namespace || got.Name != tc.want.Name {
			t.Errorf("%s: verb/resource/namespace/name = %s/%s/%s/%s, want %s/%s/%s/%s", tc.path,
				got.Verb, got.Resource, got.Namespace, got.Name, tc.want.Verb, tc.want.Resource, tc.want.Namespace, tc.want.Name)
		}
	}
	code, _, body := rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/nodes/forbidden", "", "", nil)
	// upstream's wording: who cannot do what, where, and the reason
	want := `nodes.metrics.k8s.io \"forbidden\" is forbidden: User \"admin\" cannot get resource \"nodes\" in API group \"metrics.k8s.io\" at the cluster scope: not this one`
	if code != http.StatusForbidden || !strings.Contains(string(body), want) {
		t.Errorf("denied request: %d %s\nwant the message %s", code, body, want)
	}

	// Unauthenticated requests never reach the source.
	anon := rest.CopyConfig(env.config)
	anon.CertData, anon.KeyData = nil, nil
	hc, err := rest.HTTPClientFor(anon)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(env.config.Host + "/apis/metrics.k8s.io/v1beta1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous request: %d", resp.StatusCode)
	}
}

func TestMetricsProtobuf(t *testing.T) {
	env := newMetricsEnv(t, testMetrics(), AllowAuthenticated)
	// What kubectl top sends by default.
	code, hdr, body := rawDo(t, env, "GET", "/apis/metrics.k8s.io/v1beta1/nodes", "", "application/vnd.kubernetes.protobuf, */*", nil)
	if code != 200 || hdr.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("got %d %s, want protobuf", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(string(body), "NodeMetricsList") || !strings.Contains(string(body), "node-b") {
		t.Errorf("protobuf body lacks the kind or an item: %q", body)
	}
}

// writeKubeconfig writes a kubeconfig for env's admin client.
func writeKubeconfig(t *testing.T, env *testEnv) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.config.Host, CertificateAuthorityData: env.config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.config.CertData, ClientKeyData: env.config.KeyData}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlTop runs the real kubectl top against the server.
func TestKubectlTop(t *testing.T) {
	if _, err := hosttools.Path("kubectl"); err != nil {
		t.Fatal("kubectl (v1.32) is required: scripts/deps.sh checks for it")
	}
	env := newMetricsEnv(t, testMetrics(), AllowAuthenticated)
	cs := env.clientset(t)
	ctx := testCtx(t)
	for _, m := range testMetrics().nodes {
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
		n.Status.Capacity = n.Status.Allocatable
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := writeKubeconfig(t, env)
	cacheDir := t.TempDir()
	kubectl := func(args ...string) (string, string, error) {
		cmd := hosttools.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+cacheDir)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	// rows turns kubectl's table output into fields per line.
	rows := func(out string) string {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(lines, "\n")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "nodes"}, "NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)\nnode-a 250m 12% 512Mi 12%\nnode-b 1500m 75% 2048Mi 50%"},
		{[]string{"top", "node", "node-b"}, "NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)\nnode-b 1500m 75% 2048Mi 50%"},
		{[]string{"top", "node", "-l", "zone=z1", "--no-headers"}, "node-a 250m 12% 512Mi 12%"},
		{[]string{"top", "pods"}, "NAME CPU(cores) MEMORY(bytes)\ndb 120m 300Mi\nweb 55m 28Mi"},
		{[]string{"top", "pods", "-A"}, "NAMESPACE NAME CPU(cores) MEMORY(bytes)\ndefault db 120m 300Mi\ndefault web 55m 28Mi\nkube-system dns 3m 15Mi"},
		{[]string{"top", "pods", "-A", "-l", "app in (web,dns)", "--containers"}, "NAMESPACE POD NAME CPU(cores) MEMORY(bytes)\ndefault web nginx 50m 20Mi\ndefault web sidecar 5m 8Mi\nkube-system dns coredns 3m 15Mi"},
		{[]string{"top", "pod", "dns", "-n", "kube-system", "--containers"}, "POD NAME CPU(cores) MEMORY(bytes)\ndns coredns 3m 15Mi"},
		{[]string{"top", "pod", "web", "--use-protocol-buffers=false"}, "NAME CPU(cores) MEMORY(bytes)\nweb 55m 28Mi"},
		{[]string{"get", "podmetrics", "-n", "kube-system"}, "NAME CPU MEMORY WINDOW\ndns 3m 15Mi 10s"},
		{[]string{"get", "nodemetrics", "node-a"}, "NAME CPU MEMORY WINDOW\nnode-a 250m 512Mi 10s"},
		{[]string{"get", "nodes.metrics.k8s.io", "-o", "jsonpath={.items[*].usage.cpu}"}, "250m 1500m"},
	} {
		out, errOut, err := kubectl(tc.args...)
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(tc.args, " "), err, errOut)
			continue
		}
		if got := rows(out); got != tc.want {
			t.Errorf("kubectl %s:\n%s\nwant:\n%s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "node", "missing"}, `Error from server (NotFound): nodemetrics.metrics.k8s.io "missing" not found`},
		{[]string{"top", "pod", "missing"}, `Error from server (NotFound): podmetrics.metrics.k8s.io "default/missing" not found`},
	} {
		_, errOut, err := kubectl(tc.args...)
		if err == nil || strings.TrimSpace(errOut) != tc.want {
			t.Errorf("kubectl %s: err %v, stderr %q, want %q", strings.Join(tc.args, " "), err, errOut, tc.want)
		}
	}
}
