package apiserver

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// RuntimeClasses as upstream serves them: node.k8s.io/v1 in discovery,
// cluster-scoped, validated by upstream's code (handler a DNS label and
// immutable, the overhead as resource limits), listed as NAME HANDLER AGE.
func TestRuntimeClassResource(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)

	resources, err := cs.Discovery().ServerResourcesForGroupVersion("node.k8s.io/v1")
	if err != nil {
		t.Fatalf("discovery of node.k8s.io/v1: %v", err)
	}
	if len(resources.APIResources) != 1 || resources.APIResources[0].Name != "runtimeclasses" ||
		resources.APIResources[0].Kind != "RuntimeClass" || resources.APIResources[0].Namespaced {
		t.Errorf("node.k8s.io/v1 resources = %+v", resources.APIResources)
	}

	rcs := cs.NodeV1().RuntimeClasses()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}
	created, err := rcs.Create(ctx, rc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Handler != "runsc" || created.Overhead.PodFixed.Cpu().String() != "250m" {
		t.Errorf("created %+v", created)
	}

	bad := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Handler: "Not_A_Label"}
	_, err = rcs.Create(ctx, bad, metav1.CreateOptions{})
	wantInvalid(t, "bad handler", err, `RuntimeClass.node.k8s.io "bad" is invalid: handler: Invalid value: "Not_A_Label": `+
		`a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character `+
		`(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`)
	negative := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "negative"}, Handler: "runc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}}
	_, err = rcs.Create(ctx, negative, metav1.CreateOptions{})
	wantStatus(t, "negative overhead", err, 422)

	upd := created.DeepCopy()
	upd.Handler = "runc"
	_, err = rcs.Update(ctx, upd, metav1.UpdateOptions{})
	wantInvalid(t, "handler change", err, `RuntimeClass.node.k8s.io "gvisor" is invalid: handler: Invalid value: "runc": field is immutable`)

	code, _, body := rawDo(t, env, "GET", "/apis/node.k8s.io/v1/runtimeclasses", "", tableAccept, nil)
	if code != 200 {
		t.Fatalf("table: HTTP %d: %s", code, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if len(cols) != 3 || cols[0] != "Name" || cols[1] != "Handler" || cols[2] != "Age" {
		t.Errorf("columns %v, want Name Handler Age", cols)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "gvisor" || table.Rows[0].Cells[1] != "runsc" {
		t.Errorf("rows %+v", table.Rows)
	}
}
