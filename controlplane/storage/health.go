package storage

import (
	"context"
	"errors"
	"fmt"
)

// Checker is a store that can say whether it is healthy: reachable, and
// committing writes rather than stuck in one (a wedged disk, a hung
// fsync). The API server's /livez and /readyz ask it.
type Checker interface {
	Check(ctx context.Context) error
}

// CheckHealth runs s's own check when it has one; otherwise a store is
// healthy when it answers a read.
func CheckHealth(ctx context.Context, s Store) error {
	if c, ok := s.(Checker); ok {
		return c.Check(ctx)
	}
	_, err := s.Get(ctx, "/health")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("storage read: %w", err)
	}
	return nil
}

// Check passes the check to the store it instruments.
func (i *Instrumented) Check(ctx context.Context) error { return CheckHealth(ctx, i.Store) }
