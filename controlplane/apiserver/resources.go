package apiserver

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// resourceTable is the set of served resources: the built-in ones, fixed
// at New, and sets that come and go while the server runs (each
// CustomResourceDefinition's versions). Requests read an immutable
// snapshot without locking; a change builds a new snapshot and swaps it
// in, so a request sees one consistent table from start to end.
type resourceTable struct {
	mu      sync.Mutex // serializes changes
	builtin []*registry.Resource
	owned   map[string][]*registry.Resource // by owner
	cur     atomic.Pointer[resourceSnapshot]
}

// resourceSnapshot indexes the resources of one moment.
type resourceSnapshot struct {
	byGV map[schema.GroupVersion]map[string]*registry.Resource
	// byGR holds each resource in its storage version.
	byGR map[schema.GroupResource]*registry.Resource
	// replaced is closed when a newer snapshot replaces this one.
	replaced chan struct{}
}

func newResourceTable(builtin []*registry.Resource) *resourceTable {
	t := &resourceTable{builtin: builtin, owned: map[string][]*registry.Resource{}}
	t.rebuild()
	return t
}

// snapshot returns the current table; callers must not modify it.
func (t *resourceTable) snapshot() *resourceSnapshot { return t.cur.Load() }

// set replaces the resources owned by owner with rs (none removes them).
// A built-in resource of the same group-version and name wins over an
// owned one, as upstream's built-in groups win over a CRD's.
func (t *resourceTable) set(owner string, rs []*registry.Resource) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(rs) == 0 {
		delete(t.owned, owner)
	} else {
		t.owned[owner] = rs
	}
	t.rebuild()
}

// rebuild makes a new snapshot from builtin and owned; t.mu held (or
// during construction).
func (t *resourceTable) rebuild() {
	s := &resourceSnapshot{
		byGV:     map[schema.GroupVersion]map[string]*registry.Resource{},
		byGR:     map[schema.GroupResource]*registry.Resource{},
		replaced: make(chan struct{}),
	}
	add := func(r *registry.Resource, builtin bool) {
		if s.byGV[r.GroupVersion] == nil {
			s.byGV[r.GroupVersion] = map[string]*registry.Resource{}
		}
		if _, taken := s.byGV[r.GroupVersion][r.Name]; taken && !builtin {
			return
		}
		s.byGV[r.GroupVersion][r.Name] = r
		if r.Stored == nil {
			s.byGR[schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}] = r
		}
	}
	for _, r := range t.builtin {
		add(r, true)
	}
	for _, rs := range t.owned {
		for _, r := range rs {
			add(r, false)
		}
	}
	if old := t.cur.Swap(s); old != nil {
		close(old.replaced)
	}
}

func (s *resourceSnapshot) lookup(gv schema.GroupVersion, name string) *registry.Resource {
	return s.byGV[gv][name]
}

// SetResources serves rs as the resources of owner (for a
// CustomResourceDefinition, its name), replacing what owner served
// before; no rs stops serving them. Stored objects are not touched.
func (s *Server) SetResources(owner string, rs []*registry.Resource) {
	s.table.set(owner, rs)
}

// LocalGroupVersions returns the group-versions this server serves itself
// (its resources' and the built-in metrics API), sorted, and a channel
// closed once that may have changed.
func (s *Server) LocalGroupVersions() ([]schema.GroupVersion, <-chan struct{}) {
	snap := s.table.snapshot()
	gvs := make([]schema.GroupVersion, 0, len(snap.byGV)+1)
	for gv := range snap.byGV {
		gvs = append(gvs, gv)
	}
	if s.cfg.Metrics != nil && snap.byGV[metricsGV] == nil {
		gvs = append(gvs, metricsGV)
	}
	slices.SortFunc(gvs, func(a, b schema.GroupVersion) int { return strings.Compare(a.String(), b.String()) })
	return gvs, snap.replaced
}
