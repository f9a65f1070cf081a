package upstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/resourcequota"

	"github.com/nodelet/nodelet/controlplane/quota"
)

// Upstream's ResourceQuotaController defaults, and the resync of the
// informers it watches for replenishment (kube-controller-manager's
// --min-resync-period, randomised to between one and two times it).
const (
	resourceQuotaWorkers    = 5
	resourceQuotaSyncPeriod = 5 * time.Minute
	quotaDiscoveryPeriod    = 30 * time.Second
	minResyncPeriod         = 12 * time.Hour
)

// buildResourceQuota wires upstream's quota controller as
// kube-controller-manager does: it keeps every ResourceQuota's
// status.used, watching each quotable kind the API server's discovery
// lists (typed informers from the shared factory, metadata informers for
// the rest) and rediscovering them every 30 s.
func buildResourceQuota(ctx context.Context, cs kubernetes.Interface, cfg controllerConfig) (func(context.Context), error) {
	meta, err := metadata.NewForConfig(cfg.rest)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	factory := informerfactory.NewInformerFactory(cfg.Informers, metadatainformer.NewSharedInformerFactory(meta, 0))
	configuration, err := quota.Configuration(generic.ListerFuncForResourceFunc(factory.ForResource), cfg.Informers)
	if err != nil {
		return nil, err
	}
	discover := cs.Discovery().ServerPreferredNamespacedResources
	// The quota monitors start the informers they add once the shared
	// ones are: Run is called after the caller started the factory.
	started := make(chan struct{})
	rq, err := resourcequota.NewController(ctx, &resourcequota.ControllerOptions{
		QuotaClient:           cs.CoreV1(),
		ResourceQuotaInformer: cfg.Informers.Core().V1().ResourceQuotas(),
		ResyncPeriod:          controller.StaticResyncPeriodFunc(resourceQuotaSyncPeriod),
		InformerFactory:       factory,
		ReplenishmentResyncPeriod: func() time.Duration {
			return time.Duration(float64(minResyncPeriod) * (rand.Float64() + 1))
		},
		DiscoveryFunc:        discover,
		IgnoredResourcesFunc: configuration.IgnoredResources,
		InformersStarted:     started,
		Registry:             generic.NewRegistry(configuration.Evaluators()),
		UpdateFilter:         quota.UpdateFilter,
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		close(started)
		go rq.Sync(ctx, discover, quotaDiscoveryPeriod)
		rq.Run(ctx, resourceQuotaWorkers)
	}, nil
}
