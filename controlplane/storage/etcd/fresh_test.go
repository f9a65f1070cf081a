package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage/etcd/etcdtest"
)

// TestWatchAfterForeignWrite: a write outside the prefix moves the store's
// revision past anything the feed carries; a new watch then waits only for
// a progress notification, not for the periodic one or freshWait.
func TestWatchAfterForeignWrite(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := open(t, srv, Config{CompactInterval: -1})
	for i := 0; i < 3; i++ {
		if _, err := s.client.Put(ctx, "/elsewhere/k", "v"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "/k"); err == nil {
			t.Fatal("found /k")
		}
		start := time.Now()
		w, err := s.Watch(ctx, "/", 0)
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("watch took %s to start after a foreign write", d)
		} else {
			t.Logf("watch started in %s", d)
		}
	}
}
