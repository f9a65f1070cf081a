package storage_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/bolt"
	"github.com/nodelet/nodelet/controlplane/storage/storagetest"
)

func openBolt(t *testing.T, dir string, opts storage.HubOptions) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(bolt.Config{Path: filepath.Join(dir, "state.db"), Hub: opts})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The wrapper must keep every Store contract.
func TestInstrumentedContract(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, dir string, opts storage.HubOptions) storage.Store {
		s, err := storage.NewInstrumented(openBolt(t, dir, opts), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestInstrumentedObservesAndCounts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openBolt(t, dir, storage.HubOptions{})
	defer db.Close()
	// Objects stored before the wrapper exists are found by CountObjects.
	for _, k := range []string{"/pods/ns/a", "/pods/ns/b", "/deployments.apps/ns/d"} {
		if _, err := db.Create(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	s, err := storage.NewInstrumented(db, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CountObjects(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/pods/ns/c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/pods/ns/c", []byte("x")); err == nil {
		t.Fatal("second create of the same key succeeded")
	}
	if _, _, err := s.Delete(ctx, "/deployments.apps/ns/d", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "/pods/ns/a"); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP apiserver_storage_objects Number of stored objects at the time of last check split by kind.
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="deployments.apps"} 0
apiserver_storage_objects{resource="pods"} 3
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(want), "apiserver_storage_objects"); err != nil {
		t.Error(err)
	}
	// One series per operation and resource: get, create (both attempts
	// timed) and delete.
	if n := testutil.CollectAndCount(reg, "etcd_request_duration_seconds"); n != 3 {
		t.Errorf("%d etcd_request_duration_seconds series, want 3", n)
	}
}
