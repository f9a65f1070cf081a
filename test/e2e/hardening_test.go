package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestEventTTL: with --event-ttl an Event not recorded again within it is
// deleted (upstream keeps Events an hour by default).
func TestEventTTL(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--event-ttl=3s")
	ev := `apiVersion: v1
kind: Event
metadata: {name: short-lived, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: p}
reason: Tested
message: kept three seconds
type: Normal
`
	cp.mustStdin(ev, "create", "-f", "-")
	if out := cp.must("get", "events", "-o", "name"); !strings.Contains(out, "short-lived") {
		t.Fatalf("event not stored: %q", out)
	}
	testkit.Eventually(t, 30*time.Second, "the event expired", func() bool {
		_, _, err := cp.kubectl("get", "event", "short-lived")
		return err != nil
	})
}

// TestFlowControlObjects: flowcontrol.apiserver.k8s.io/v1 is served with
// upstream's bootstrap configuration and validation.
func TestFlowControlObjects(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	testkit.Eventually(t, 30*time.Second, "upstream's bootstrap FlowSchemas", func() bool {
		out, _, _ := cp.kubectl("get", "flowschemas", "--no-headers")
		return strings.Contains(out, "exempt ") && strings.Contains(out, "catch-all ") && strings.Contains(out, "system-nodes ")
	})
	out := cp.must("get", "prioritylevelconfigurations")
	for _, want := range []string{"NOMINALCONCURRENCYSHARES", "exempt", "workload-low", "catch-all"} {
		if !strings.Contains(out, want) {
			t.Fatalf("kubectl get prioritylevelconfigurations lacks %q:\n%s", want, out)
		}
	}
	bad := "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {name: bad}\nspec: {priorityLevelConfiguration: {name: workload-low}, matchingPrecedence: 20000}\n"
	if _, errOut, err := cp.kubectlStdin(bad, "create", "-f", "-"); err == nil || !strings.Contains(errOut, "spec.matchingPrecedence") {
		t.Fatalf("an invalid FlowSchema: %v\n%s", err, errOut)
	}
	good := "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata: {name: team}\nspec:\n" +
		"  priorityLevelConfiguration: {name: workload-low}\n  matchingPrecedence: 5000\n" +
		"  rules: [{subjects: [{kind: Group, group: {name: team}}], resourceRules: [{verbs: [\"*\"], apiGroups: [\"*\"], resources: [\"*\"], namespaces: [\"*\"]}]}]\n"
	cp.mustStdin(good, "create", "-f", "-")
	if got := cp.must("get", "flowschema", "team", "-o", "jsonpath={.metadata.generation}"); got != "1" {
		t.Fatalf("generation %q", got)
	}
}
