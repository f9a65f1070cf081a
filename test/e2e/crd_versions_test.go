package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// gadgetCRD serves v1beta1 (deprecated) and v1 (stored) with conversion
// None: the same schema, a field added in v1.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  conversion: {strategy: None}
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: "example.com/v1beta1 Gadget is deprecated; use example.com/v1"
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string, default: blue}
`

// TestCustomResourceVersions: a CRD with two served versions through
// kubectl. An object written in the deprecated version (with its
// warning) is stored in the storage version and read in either; each
// version applies its own schema (v1's default, v1beta1's pruning);
// storedVersions names the storage version; a version no longer served
// is gone from discovery while its objects stay readable in the other.
func TestCustomResourceVersions(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	cp.mustStdin(gadgetCRD, "apply", "-f", "-")
	cp.must("wait", "--for=condition=Established", "crd/gadgets.example.com", "--timeout=30s")

	old := "apiVersion: example.com/v1beta1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 3, color: red}\n"
	out, errOut, err := cp.kubectlStdin(old, "create", "--validate=false", "-f", "-")
	if err != nil || !strings.Contains(errOut, "example.com/v1beta1 Gadget is deprecated") {
		t.Fatalf("create in v1beta1: %v\n%s%s", err, out, errOut)
	}
	// Written through v1beta1, whose schema has no color: pruned there,
	// then v1's default on reading it as v1.
	if got := cp.must("get", "gadgets.v1.example.com", "g1", "-o", "jsonpath={.apiVersion} {.spec.size} {.spec.color}"); got != "example.com/v1 3 blue" {
		t.Fatalf("g1 read as v1: %q", got)
	}
	if got, _, _ := cp.kubectl("get", "gadgets.v1beta1.example.com", "g1", "-o", "jsonpath={.apiVersion} {.spec.size}"); got != "example.com/v1beta1 3" {
		t.Fatalf("g1 read as v1beta1: %q", got)
	}
	cp.mustStdin("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g2}\nspec: {size: 5, color: red}\n", "create", "-f", "-")
	if got, _, _ := cp.kubectl("get", "gadgets.v1beta1.example.com", "-o", "jsonpath={range .items[*]}{.metadata.name}={.apiVersion} {end}"); got != "g1=example.com/v1beta1 g2=example.com/v1beta1 " {
		t.Fatalf("list as v1beta1: %q", got)
	}
	if got := cp.must("get", "crd", "gadgets.example.com", "-o", "jsonpath={.status.storedVersions}"); got != `["v1"]` {
		t.Fatalf("storedVersions %s", got)
	}
	// Each served version has its local APIService, as upstream's CRD
	// registration controller makes them.
	testkit.Eventually(t, 30*time.Second, "APIServices of both versions", func() bool {
		out, _, _ := cp.kubectl("get", "apiservice", "v1.example.com", "v1beta1.example.com", "--no-headers")
		return strings.Count(out, "Local   True") == 2
	})

	// Stop serving v1beta1.
	cp.must("patch", "crd", "gadgets.example.com", "--type=json", "-p", `[{"op":"replace","path":"/spec/versions/0/served","value":false}]`)
	testkit.Eventually(t, 30*time.Second, "v1beta1 no longer served", func() bool {
		_, _, err := cp.kubectl("get", "gadgets.v1beta1.example.com", "g1")
		return err != nil
	})
	if got := cp.must("get", "gadgets", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.color} {end}"); got != "g1=blue g2=red " {
		t.Fatalf("objects after v1beta1 went: %q", got)
	}
	testkit.Eventually(t, 30*time.Second, "the APIService of v1beta1 removed", func() bool {
		_, _, err := cp.kubectl("get", "apiservice", "v1beta1.example.com")
		return err != nil
	})
}
