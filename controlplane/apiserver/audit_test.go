package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// syncBuffer is a bytes.Buffer safe for the backend and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) events(t *testing.T) []auditv1.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []auditv1.Event
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var ev auditv1.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

const testAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/api*", "/version"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
- level: Metadata
`

// TestAuditLog: events name who did what (user, impersonated user, verb,
// object, response code), at the level the policy gives, with the
// request and response bodies at RequestResponse, and omit what the
// policy omits.
func TestAuditLog(t *testing.T) {
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(testAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	auditor, err := NewAuditor(policyFile, out)
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnvWith(t, storage.HubOptions{}, nil, func(c *Config) { c.Audit = auditor })
	ctx := context.Background()
	if _, err := env.clientset(t).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "audited"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := rest.CopyConfig(env.config)
	as.Impersonate = rest.ImpersonationConfig{UserName: "bob"}
	_, err = kubernetes.NewForConfigOrDie(as).CoreV1().Secrets("default").Get(ctx, "missing", metav1.GetOptions{})
	if err == nil {
		t.Fatal("bob read a secret that does not exist")
	}

	// A watch (long-running: its start is an event too) and a request
	// with a token nobody issued (refused before anyone is known).
	w, err := env.clientset(t).CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	for range w.ResultChan() {
	}
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest("GET", env.config.Host+"/api/v1/namespaces/default/pods", nil)
	req.Header.Set("Authorization", "Bearer nobody-issued-this")
	resp, err := anon.Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %v %v", resp, err)
	}
	resp.Body.Close()
	anon.CloseIdleConnections()

	var create, get, unauthorized *auditv1.Event
	var watchStages []auditv1.Stage
	events := out.events(t)
	for i := range events {
		ev := &events[i]
		if ev.Stage == auditv1.StageRequestReceived {
			t.Fatalf("an omitted stage was logged: %+v", ev)
		}
		if ev.ObjectRef == nil {
			t.Fatalf("a non-resource request the policy drops was logged: %s %s", ev.Verb, ev.RequestURI)
		}
		switch {
		case ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusUnauthorized:
			unauthorized = ev
		case ev.Verb == "watch" && ev.ObjectRef.Resource == "configmaps":
			watchStages = append(watchStages, ev.Stage)
		case ev.Verb == "create" && ev.ObjectRef.Resource == "configmaps":
			create = ev
		case ev.Verb == "get" && ev.ObjectRef.Resource == "secrets":
			get = ev
		}
	}
	if create == nil || create.AuditID == "" || create.User.Username != "admin" || create.Level != auditv1.LevelRequestResponse ||
		create.ResponseStatus == nil || create.ResponseStatus.Code != 201 || create.RequestObject == nil ||
		!strings.Contains(string(create.RequestObject.Raw), `"audited"`) || create.ResponseObject == nil ||
		!strings.Contains(string(create.ResponseObject.Raw), `"resourceVersion"`) || create.Stage != auditv1.StageResponseComplete ||
		create.ObjectRef.Name != "audited" {
		t.Fatalf("the create's event: %+v\nall: %s", create, out.buf.String())
	}
	if get == nil || get.User.Username != "admin" || get.ImpersonatedUser == nil || get.ImpersonatedUser.Username != "bob" ||
		get.Level != auditv1.LevelMetadata || get.RequestObject != nil || get.ResponseStatus.Code != 404 || get.AuditID == "" || get.AuditID == create.AuditID {
		t.Fatalf("the impersonated get's event: %+v", get)
	}
	if unauthorized == nil || unauthorized.Stage != auditv1.StageResponseStarted || unauthorized.User.Username != "" ||
		!strings.Contains(unauthorized.ResponseStatus.Message, "bearer") || unauthorized.ObjectRef.Resource != "pods" {
		t.Errorf("the refused request's event: %+v", unauthorized)
	}
	if len(watchStages) != 2 || watchStages[0] != auditv1.StageResponseStarted || watchStages[1] != auditv1.StageResponseComplete {
		t.Errorf("the watch's stages: %v, want ResponseStarted then ResponseComplete", watchStages)
	}
}
