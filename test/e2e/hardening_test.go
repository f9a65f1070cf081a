package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
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

// encryptionConfig is an EncryptionConfiguration for Secrets with aescbc
// keys in order (the first writes).
func encryptionConfig(keys ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "      - name: %s\n        secret: %s\n", k, base64.StdEncoding.EncodeToString([]byte(strings.Repeat(k, 32)[:32])))
	}
	b.WriteString("  - identity: {}\n")
	return b.String()
}

// TestEncryptionAtRest: with --encryption-provider-config a Secret's data
// never reaches the store file in the clear; after a new key is put first
// and every Secret replaced (upstream's rotation), the new key wrote them,
// and the old key can then be dropped.
func TestEncryptionAtRest(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	cfgFile := filepath.Join(t.TempDir(), "encryption.yaml")
	writeConfig := func(keys ...string) {
		if err := os.WriteFile(cfgFile, []byte(encryptionConfig(keys...)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stateFile := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	writeConfig("key1")
	cp := startControlPlane(t, dir, port, "--encryption-provider-config="+cfgFile)
	cp.must("create", "secret", "generic", "db", "--from-literal=password=topsecret-e2e-value")
	if got := cp.must("get", "secret", "db", "-o", "jsonpath={.data.password}"); got != base64.StdEncoding.EncodeToString([]byte("topsecret-e2e-value")) {
		t.Fatalf("secret read back: %q", got)
	}
	if raw := stateFile(); strings.Contains(raw, "topsecret-e2e-value") || !strings.Contains(raw, "k8s:enc:aescbc:v1:key1:") {
		t.Fatal("the store file holds the secret in the clear, or not encrypted with key1")
	}
	cp.stop()

	writeConfig("key2", "key1")
	cp = startControlPlane(t, dir, port, "--encryption-provider-config="+cfgFile)
	all := cp.must("get", "secrets", "-A", "-o", "json")
	cp.mustStdin(all, "replace", "-f", "-")
	if raw := stateFile(); !strings.Contains(raw, "k8s:enc:aescbc:v1:key2:") {
		t.Fatal("the replaced secrets were not written with key2")
	}
	cp.stop()

	writeConfig("key2")
	cp = startControlPlane(t, dir, port, "--encryption-provider-config="+cfgFile)
	if got := cp.must("get", "secret", "db", "-o", "jsonpath={.data.password}"); got != base64.StdEncoding.EncodeToString([]byte("topsecret-e2e-value")) {
		t.Fatalf("secret after key1 was dropped: %q", got)
	}
}

// TestAuditLogThroughKubectl: with an audit policy and log, what kubectl
// does is in the log: who (and as whom), which verb on which object, and
// the answer.
func TestAuditLogThroughKubectl(t *testing.T) {
	dir := t.TempDir()
	policyFile, logFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n" +
		"- level: RequestResponse\n  resources: [{group: \"\", resources: [configmaps]}]\n- level: Metadata\n"
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, t.TempDir(), freePort(t), "--audit-policy-file="+policyFile, "--audit-log-path="+logFile)
	cp.must("create", "configmap", "audited", "--from-literal=k=v")
	if _, _, err := cp.kubectl("get", "secrets", "--as=mallory"); err == nil {
		t.Fatal("mallory listed secrets")
	}
	var created, refused bool
	testkit.Eventually(t, 10*time.Second, "both requests in the audit log", func() bool {
		data, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			created = created || strings.Contains(line, `"verb":"create"`) && strings.Contains(line, `"resource":"configmaps"`) &&
				strings.Contains(line, `"username":"admin"`) && strings.Contains(line, `"code":201`) && strings.Contains(line, `"requestObject"`)
			refused = refused || strings.Contains(line, `"verb":"list"`) && strings.Contains(line, `"resource":"secrets"`) &&
				strings.Contains(line, `"impersonatedUser":{"username":"mallory"`) && strings.Contains(line, `"code":403`)
		}
		return created && refused
	})
}
