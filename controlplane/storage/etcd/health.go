package etcd

import (
	"context"
	"fmt"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// Check is the API server's /livez and /readyz check: the store is open
// and etcd answers a linearizable read before ctx ends (which needs a
// leader and a quorum), as upstream's etcd health check does.
func (s *Store) Check(ctx context.Context) error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	resp, err := s.client.Get(ctx, s.prefix+"/health")
	if err != nil {
		return fmt.Errorf("etcd read: %w", err)
	}
	s.observe(resp.Header.Revision)
	return nil
}
