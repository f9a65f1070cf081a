// Package storage defines the small key-value contract the API server needs
// from its backing store: versioned objects under string keys, one global
// revision, optimistic concurrency, and watches that resume from a revision.
//
// bbolt (package storage/bolt) is the default implementation; an etcd v3
// implementation can satisfy the same interface and run the same contract
// suite (package storage/storagetest).
package storage

import (
	"context"
	"errors"
)

// Sentinel errors. Implementations wrap them; callers use errors.Is.
var (
	ErrNotFound  = errors.New("storage: key not found")
	ErrExists    = errors.New("storage: key already exists")
	ErrConflict  = errors.New("storage: revision conflict")
	ErrCompacted = errors.New("storage: required revision has been compacted")
	ErrClosed    = errors.New("storage: store is closed")
)

// KV is one stored value and the revisions that describe it.
type KV struct {
	Key   string
	Value []byte
	// CreateRevision is the revision of the write that created the key.
	CreateRevision int64
	// ModRevision is the revision of the last write to the key. The API
	// server exposes it as the object's resourceVersion.
	ModRevision int64
	// Stale says the value was stored in a form that is no longer the
	// preferred one (encrypted with a key other than the first, or not
	// encrypted where it now would be): a write must rewrite it even if it
	// changes nothing (transform.go).
	Stale bool
}

// EventType says what happened to a key.
type EventType int

const (
	// Put is a create or an update; KV.CreateRevision == KV.ModRevision on create.
	Put EventType = iota
	// Delete removes the key; KV holds the last value and ModRevision the
	// revision of the delete.
	Delete
)

// Event is one change, delivered to watchers in revision order.
type Event struct {
	Type EventType
	KV   KV
	// PrevValue is the value before this change (nil on create).
	PrevValue []byte
}

// ListOptions narrows a List.
type ListOptions struct {
	// StartKey, when set, makes the list begin at this key (inclusive); it
	// must lie under the prefix. Used for pagination.
	StartKey string
	// Limit caps the number of returned KVs (0 = no limit).
	Limit int
	// Revision, when > 0, reads the keys as they were at that revision,
	// so that the pages of one list are one snapshot; ErrCompacted when
	// the store no longer keeps it. A store that keeps only the latest
	// version of each key (bbolt) reads the latest state instead:
	// ListResult.Revision says what was read.
	Revision int64
}

// ListResult is one page of a List.
type ListResult struct {
	KVs []KV
	// Revision is the store revision the page was read at
	// (ListOptions.Revision when the store could honour it).
	Revision int64
	// More is true when keys under the prefix remain after the last KV.
	More bool
}

// Store is the API server's view of storage.
//
// Contracts every implementation keeps (storagetest checks them):
//   - Every successful write has a revision strictly greater than all earlier
//     writes, and is durable when the call returns.
//   - Update and Delete with expectedRevision > 0 fail with ErrConflict
//     unless the key's ModRevision equals it.
//   - Watch delivers every change under the prefix with a revision greater
//     than fromRevision, in order and without gaps, or fails/ends with
//     ErrCompacted when those revisions are no longer available.
//   - A slow watcher never blocks writers: it is cut off instead (its channel
//     closes and Err reports why), and the client resumes from its last
//     revision.
type Store interface {
	Get(ctx context.Context, key string) (KV, error)
	List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error)
	Create(ctx context.Context, key string, value []byte) (int64, error)
	Update(ctx context.Context, key string, value []byte, expectedRevision int64) (int64, error)
	// Delete returns the revision of the delete and the deleted KV.
	Delete(ctx context.Context, key string, expectedRevision int64) (int64, KV, error)
	// Watch streams changes under prefix after fromRevision. fromRevision 0
	// means "from now".
	Watch(ctx context.Context, prefix string, fromRevision int64) (Watcher, error)
	// Revision is the current store revision.
	Revision() int64
	Close() error
}

// Watcher is one watch stream. Events closes when the watch ends (context
// cancelled, store closed, or the watcher fell too far behind); Err then
// says why (nil after a cancel).
type Watcher interface {
	Events() <-chan Event
	Err() error
	Stop()
}

// ErrTooSlow ends a watch whose consumer fell behind; resume from the last
// revision received.
var ErrTooSlow = errors.New("storage: watcher fell too far behind")
