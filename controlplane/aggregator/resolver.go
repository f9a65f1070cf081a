package aggregator

import (
	"fmt"
	"net/url"

	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Resolver finds a ready endpoint of a Service from informers, as
// kube-apiserver's aggregator resolves with --enable-aggregator-routing:
// the address of a pod behind the Service, not its cluster IP.
type Resolver struct {
	services corelisters.ServiceLister
	slices   proxy.EndpointSliceGetter
}

// NewResolver registers the Service and EndpointSlice informers it needs
// in factory; it answers once the factory has started and synced.
func NewResolver(factory informers.SharedInformerFactory) (*Resolver, error) {
	slices, err := proxy.NewEndpointSliceIndexerGetter(factory.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, fmt.Errorf("endpoint slice index: %w", err)
	}
	return &Resolver{services: factory.Core().V1().Services().Lister(), slices: slices}, nil
}

// ResolveEndpoint returns https://POD-IP:TARGET-PORT for the Service port.
func (r *Resolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return proxy.ResolveEndpoint(r.services, r.slices, namespace, name, port)
}
