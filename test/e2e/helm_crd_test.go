package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestHelmCRD: Helm 3 and Helm 4 install the demo-crd chart: the
// CustomResourceDefinition of its crds/ first (Helm waits for it to be
// Established and rereads discovery), then the custom resource of its
// templates; upgrade (the resource changes), roll back and uninstall it
// (the resource goes, the CRD stays: Helm never deletes CRDs). No node is
// needed.
func TestHelmCRD(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	if out, errOut, err := cp.kubectl("api-resources", "--api-group=apiextensions.k8s.io", "-o", "name"); err != nil || !strings.Contains(out, "customresourcedefinitions") {
		t.Fatalf("the API server serves no CustomResourceDefinitions (apiextensions.k8s.io): %v\n%s%s", err, out, errOut)
	}
	for _, major := range []int{3, 4} {
		t.Run(fmt.Sprintf("helm%d", major), func(t *testing.T) {
			testHelmCRDLifecycle(t, cp, newHelm(t, cp, major))
		})
	}
}

func testHelmCRDLifecycle(t *testing.T, cp *controlPlane, h *helmClient) {
	ns, release := fmt.Sprintf("helm%d-crd", h.major), "gadget"
	crd := "customresourcedefinition.apiextensions.k8s.io/widgets.demo.nodelet.io"
	get := func(args ...string) string {
		out, _, _ := cp.kubectl(append([]string{"-n", ns}, args...)...)
		return strings.TrimSpace(out)
	}

	h.must("install", release, demoCRDChart, "-n", ns, "--create-namespace", "--wait", "--timeout", "2m")
	if got := get("get", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`); got != "True" {
		t.Errorf("after install: the CRD's Established condition is %q", got)
	}
	if got := get("get", "widgets.demo.nodelet.io", release, "-o", "jsonpath={.spec.size} {.spec.color}"); got != "3 blue" {
		t.Errorf("after install: the widget's spec is %q, want 3 blue", got)
	}
	if got := get("get", "configmap", release+"-widget", "-o", "jsonpath={.data.size}"); got != "3" {
		t.Errorf("after install: the chart's ConfigMap says %q", got)
	}

	h.must("upgrade", release, demoCRDChart, "-n", ns, "--set", "size=5", "--wait", "--timeout", "2m")
	if got := get("get", "widgets.demo.nodelet.io", release, "-o", "jsonpath={.spec.size} {.metadata.generation}"); got != "5 2" {
		t.Errorf("after upgrade: the widget's size and generation %q, want 5 2", got)
	}
	// The CRD's schema holds: a size under its minimum is refused.
	if out, errOut, err := h.run("upgrade", release, demoCRDChart, "-n", ns, "--set", "size=0"); err == nil {
		t.Errorf("upgrade with size=0 (minimum 1) succeeded:\n%s%s", out, errOut)
	}

	h.must("rollback", release, "1", "-n", ns, "--wait", "--timeout", "2m")
	if got := get("get", "widgets.demo.nodelet.io", release, "-o", "jsonpath={.spec.size}"); got != "3" {
		t.Errorf("after rollback: the widget's size %q, want 3", got)
	}
	revs := h.history(ns, release)
	if n := len(revs); n < 3 || revs[n-1].Status != "deployed" || revs[n-1].Description != "Rollback to 1" {
		t.Errorf("history after rollback: %+v", revs)
	}

	h.must("uninstall", release, "-n", ns, "--wait", "--timeout", "2m")
	testkit.Eventually(t, 30*time.Second, "the widget and the ConfigMap gone", func() bool {
		return get("get", "widgets.demo.nodelet.io,configmaps", "-l", "app.kubernetes.io/instance="+release, "-o", "name") == "" &&
			get("get", "configmap", release+"-widget", "--ignore-not-found", "-o", "name") == ""
	})
	if got := get("get", crd, "-o", "name"); got != crd {
		t.Errorf("after uninstall: the CRD is %q; Helm keeps CRDs", got)
	}
	cp.must("delete", crd)
	cp.must("delete", "namespace", ns)
}
