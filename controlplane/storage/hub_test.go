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

// TestHubWatchAhead: a watch from a revision the hub has not published yet
// gets only the events after it; Reset ends watches with the given error
// and starts the history over.
func TestHubWatchAhead(t *testing.T) {
	h := NewHub(0, HubOptions{})
	defer h.Close()
	w, err := h.Watch(context.Background(), "/k/", 2)
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(1); rev <= 3; rev++ {
		h.Publish([]Event{{Type: Put, KV: KV{Key: fmt.Sprintf("/k/%d", rev), ModRevision: rev}}})
	}
	if ev := <-w.Events(); ev.KV.ModRevision != 3 {
		t.Fatalf("first event at revision %d, want 3", ev.KV.ModRevision)
	}
	h.Reset(10, ErrCompacted)
	if _, ok := <-w.Events(); ok || !errors.Is(w.Err(), ErrCompacted) {
		t.Fatalf("after Reset: open=%v err=%v, want closed with ErrCompacted", ok, w.Err())
	}
	if _, err := h.Watch(context.Background(), "/k/", 3); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch from before the reset: %v, want ErrCompacted", err)
	}
	if _, err := h.Watch(context.Background(), "/k/", 10); err != nil {
		t.Fatalf("watch from the reset revision: %v", err)
	}
}
