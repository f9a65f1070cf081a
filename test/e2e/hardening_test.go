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
