package controlplane

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/nodelet/nodelet/controlplane/aggregator"
	"github.com/nodelet/nodelet/controlplane/pki"
)

// aggregation is what the aggregation layer needs before the API server
// exists (its front-proxy certificate and the endpoint resolver the
// server proxies through) and the component that runs after.
type aggregation struct {
	frontProxy *pki.FrontProxy
	informers  informers.SharedInformerFactory
	resolver   *aggregator.Resolver
}

func newAggregation(bundle *pki.Bundle, loopbackCS kubernetes.Interface) (*aggregation, error) {
	fp, err := bundle.FrontProxy()
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(loopbackCS, 0)
	resolver, err := aggregator.NewResolver(factory)
	if err != nil {
		return nil, err
	}
	return &aggregation{frontProxy: fp, informers: factory, resolver: resolver}, nil
}

// run builds the aggregator on srv and runs it until ctx ends.
func (a *aggregation) run(ctx context.Context, c *ControlPlane, srv aggregator.Server, bundle *pki.Bundle,
	loopback *rest.Config, loopbackCS kubernetes.Interface) error {
	client, err := aggregatorclient.NewForConfig(loopback)
	if err != nil {
		return fmt.Errorf("apiregistration client: %w", err)
	}
	agg, err := aggregator.New(aggregator.Config{Server: srv, Client: client, Kube: loopbackCS, ClientCA: bundle.CAPEM(),
		Informers: a.informers, Resolver: a.resolver, FrontProxy: a.frontProxy, Log: c.cfg.Log})
	if err != nil {
		return err
	}
	return agg.Run(ctx)
}
