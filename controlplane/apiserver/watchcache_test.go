package apiserver

import (
	"strings"
	"testing"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestWatchCacheBytes: the decoded-event cache drops its oldest entries
// once their charge passes maxBytes, keeping the newest.
func TestWatchCacheBytes(t *testing.T) {
	c := newWatchCache(100)
	c.maxBytes = 3 * watchCacheFactor * 1000
	res := &registry.Resource{Name: "configmaps"}
	value := []byte(strings.Repeat("v", 1000))
	for rev := int64(1); rev <= 10; rev++ {
		c.get(objectCodec{}, res, storage.Event{KV: storage.KV{Key: "/configmaps/k", Value: value, ModRevision: rev}})
		if c.bytes > c.maxBytes {
			t.Fatalf("after revision %d the cache holds %d, over %d", rev, c.bytes, c.maxBytes)
		}
	}
	if len(c.entries) != 3 {
		t.Fatalf("%d entries kept, want the newest 3", len(c.entries))
	}
	for rev := int64(8); rev <= 10; rev++ {
		if _, ok := c.entries[eventKey{rev: rev, res: res}]; !ok {
			t.Fatalf("revision %d not kept", rev)
		}
	}
}
