package clusterdns

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Source is what the records are made from: the cluster's Services and
// EndpointSlices. Callers must not modify what it returns.
type Source interface {
	Service(ns, name string) *corev1.Service
	// ServicesByClusterIP are the Services with ip among their ClusterIPs.
	ServicesByClusterIP(ip netip.Addr) []*corev1.Service
	// NamespaceHasServices tells whether "<ns>.svc.<zone>" exists.
	NamespaceHasServices(ns string) bool
	// EndpointSlices of the Service ns/name.
	EndpointSlices(ns, name string) []*discoveryv1.EndpointSlice
	// SlicesByAddress are the EndpointSlices with an endpoint at ip.
	SlicesByAddress(ip netip.Addr) []*discoveryv1.EndpointSlice
}

const (
	clusterIPIndex = "clusterIP"
	serviceIndex   = "service"
	addressIndex   = "address"
)

// InformerSource is a Source over the Services and EndpointSlices
// informers of a shared factory (the nodelet's one, which the proxy and
// the pods' environment use too: one watch of each per node). No Pods: pod
// records are answered for any address, as the specification requires
// (CoreDNS's "pods insecure"), so no node has to watch every pod.
type InformerSource struct {
	factory  informers.SharedInformerFactory
	services cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
}

// NewInformerSource takes f's informers and adds the indexes DNS looks
// up by; Start runs them. The factory's owner shuts it down.
func NewInformerSource(f informers.SharedInformerFactory) (*InformerSource, error) {
	s := &InformerSource{factory: f,
		services: f.Core().V1().Services().Informer(),
		slices:   f.Discovery().V1().EndpointSlices().Informer(),
	}
	if err := addIndexers(s.services, cache.Indexers{clusterIPIndex: serviceClusterIPs}); err != nil {
		return nil, fmt.Errorf("clusterdns: service index: %w", err)
	}
	if err := addIndexers(s.slices, cache.Indexers{serviceIndex: sliceService, addressIndex: sliceAddresses}); err != nil {
		return nil, fmt.Errorf("clusterdns: endpointslice index: %w", err)
	}
	return s, nil
}

// addIndexers adds the indexes inf lacks: a Run started again after a
// failure finds those of the first one on the shared informer.
func addIndexers(inf cache.SharedIndexInformer, idx cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range idx {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return inf.AddIndexers(missing)
}

// Start starts the factory's informers not running yet (none, when the
// owner started it) and waits for their first lists; false if ctx ended
// first.
func (s *InformerSource) Start(ctx context.Context) bool {
	s.factory.Start(ctx.Done())
	return cache.WaitForCacheSync(ctx.Done(), s.services.HasSynced, s.slices.HasSynced)
}

func serviceClusterIPs(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, s := range clusterIPs(svc) {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.String())
		}
	}
	return out, nil
}

func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	if svc.Spec.ClusterIP != "" {
		return []string{svc.Spec.ClusterIP}
	}
	return nil
}

func sliceService(obj any) ([]string, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]}, nil
}

func sliceAddresses(obj any) ([]string, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ep := range es.Endpoints {
		for _, a := range ep.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				out = append(out, ip.String())
			}
		}
	}
	return out, nil
}

func (s *InformerSource) Service(ns, name string) *corev1.Service {
	obj, ok, err := s.services.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

func (s *InformerSource) ServicesByClusterIP(ip netip.Addr) []*corev1.Service {
	return byIndex[*corev1.Service](s.services, clusterIPIndex, ip.String())
}

func (s *InformerSource) NamespaceHasServices(ns string) bool {
	keys, err := s.services.GetIndexer().IndexKeys(cache.NamespaceIndex, ns)
	return err == nil && len(keys) > 0
}

func (s *InformerSource) EndpointSlices(ns, name string) []*discoveryv1.EndpointSlice {
	return byIndex[*discoveryv1.EndpointSlice](s.slices, serviceIndex, ns+"/"+name)
}

func (s *InformerSource) SlicesByAddress(ip netip.Addr) []*discoveryv1.EndpointSlice {
	return byIndex[*discoveryv1.EndpointSlice](s.slices, addressIndex, ip.String())
}

func byIndex[T any](inf cache.SharedIndexInformer, index, key string) []T {
	objs, err := inf.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
