package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestCheck: a working store is healthy; one whose commit has run past
// commitStallAfter, or that is closed, is not.
func TestCheck(t *testing.T) {
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, "/k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := storage.CheckHealth(ctx, s); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	s.commitStart.Store(time.Now().Add(-commitStallAfter - time.Second).UnixNano())
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "a commit has been running") {
		t.Fatalf("stalled commit: %v", err)
	}
	s.commitStart.Store(0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
}
