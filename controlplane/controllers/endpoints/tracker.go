package endpoints

import (
	"strconv"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// sliceTracker remembers the slice writes a sync made so the next sync of
// the same Service can tell that the informer cache has not caught up yet
// (upstream's endpointSliceTracker does this with generations; our slices
// carry none, so resource versions are compared instead). Syncing from a
// stale cache would create duplicate slices.
type sliceTracker struct {
	mu sync.Mutex
	// service key -> slice name -> expected resource version, "" = deleted
	want map[string]map[string]string
}

func newSliceTracker() *sliceTracker {
	return &sliceTracker{want: map[string]map[string]string{}}
}

func (t *sliceTracker) expect(svcKey, slice, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.want[svcKey] == nil {
		t.want[svcKey] = map[string]string{}
	}
	t.want[svcKey][slice] = rv
}

// observedDeleted drops the expectation for a slice the cache saw deleted,
// by us or anyone else, since nothing can make it appear again.
func (t *sliceTracker) observedDeleted(svcKey, slice string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.want[svcKey], slice)
}

func (t *sliceTracker) forget(svcKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.want, svcKey)
}

// stale reports whether the lister lags behind the writes for svcKey; met
// expectations are dropped.
func (t *sliceTracker) stale(svcKey, ns string, lister discoverylisters.EndpointSliceLister) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	stale := false
	for name, rv := range t.want[svcKey] {
		s, err := lister.EndpointSlices(ns).Get(name)
		switch {
		case rv == "" && err == nil:
			stale = true
		case rv == "":
			delete(t.want[svcKey], name)
		case err != nil || rvBefore(s, rv):
			stale = true
		default:
			delete(t.want[svcKey], name)
		}
	}
	if len(t.want[svcKey]) == 0 {
		delete(t.want, svcKey)
	}
	return stale
}

// rvBefore reports whether s is older than resource version rv. Our API
// server's resource versions are increasing integers; anything else is
// compared for equality only.
func rvBefore(s *discoveryv1.EndpointSlice, rv string) bool {
	a, errA := strconv.ParseUint(s.ResourceVersion, 10, 64)
	b, errB := strconv.ParseUint(rv, 10, 64)
	if errA != nil || errB != nil {
		return s.ResourceVersion != rv
	}
	return a < b
}
