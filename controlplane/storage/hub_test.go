package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHubHistoryBytes: history keeps at most HistoryBytes of events,
// dropping the oldest (a watch from before them is compacted), and always
// keeps the newest even when it alone is larger.
func TestHubHistoryBytes(t *testing.T) {
	h := NewHub(0, HubOptions{History: 100, HistoryBytes: 10 << 10})
	defer h.Close()
	big := strings.Repeat("x", 4<<10)
	for rev := int64(1); rev <= 5; rev++ {
		h.Publish([]Event{{Type: Put, KV: KV{Key: fmt.Sprintf("/k/%d", rev), Value: []byte(big), ModRevision: rev}}})
	}
	// 5 events of 4 KiB: only the newest two fit in 10 KiB.
	if got := h.CompactedRevision(); got != 3 {
		t.Fatalf("compacted revision %d, want 3", got)
	}
	if h.bytes > 10<<10 {
		t.Fatalf("history holds %d bytes", h.bytes)
	}
	if _, err := h.Watch(context.Background(), "/k/", 2); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch from revision 2: %v, want ErrCompacted", err)
	}
	w, err := h.Watch(context.Background(), "/k/", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []int64{4, 5} {
		if ev := <-w.Events(); ev.KV.ModRevision != want {
			t.Fatalf("replayed revision %d, want %d", ev.KV.ModRevision, want)
		}
	}
	huge := strings.Repeat("y", 20<<10)
	h.Publish([]Event{{Type: Put, KV: KV{Key: "/k/huge", Value: []byte(huge), ModRevision: 6}}})
	if got := h.CompactedRevision(); got != 5 || h.count != 1 {
		t.Fatalf("after an event larger than the bound: compacted %d, %d kept; want 5 and the newest", got, h.count)
	}
}
