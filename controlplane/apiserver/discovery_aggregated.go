package apiserver

import (
	"net/http"
	"sort"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
)

// aggregatedDiscovery answers /api and /apis in the aggregated form
// (apidiscovery.k8s.io/v2, the first thing kubectl and client-go ask
// for) through upstream's resource managers, which negotiate the media
// type (JSON, protobuf), keep the encoded document and its ETag, and
// answer If-None-Match with 304. Requests that do not ask for it get the
// legacy documents. The managers' content is rebuilt from the resource
// table whenever the table has changed since the last request.
type aggregatedDiscovery struct {
	mu sync.Mutex
	// seen and seenRemote are the resource snapshot and the count of
	// remote changes the managers were filled from.
	seen       *resourceSnapshot
	seenRemote int64

	core, apis               aggregated.ResourceManager
	coreHandler, apisHandler http.Handler
}

func newAggregatedDiscovery(legacyCore, legacyGroups http.HandlerFunc) *aggregatedDiscovery {
	d := &aggregatedDiscovery{
		core: aggregated.NewResourceManager("api"),
		apis: aggregated.NewResourceManager("apis"),
	}
	d.coreHandler = aggregated.WrapAggregatedDiscoveryToHandler(legacyCore, d.core, nil)
	d.apisHandler = aggregated.WrapAggregatedDiscoveryToHandler(legacyGroups, d.apis, nil)
	return d
}

// serveCore answers /api, serveGroups /apis.
func (s *Server) serveDiscoveryCore(w http.ResponseWriter, r *http.Request) {
	s.refreshDiscovery()
	s.discovery.coreHandler.ServeHTTP(w, r)
}

func (s *Server) serveDiscoveryGroups(w http.ResponseWriter, r *http.Request) {
	s.refreshDiscovery()
	s.discovery.apisHandler.ServeHTTP(w, r)
}

// refreshDiscovery refills the managers if the resource table changed.
func (s *Server) refreshDiscovery() {
	d := s.discovery
	d.mu.Lock()
	defer d.mu.Unlock()
	snap, remote := s.table.snapshot(), s.remote.changes.Load()
	if d.seen == snap && d.seenRemote == remote {
		return
	}
	core, groups := s.discoveryGroups(snap)
	d.core.SetGroups(core)
	d.apis.SetGroups(groups)
	d.seen, d.seenRemote = snap, remote
}

// discoveryGroups builds the aggregated documents of snap: the core group
// for /api, every other served group for /apis, each version listing
// what its legacy APIResourceList lists.
func (s *Server) discoveryGroups(snap *resourceSnapshot) (core, groups []apidiscoveryv2.APIGroupDiscovery) {
	byGroup := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var names []string
	for gv, remote := range s.servedGroupVersions(snap) {
		var list *metav1.APIResourceList
		switch {
		case remote:
			list = s.remote.get(gv).api.Resources
		case gv == metricsGV && snap.byGV[gv] == nil:
			list = metricsResourceList()
		default:
			list = resourceList(gv, snap.byGV[gv])
		}
		version := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
		if list != nil {
			var err error
			if version, err = versionDiscovery(gv, list); err != nil {
				s.log.Error("aggregated discovery: group version left out", "groupVersion", gv.String(), "err", err)
				continue
			}
		}
		g := byGroup[gv.Group]
		if g == nil {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}}
			byGroup[gv.Group] = g
			names = append(names, gv.Group)
		}
		g.Versions = append(g.Versions, version)
	}
	// The managers order versions (newest first) and groups themselves;
	// names are sorted only to make the input deterministic.
	sort.Strings(names)
	for _, name := range names {
		if name == "" {
			core = append(core, *byGroup[name])
			continue
		}
		groups = append(groups, *byGroup[name])
	}
	return core, groups
}

// versionDiscovery turns one legacy resource list into its aggregated
// version entry with upstream's converter. The legacy list leaves group
// and version empty where they are the list's own; the aggregated form
// names them in every responseKind.
func versionDiscovery(gv schema.GroupVersion, list *metav1.APIResourceList) (apidiscoveryv2.APIVersionDiscovery, error) {
	resources := make([]metav1.APIResource, len(list.APIResources))
	for i, r := range list.APIResources {
		if r.Version == "" {
			r.Group, r.Version = gv.Group, gv.Version
		}
		resources[i] = r
	}
	converted, err := endpoints.ConvertGroupVersionIntoToDiscovery(resources)
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	return apidiscoveryv2.APIVersionDiscovery{
		Version:   gv.Version,
		Resources: converted,
		Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
	}, nil
}
