package bolt

import (
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/controlplane/storage/storagetest"
)

func TestContract(t *testing.T) {
	storagetest.Run(t, func(t *testing.T, dir string, opts storage.HubOptions) storage.Store {
		s, err := Open(Config{Path: filepath.Join(dir, "state.db"), Hub: opts})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	})
}
