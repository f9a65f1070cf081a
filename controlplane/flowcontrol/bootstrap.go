// Package flowcontrol keeps upstream's bootstrap API Priority and
// Fairness configuration in the cluster, as kube-apiserver's APF
// configuration ensurer does: the mandatory PriorityLevelConfigurations
// and FlowSchemas (exempt, catch-all) always as upstream defines them, the
// suggested ones created when missing and updated unless their
// apf.kubernetes.io/autoupdate-spec annotation is "false", and objects of
// ours no longer in upstream's set removed. It uses upstream's own
// ensurer and bootstrap definitions. The API server limits requests with
// upstream's classic in-flight limiter; these objects are what tools and
// charts that read or extend APF find.
package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/ensurer"
)

// ensureEvery is how often the configuration is checked again.
const ensureEvery = time.Minute

// Config wires a Bootstrap.
type Config struct {
	Client kubernetes.Interface
	Log    *slog.Logger
}

// Bootstrap is the component; New, then Run.
type Bootstrap struct {
	client  kubernetes.Interface
	log     *slog.Logger
	factory informers.SharedInformerFactory
	levels  ensurer.ObjectOps[*flowcontrolv1.PriorityLevelConfiguration]
	schemas ensurer.ObjectOps[*flowcontrolv1.FlowSchema]
}

// New builds the component and its informers.
func New(cfg Config) (*Bootstrap, error) {
	if cfg.Client == nil {
		return nil, errors.New("flowcontrol: Client is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	fc := factory.Flowcontrol().V1()
	return &Bootstrap{
		client: cfg.Client, log: cfg.Log.With("component", "flowcontrol-bootstrap"), factory: factory,
		levels:  ensurer.NewPriorityLevelConfigurationOps(cfg.Client.FlowcontrolV1().PriorityLevelConfigurations(), fc.PriorityLevelConfigurations().Lister()),
		schemas: ensurer.NewFlowSchemaOps(cfg.Client.FlowcontrolV1().FlowSchemas(), fc.FlowSchemas().Lister()),
	}, nil
}

// Run ensures the configuration now and every ensureEvery until ctx ends.
func (b *Bootstrap) Run(ctx context.Context) error {
	b.factory.Start(ctx.Done())
	defer b.factory.Shutdown()
	for typ, ok := range b.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("flowcontrol: sync the %v informer", typ)
		}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := b.ensure(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("ensure the bootstrap configuration", "err", err)
		}
	}, ensureEvery)
	return nil
}

// ensure applies upstream's strategies, priority levels before the flow
// schemas that name them, as upstream's ensurer orders them.
func (b *Bootstrap) ensure(ctx context.Context) error {
	levels := append(append([]*flowcontrolv1.PriorityLevelConfiguration(nil),
		bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...)
	schemas := append(append([]*flowcontrolv1.FlowSchema(nil),
		bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...)
	return errors.Join(
		ensurer.EnsureConfigurations(ctx, b.levels, bootstrap.SuggestedPriorityLevelConfigurations, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()),
		ensurer.EnsureConfigurations(ctx, b.levels, bootstrap.MandatoryPriorityLevelConfigurations, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.PriorityLevelConfiguration]()),
		ensurer.RemoveUnwantedObjects(ctx, b.levels, levels),
		ensurer.EnsureConfigurations(ctx, b.schemas, bootstrap.SuggestedFlowSchemas, ensurer.NewSuggestedEnsureStrategy[*flowcontrolv1.FlowSchema]()),
		ensurer.EnsureConfigurations(ctx, b.schemas, bootstrap.MandatoryFlowSchemas, ensurer.NewMandatoryEnsureStrategy[*flowcontrolv1.FlowSchema]()),
		ensurer.RemoveUnwantedObjects(ctx, b.schemas, schemas),
	)
}
